import cors, { type FastifyCorsOptions } from '@fastify/cors';
import type { FastifyInstance, RouteOptions } from 'fastify';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** This route's CORS policy (merged over the default, which is off); see `registerCors`. */
    cors?: FastifyCorsOptions | false;
  }
}

/**
 * CORS by `@fastify/cors`, decided per route, for the context it is registered in: `buildApp` registers it
 * only around the OAuth server and the MCP transports, the endpoints a browser calls, so the REST API, the
 * health checks and the API reference (called by servers with API keys, or read as pages) never run its
 * hook and send no CORS headers. Within that context it is off by default, on where a route's
 * `config.cors` says so: the OAuth endpoints and metadata (`ANY_ORIGIN`) and the MCP transports (their own
 * Origin rule, in `mcp/guard.ts`). Preflights are answered in the first `onRequest` hook of the route,
 * before any authentication; a preflight of any other path is a 404. A preflight needs no
 * `Access-Control-Request-Method` to be answered (non-browser clients probe with a bare OPTIONS).
 */
export async function registerCors(app: FastifyInstance) {
  await app.register(cors, { origin: false, strictPreflight: false });
}

/** Public endpoints that carry no cookies: any origin may call them, without credentials. */
export const ANY_ORIGIN: FastifyCorsOptions = {
  origin: '*',
  methods: 'GET, POST, OPTIONS',
  allowedHeaders: 'authorization, content-type, mcp-protocol-version',
  maxAge: 600,
};

/** Route options of a POST endpoint that any origin may call, its preflight (OPTIONS) answered by the CORS hook. */
export const ANY_ORIGIN_POST: Pick<RouteOptions, 'method' | 'config'> = { method: ['POST', 'OPTIONS'], config: { cors: ANY_ORIGIN } };
