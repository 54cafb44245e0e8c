import cors, { type FastifyCorsOptions } from '@fastify/cors';
import type { FastifyInstance, RouteOptions } from 'fastify';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** This route's CORS policy (merged over the default, which is off); see `registerCors`. */
    cors?: FastifyCorsOptions | false;
  }
}

/**
 * CORS by `@fastify/cors`, decided per route: off by default (the REST API is called by servers with API
 * keys and sends no CORS headers), on where a route's `config.cors` says so: the OAuth endpoints and
 * metadata (`ANY_ORIGIN`) and the MCP transports (their own Origin rule, in `mcp/guard.ts`). Preflights
 * are answered in the first `onRequest` hook, before any authentication. A preflight needs no
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
