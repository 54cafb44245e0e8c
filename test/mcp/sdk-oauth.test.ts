import { CATEGORY_IDS } from '../../src/core/categories.js';
import { readFileSync } from 'node:fs';
import { globalAgent, createServer as createHttpsServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { Client, StreamableHTTPClientTransport, UnauthorizedError, type OAuthClientProvider } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approveInBrowser } from '../helpers/oauth-flow.js';
import { startLiveApp, type LiveApp } from './helpers.js';

/**
 * The official SDK client with its built-in OAuth flow (discovery from the 401, registration or a Client ID
 * Metadata Document, PKCE, token exchange, refresh), as an assistant runs it. The only part played by the
 * test is the person in the browser: the sign-in and consent forms.
 */

const REDIRECT = 'http://127.0.0.1:8976/callback';
const TLS = new URL('../fixtures/tls/', import.meta.url);
const cert = readFileSync(new URL('cert.pem', TLS));

let t: LiveApp;
let user: { email: string; password: string };
let docServer: Server;
let docBase: string;
const documents = new Map<string, string>();

beforeAll(async () => {
  // The metadata document is served over https with a test certificate the server (same process) trusts.
  globalAgent.options.ca = cert;
  docServer = createHttpsServer({ cert, key: readFileSync(new URL('key.pem', TLS)) }, (req, res) => {
    const body = documents.get(req.url ?? '');
    if (!body) return res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=60' }).end(body);
  });
  await new Promise<void>((resolve) => docServer.listen(0, '127.0.0.1', resolve));
  docBase = `https://127.0.0.1:${(docServer.address() as AddressInfo).port}`;
  t = await startLiveApp({ env: { OAUTH_CLIENT_METADATA_ALLOW_INSECURE: 'true' } });
  user = await (await t.tenant()).user();
});
afterAll(async () => {
  globalAgent.options.ca = undefined;
  await t.close();
  docServer.closeAllConnections();
  await new Promise((resolve) => docServer.close(resolve));
});

/** Keeps what the SDK asks a client application to keep, in memory. */
class MemoryProvider implements OAuthClientProvider {
  info: Awaited<ReturnType<OAuthClientProvider['clientInformation']>>;
  saved: Awaited<ReturnType<OAuthClientProvider['tokens']>>;
  verifier = '';
  authorizationUrl: URL | undefined;
  registrations = 0;
  constructor(readonly clientMetadataUrl?: string) {}
  get redirectUrl() {
    return REDIRECT;
  }
  get clientMetadata() {
    return { client_name: 'SDK client', redirect_uris: [REDIRECT], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' };
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(info: NonNullable<MemoryProvider['info']>) {
    this.registrations += 1;
    this.info = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: NonNullable<MemoryProvider['saved']>) {
    this.saved = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
  discovery: Parameters<NonNullable<OAuthClientProvider['saveDiscoveryState']>>[0] | undefined;
  saveDiscoveryState(state: NonNullable<MemoryProvider['discovery']>) {
    this.discovery = state;
  }
  discoveryState() {
    return this.discovery;
  }
}

/** Connects as an assistant does: the first attempt asks for authorization, the second is signed in. */
async function connect(provider: MemoryProvider, categories: string[], path = '/mcp'): Promise<Client> {
  const url = new URL(`${t.origin}${path}`);
  const first = new StreamableHTTPClientTransport(url, { authProvider: provider });
  await expect(new Client({ name: 'sdk-oauth-test', version: '1.0.0' }).connect(first)).rejects.toBeInstanceOf(UnauthorizedError);
  expect(provider.authorizationUrl?.href).toMatch(`${t.origin}/oauth/authorize?`);
  const callback = await approveInBrowser(t.app, provider.authorizationUrl!, user, categories);
  expect(callback.searchParams.get('iss')).toBe(t.origin);
  await first.finishAuth(callback.searchParams);
  const client = new Client({ name: 'sdk-oauth-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(url, { authProvider: provider }));
  return client;
}

describe('the SDK client with its built-in OAuth provider', () => {
  it('registers dynamically, gets consent, and calls tools of the granted categories', async () => {
    const provider = new MemoryProvider();
    const client = await connect(provider, ['contacts']);
    expect(provider.registrations).toBe(1);
    expect(provider.info?.client_id).toMatch(/^sbc_/);
    expect(provider.saved?.refresh_token).toEqual(expect.any(String));
    const { tools } = await client.listTools();
    expect(tools.length).toBeGreaterThan(0);
    expect(tools.every((tool) => tool.name.startsWith('contacts_'))).toBe(true);
    const created = await client.callTool({ name: 'contacts_write', arguments: { method: 'create', firstName: 'Grace' } });
    expect(created.isError).toBeFalsy();
    expect((created.structuredContent as { data: { firstName: string } }).data.firstName).toBe('Grace');
    await client.close();
  });

  it('uses a Client ID Metadata Document instead of registering when it has one', async () => {
    const clientMetadataUrl = `${docBase}/sdk/client.json`;
    documents.set(
      '/sdk/client.json',
      JSON.stringify({ client_id: clientMetadataUrl, client_name: 'SDK document client', redirect_uris: [REDIRECT], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' }),
    );
    const provider = new MemoryProvider(clientMetadataUrl);
    const client = await connect(provider, ['messages']);
    expect(provider.authorizationUrl?.searchParams.get('client_id')).toBe(clientMetadataUrl);
    expect(provider.registrations).toBeLessThanOrEqual(1);
    expect(provider.info?.client_id ?? clientMetadataUrl).toBe(clientMetadataUrl);
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).toContain('messages_read');
    expect(tools.every((tool) => tool.name.startsWith('messages_'))).toBe(true);
    await client.close();
  });

  it('granted every category, lists at most 30 tools in at most 64 KB; a narrowed connection lists fewer', async () => {
    const provider = new MemoryProvider();
    const client = await connect(provider, [...CATEGORY_IDS]);
    const { tools } = await client.listTools();
    expect(tools.length).toBeGreaterThan(CATEGORY_IDS.length);
    expect(tools.length).toBeLessThanOrEqual(30);
    // The bytes on the wire, as the client received them with its token.
    const res = await fetch(`${t.origin}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18', authorization: `Bearer ${provider.saved!.access_token}` },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    const text = await res.text();
    expect((JSON.parse(text) as { result: { tools: unknown[] } }).result.tools).toHaveLength(tools.length);
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(64 * 1024);
    await client.close();

    // The same grant through a narrowed URL: the SDK finds the metadata and reuses its token.
    const narrowed = new Client({ name: 'sdk-oauth-test', version: '1.0.0' });
    await narrowed.connect(new StreamableHTTPClientTransport(new URL(`${t.origin}/mcp/x/contacts,messages`), { authProvider: provider }));
    expect((await narrowed.listTools()).tools.map((tool) => tool.name)).toEqual(['contacts_read', 'contacts_write', 'contacts_delete', 'messages_read', 'messages_write', 'messages_delete']);
    await narrowed.close();
  });
});
