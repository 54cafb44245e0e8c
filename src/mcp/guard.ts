import { bearerToken, isLoopbackHost } from '../core/secrets.js';
import { CATEGORY_IDS, isCategory } from '../core/categories.js';
import type { ApiKeyAuth, ApiKeyPrincipal } from '../http/api-key-auth.js';
import { forbiddenKeysIn } from '../core/schemas.js';
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import type { Clock } from '../core/clock.js';
import type { Limiter } from '../core/rate-limit.js';
import type { Db } from '../db/client.js';
import { verifyAccessToken, type Grant } from '../oauth/grants.js';
import { matchResource } from '../oauth/resource.js';
import { withDeadline } from '../core/deadline.js';
import type { FastifyCorsOptions } from '@fastify/cors';

/** The transport paths; each has its own route-scoped protected-resource metadata document. */
export type TransportPath = '/mcp' | '/sse';

/** Headers a browser client must be able to read on transport responses (401s and 429s included). */
const EXPOSED_HEADERS = 'WWW-Authenticate, Mcp-Session-Id, Mcp-Protocol-Version, Retry-After, X-Request-ID';

const INVALID_TOKEN = { error: 'invalid_token', error_description: 'Missing or invalid access token' } as const;

/** A JSON-RPC error body; the transports answer their own failures (403, 404, 405, 429) in this shape. */
export const jsonRpcError = (id: string | number | null, code: number, message: string) => ({ jsonrpc: '2.0' as const, id, error: { code, message } });

/** The JSON-RPC id of a request body, or null (notification, batch, unreadable body). */
export function requestIdOf(body: unknown): string | number | null {
  if (body && typeof body === 'object' && !Array.isArray(body)) {
    const id = (body as { id?: unknown }).id;
    if (typeof id === 'string' || typeof id === 'number') return id;
  }
  return null;
}

/**
 * The JSON-RPC error for a message whose `params` hold `__proto__`, `constructor` or `prototype` keys, or
 * undefined. The SDK's own parsing would silently drop a `__proto__` key (it assigns keys one by one), so
 * such messages are refused here, naming the key, before the SDK sees them.
 */
export function prototypeKeyError(body: unknown): ReturnType<typeof jsonRpcError> | undefined {
  const messages = Array.isArray(body) ? body : [body];
  for (const m of messages) {
    const keys = m && typeof m === 'object' ? forbiddenKeysIn((m as { params?: unknown }).params) : [];
    if (keys.length) return jsonRpcError(requestIdOf(m), -32602, `Invalid params: unrecognized key "${keys[0]}"`);
  }
  return undefined;
}

export interface GuardOptions {
  publicUrl: string;
  db: Db;
  clock: Clock;
  limiter: Limiter | undefined;
  /** Set when API keys are accepted as bearer tokens too (`MCP_API_KEYS=true`). */
  apiKeys?: Pick<ApiKeyAuth, 'verify'> | undefined;
  /** The bearer check answers 503 when the database has not answered within this (ms). */
  readTimeoutMs: number;
}

/** The grant an API key stands for on the MCP transports: its organization, its permissions' categories. */
function apiKeyGrant(principal: ApiKeyPrincipal, publicUrl: string): Grant {
  const categories = CATEGORY_IDS.filter((c) => principal.permissions.includes('*') || principal.permissions.some((p) => p.startsWith(`${c}:`)));
  return {
    id: principal.keyId,
    userId: principal.keyId,
    organizationId: principal.orgId,
    clientId: 'api-key',
    scopes: ['mcp'],
    categories,
    resource: publicUrl,
    // The key's own permissions decide (a key with only :read permissions sees only the read tools).
    readOnly: false,
    apiKey: { id: principal.keyId, permissions: principal.permissions },
  };
}

