import type { FastifyInstance } from 'fastify';
import { createLimiter } from '../core/rate-limit.js';
import { operations } from '../operations.js';
import { createTransportGuard } from './guard.js';
import { createToolRunner } from './server.js';
import { registerSse } from './sse.js';
import { registerStreamableHttp } from './streamable-http.js';
import { buildToolCatalog } from './tools.js';

export { buildMcpServer } from './server.js';
export { buildToolCatalog } from './tools.js';

/** The spec's transport limit is 100 requests per 60 seconds per (user, client), both transports together. */
const MCP_RATE_WINDOW_S = 60;

/**
 * The MCP transports at /mcp (Streamable HTTP) and /sse (HTTP+SSE), behind the OAuth bearer check,
 * the Origin check and the per-(user, client) rate limit. Registered as an encapsulated plugin: the
 * body parser below (raw text, so the SDK answers malformed JSON with a JSON-RPC parse error) applies
 * to these routes only.
 */
export async function registerMcp(app: FastifyInstance) {
  const { config, database, clock, redis } = app.deps;
  const catalog = buildToolCatalog(operations);
  // `MCP_RATE_LIMIT` (default 100, the spec's value) exists so load tests can lift it; 0 turns it off.
  const limiter = config.mcpRateLimit > 0 ? createLimiter({ name: 'mcp', points: config.mcpRateLimit, durationSeconds: MCP_RATE_WINDOW_S }, redis) : undefined;
  const guard = createTransportGuard({ publicUrl: config.publicUrl, db: database.db, clock, limiter, apiKeys: config.mcpApiKeys ? app.deps.apiKeys : undefined, readTimeoutMs: config.dbReadTimeoutMs });
  const runner = createToolRunner({ db: database.db, catalog, log: app.log, readTimeoutMs: config.dbReadTimeoutMs, publicUrl: config.publicUrl });

  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_req, body, done) => done(null, body));
  app.addHook('onRequest', async (req, reply) => {
    if (!guard.checkOrigin(req, reply)) return reply;
  });

  registerStreamableHttp(app, guard, runner, config.publicUrl);
  registerSse(app, guard, runner, redis);
}
