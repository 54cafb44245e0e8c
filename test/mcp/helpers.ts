import { randomUUID } from 'node:crypto';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport as SseTransportV1 } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport as HttpTransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as ClientV2, SSEClientTransport as SseTransportV2, StreamableHTTPClientTransport as HttpTransportV2 } from '@modelcontextprotocol/client';
import type { AppDeps } from '../../src/app.js';
import { CATEGORY_IDS, type Category } from '../../src/core/categories.js';
import type { Clock } from '../../src/core/clock.js';
import { oauthClients } from '../../src/db/schema.js';
import { createGrant, issueTokens, type Grant } from '../../src/oauth/grants.js';
import { createTestApp, type Tenant, type TestApp } from '../helpers/app.js';
import { freePort } from '../helpers/listen.js';


export interface LiveApp extends TestApp {
  /** `http://127.0.0.1:<port>`, also the app's PUBLIC_URL. */
  origin: string;
}

/** The whole app listening on 127.0.0.1 with PUBLIC_URL set to its own origin. */
export async function startLiveApp(overrides: Partial<AppDeps> & { env?: Record<string, string> } = {}): Promise<LiveApp> {
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const t = await createTestApp({ ...overrides, env: { ...overrides.env, PUBLIC_URL: origin } });
  await t.app.listen({ port, host: '127.0.0.1' });
  return Object.assign(t, { origin });
}

export interface MintOptions {
  categories?: Category[];
  scopes?: string[];
  /** Defaults to `<origin>/mcp`. */
  resource?: string;
  /** Reuse a client / user to get a second token of the same (user, client). */
  clientId?: string;
  userId?: string;
  clock?: Clock;
  /** A "Read only" grant: only the tools that change nothing. */
  readOnly?: boolean;
}

export interface Minted {
  token: string;
  grant: Grant;
  clientId: string;
  userId: string;
}

/** A grant and its access token, minted directly (the OAuth flow is tested end to end elsewhere). */
export async function mintToken(t: LiveApp, tenant: Tenant, opts: MintOptions = {}): Promise<Minted> {
  const db = t.database.db;
  const userId = opts.userId ?? (await tenant.user()).id;
  let clientId = opts.clientId;
  if (!clientId) {
    clientId = `test-client-${randomUUID()}`;
    await db.insert(oauthClients).values({
      id: clientId,
      tokenEndpointAuthMethod: 'none',
      redirectUris: ['http://127.0.0.1:9/callback'],
      grantTypes: ['authorization_code', 'refresh_token'],
      responseTypes: ['code'],
      clientName: 'Test client',
    });
  }
  const grant = await createGrant(db, {
    userId,
    organizationId: tenant.orgId,
    clientId,
    scopes: opts.scopes ?? ['mcp'],
    categories: opts.categories ?? [...CATEGORY_IDS],
    resource: opts.resource ?? `${t.origin}/mcp`,
    ...(opts.readOnly ? { readOnly: true } : {}),
  });
  const tokens = await issueTokens(db, grant, opts.clock ?? (() => new Date()));
  return { token: tokens.access_token, grant, clientId, userId };
}

const bearer = (token: string) => ({ headers: { Authorization: `Bearer ${token}` } });

/** A transport's path: `mcp` or `sse`, optionally narrowed (`mcp/x/contacts,messages`). */
export type TransportPath = 'mcp' | 'sse' | `${'mcp' | 'sse'}/x/${string}`;
const isSse = (path: TransportPath) => path === 'sse' || path.startsWith('sse/');

/** A connected v1 SDK client over Streamable HTTP (`/mcp`) or HTTP+SSE (`/sse`). */
export async function v1Client(origin: string, token: string, transport: TransportPath) {
  const client = new ClientV1({ name: 'switchboard-test-v1', version: '1.0.0' });
  const url = new URL(`/${transport}`, origin);
  if (!isSse(transport)) {
    await client.connect(new HttpTransportV1(url, { requestInit: bearer(token) }));
  } else {
    // The v1 SSE transport takes headers for the stream from eventSourceInit and for POSTs from requestInit.
    await client.connect(
      new SseTransportV1(url, {
        requestInit: bearer(token),
        eventSourceInit: { fetch: (u, init) => fetch(u, { ...init, headers: { ...(init?.headers as Record<string, string>), Authorization: `Bearer ${token}` } }) },
      }),
    );
  }
  return client;
}

/**
 * A connected v2 SDK client over Streamable HTTP (`/mcp`) or HTTP+SSE (`/sse`). Over `/mcp` it negotiates
 * (`server/discover`, so the current revision) unless `era` is 'legacy' (the client's default: `initialize`).
 */
export async function v2Client(origin: string, token: string, transport: TransportPath, era: 'negotiate' | 'legacy' = isSse(transport) ? 'legacy' : 'negotiate') {
  const client = new ClientV2({ name: 'switchboard-test-v2', version: '1.0.0' }, era === 'negotiate' ? { versionNegotiation: { mode: 'auto' } } : {});
  const url = new URL(`/${transport}`, origin);
  await client.connect(isSse(transport) ? new SseTransportV2(url, { requestInit: bearer(token) }) : new HttpTransportV2(url, { requestInit: bearer(token) }));
  return client;
}

/** One raw JSON-RPC POST to /mcp (2025 revision, no session): status, headers and parsed body. */
export async function rawMcp(origin: string, token: string | undefined, body: unknown, headers: Record<string, string> = {}, path = '/mcp') {
  const res = await fetch(`${origin}${path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-06-18',
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...headers,
    },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  return { status: res.status, headers: res.headers, text, json: json as any };
}