export interface TransportGuard {
  /**
   * The transports' CORS policy (route config for `@fastify/cors`): the origins `checkOrigin` lets through
   * get their Origin back, a preflight allows the methods and the request headers it asks for (the
   * 2026-07-28 revision's `Mcp-Param-<name>` headers take any name), and a browser may read the headers
   * a client needs, on 401s and 429s too.
   */
  cors: FastifyCorsOptions;
  /** The Origin/Host check (403 otherwise). Returns false when the reply is sent. */
  checkOrigin(req: FastifyRequest, reply: FastifyReply): boolean;
  /** The grant behind the bearer token, or undefined after sending the exact 401 of the spec. */
  authenticate(req: FastifyRequest, reply: FastifyReply, path: TransportPath): Promise<Grant | undefined>;
  /** A route `onRequest` hook: the bearer check before the body is read (401 without reading it). */
  authHook(path: TransportPath): onRequestAsyncHookHandler;
  /** The grant `authHook` found for this request. */
  grantOf(req: FastifyRequest): Grant;
  /** Counts one request of (user, client); false after sending the 429. */
  consume(grant: Grant, reply: FastifyReply, requestId: string | number | null): Promise<boolean>;
  /**
   * A transport's endpoint at `path` and `path/` (a pasted URL often ends with a slash), and at
   * `path/x/<category>[,<category>…]`, which narrows the grant to those categories for this connection:
   * the bearer check, the rate limit, then `handler` for `method` with the request's (narrowed) grant, the
   * categories it was narrowed to, and its JSON body (undefined when there is none or it is not JSON); any
   * other method is a 405 saying `notAllowed`, an unknown category a 404.
   */
  endpoint(
    app: FastifyInstance,
    path: TransportPath,
    method: 'GET' | 'POST',
    notAllowed: string,
    handler: (req: FastifyRequest, reply: FastifyReply, grant: Grant, body: unknown, narrowedTo: string[] | undefined) => Promise<unknown>,
  ): void;
}

/** The categories a connection narrows its grant to, from a `/x/<category>[,<category>…]` path: a list, or an error message. */
export function requestedCategories(raw: string): string[] | { unknown: string[] } {
  const names = raw.split(',').map((n) => n.trim());
  const unknown = names.filter((n) => !isCategory(n));
  return unknown.length ? { unknown } : names;
}

/**
 * The grant as one connection uses it: only the tools of `categories` among those granted. A narrower
 * view never widens: a category the grant lacks stays out.
 */
export function narrowGrant(grant: Grant, categories: readonly string[] | undefined): Grant {
  return categories ? { ...grant, categories: grant.categories.filter((c) => categories.includes(c)) } : grant;
}

/** A request body as JSON, or undefined when there is none or it is not JSON (the transports answer that themselves). */
export function parseJson(raw: unknown): unknown {
  if (typeof raw !== 'string') return undefined;
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * A check of a header's value, remembered for the values seen: every request of a client sends the same
 * Host and Origin, so the URL is parsed once, not per request. Bounded (a client may send any value).
 */
function remembered(check: (value: string) => boolean, max = 64): (value: string) => boolean {
  const seen = new Map<string, boolean>();
  return (value) => {
    let verdict = seen.get(value);
    if (verdict === undefined) {
      verdict = check(value);
      if (seen.size >= max) seen.clear();
      seen.set(value, verdict);
    }
    return verdict;
  };
}

export function createTransportGuard(opts: GuardOptions): TransportGuard {
  const publicUrl = new URL(opts.publicUrl);
  const publicOrigin = publicUrl.origin;
  const publicIsLoopback = isLoopbackHost(publicUrl.hostname);
  const challenge = (path: TransportPath) =>
    `Bearer realm="OAuth", resource_metadata="${publicOrigin}/.well-known/oauth-protected-resource${path}", error="invalid_token", error_description="Missing or invalid access token"`;
  const challenges = { '/mcp': challenge('/mcp'), '/sse': challenge('/sse') } as const;

  // A token is good for both transports when it is bound to the origin, /mcp or /sse (RFC 8707); the
  // verdict per resource is remembered (a grant's resource is one of a few URLs).
  const ourResource = remembered((resource) => matchResource(resource, opts.publicUrl) !== undefined);

  async function lookUp(token: string): Promise<Grant | undefined> {
    const grant = await verifyAccessToken(opts.db, token, opts.clock);
    if (grant && grant.scopes.includes('mcp') && ourResource(grant.resource)) return grant;
    const principal = !grant && opts.apiKeys ? await opts.apiKeys.verify(token) : undefined;
    return principal ? apiKeyGrant(principal, opts.publicUrl) : undefined;
  }

  /**
   * Browsers always send Origin on cross-origin requests and on POSTs: only the service's own origin
   * may call (and any loopback origin when the service itself runs on loopback, e.g. a local
   * inspector). Requests without Origin come from non-browser clients and are let through to the
   * bearer check. A loopback service also checks Host, the classic DNS-rebinding defence.
   */
  const loopbackOrigin = remembered((origin) => {
    try {
      const url = new URL(origin);
      return (url.protocol === 'http:' || url.protocol === 'https:') && isLoopbackHost(url.hostname);
    } catch {
      return false;
    }
  });
  const originAllowed = (origin: string | undefined) => {
    if (origin === undefined) return true;
    if (origin === publicOrigin) return true;
    return publicIsLoopback && loopbackOrigin(origin);
  };
  const loopbackHost = remembered((host) => {
    try {
      return isLoopbackHost(new URL(`http://${host}`).hostname);
    } catch {
      return false;
    }
  });
  const hostAllowed = (host: string | undefined) => !publicIsLoopback || (!!host && loopbackHost(host));

  const grants = new WeakMap<FastifyRequest, Grant>();

  const guard: TransportGuard = {
    cors: { origin: (origin, done) => done(null, originAllowed(origin)), methods: 'GET, POST, DELETE, OPTIONS', exposedHeaders: EXPOSED_HEADERS, maxAge: 86400 },

    checkOrigin(req, reply) {
      const origin = req.headers.origin;
      if (!originAllowed(origin) || !hostAllowed(req.headers.host)) {
        void reply.code(403).type('application/json').send(jsonRpcError(null, -32000, 'Forbidden: Origin or Host not allowed'));
        return false;
      }
      return true;
    },

    async authenticate(req, reply, path) {
      const token = bearerToken(req.headers.authorization);
      const found = token ? await withDeadline(lookUp(token), opts.readTimeoutMs) : undefined;
      if (found) return found;
      void reply.code(401).header('www-authenticate', challenges[path]).type('application/json').send(INVALID_TOKEN);
      return undefined;
    },

    authHook(path) {
      return async (req, reply) => {
        const grant = await guard.authenticate(req, reply, path);
        if (!grant) return reply;
        grants.set(req, grant);
      };
    },

    grantOf(req) {
      const grant = grants.get(req);
      if (!grant) throw new Error('transport route without the bearer check');
      return grant;
    },

    async consume(grant, reply, requestId) {
      if (!opts.limiter) return true;
      const verdict = await opts.limiter.consume(`${grant.userId}:${grant.clientId}`);
      if (verdict.allowed) return true;
      void reply.code(429).header('retry-after', String(verdict.retryAfter)).type('application/json').send(jsonRpcError(requestId, -32004, 'Rate limit exceeded'));
      return false;
    },

    endpoint(app, path, method, notAllowed, handler) {
      for (const url of [path, `${path}/`, `${path}/x/:categories`, `${path}/x/:categories/`]) {
        app.route({
          method: ['GET', 'POST', 'DELETE', 'OPTIONS'],
          url,
          config: { cors: guard.cors },
          onRequest: guard.authHook(path),
          handler: async (req, reply) => {
            const grant = guard.grantOf(req);
            const body = parseJson(req.body);
            if (!(await guard.consume(grant, reply, requestIdOf(body)))) return reply;
            if (req.method !== method) return reply.code(405).header('allow', `${method}, OPTIONS`).type('application/json').send(jsonRpcError(null, -32000, notAllowed));
            const raw = (req.params as { categories?: string }).categories;
            const requested = raw === undefined ? undefined : requestedCategories(raw);
            if (requested && !Array.isArray(requested)) {
              const message = `Unknown category ${requested.unknown.map((n) => JSON.stringify(n)).join(', ')}: one of ${CATEGORY_IDS.join(', ')}`;
              return reply.code(404).type('application/json').send(jsonRpcError(requestIdOf(body), -32000, message));
            }
            return handler(req, reply, narrowGrant(grant, requested), body, requested);
          },
        });
      }
    },
  };
  return guard;
}
