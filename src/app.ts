import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import Fastify, { LogController, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { Redis } from 'ioredis';
import { AppError } from './core/errors.js';
import { systemClock, type Clock } from './core/clock.js';
import { createLimiter } from './core/rate-limit.js';
import { withDeadline } from './core/deadline.js';
import type { Config } from './config.js';
import type { Database } from './db/client.js';
import { createApiKeyAuth, type ApiKeyAuth } from './http/api-key-auth.js';
import { sendError } from './http/errors.js';
import { registerCors } from './http/cors.js';
import { lazyRequestLogger } from './http/request-logger.js';
import { registerDocs } from './http/docs.js';
import { buildOpenApi } from './http/openapi.js';
import { registerRestRoutes } from './http/rest.js';
import { registerMcp } from './mcp/index.js';
import { registerOAuth } from './oauth/index.js';
import { setWebhookPolicy } from './modules/webhooks/webhooks.repository.js';
import { setMailHostname } from './modules/domains/dkim.js';
import { setChannelPolicy } from './modules/channels/channels.connect.js';
import { setDnsServers } from './core/dns.js';
import { configureSecrets } from './core/encryption.js';
import { recordKeyLocation } from './db/encrypted-columns.js';
import { setInboundRunner } from './modules/channels/runner.js';
import { registerChannelHooks } from './http/hooks.js';
import { initKinds } from './modules/channels/kinds.js';
import { runOperation } from './run-operation.js';
import { operations } from './operations.js';
import { VERSION } from './version.js';

export interface AppDeps {
  config: Config;
  database: Database;
  /** Shared store for rate limits and cross-instance transport sessions (optional). */
  redis?: Redis | undefined;
  clock?: Clock;
  logger?: FastifyServerOptions['logger'];
}

declare module 'fastify' {
  interface FastifyInstance {
    deps: Required<Pick<AppDeps, 'config' | 'database' | 'clock'>> & { redis: Redis | undefined; apiKeys: ApiKeyAuth };
  }
}

/** A client's own X-Request-ID is kept when it is a sane token; otherwise a UUID is made. */
const SANE_REQUEST_ID = /^[A-Za-z0-9._:@/+=-]{1,128}$/;

/**
 * What Node's HTTP parser refuses (a malformed header, a request line or headers too long) never reaches
 * Fastify: it is answered here, on the socket, in the API's error shape and with an X-Request-ID.
 */
function answerMalformedHttp(err: NodeJS.ErrnoException, socket: Duplex) {
  if (err.code === 'ECONNRESET' || !socket.writable) return socket.destroy();
  const tooLarge = err.code === 'HPE_HEADER_OVERFLOW';
  const body = new AppError('BAD_REQUEST', tooLarge ? 'The request headers are too large' : 'The request could not be read (malformed HTTP)').toBody();
  const json = JSON.stringify(body);
  const status = 400; // BAD_REQUEST's status, as everywhere else in the API
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(json)}\r\nX-Request-ID: ${randomUUID()}\r\nConnection: close\r\n\r\n${json}`,
  );
}

/** Builds the whole service (REST, OpenAPI, docs, OAuth, MCP) without listening; tests use `inject`. */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  setWebhookPolicy({ allowInsecure: deps.config.webhookAllowInsecure });
  setMailHostname(new URL(deps.config.publicUrl).hostname);
  setChannelPolicy({ allowPrivate: deps.config.channelsAllowPrivate });
  setDnsServers(deps.config.dnsServers);
  setInboundRunner(runOperation);
  initKinds(deps.config);
  configureSecrets({
    ...deps.config.secrets,
    dataDir: deps.config.dataDir,
    requireConfiguredKey: deps.database.kind === 'postgres',
    log: (message) => app.log.warn(message),
    // Remembered in the database, so that a server without this key can later say where it was.
    onKeyCreated: (key) => void recordKeyLocation(deps.database.db, key).catch((err: unknown) => app.log.warn({ err }, 'could not record where the secrets key lives')),
  });
  const app = Fastify({
    logger: deps.logger ?? false,
    bodyLimit: 1024 * 1024,
    trustProxy: deps.config.trustProxy,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && SANE_REQUEST_ID.test(given) ? given : randomUUID();
    },
    // Errors are logged by the error handler; per-request access logs are left to the proxy in front.
    logController: new LogController({ disableRequestLogging: true }),
    // So a request's child logger is made only when the request logs something.
    childLoggerFactory: lazyRequestLogger,
    routerOptions: { maxParamLength: 200 },
    // Errors Fastify raises before routing (an undecodable URL) get the API's error shape too.
    frameworkErrors: (err, req, reply) => sendError(err, req, reply),
    clientErrorHandler: answerMalformedHttp,
  });

  const apiKeys = createApiKeyAuth(database(deps).db, deps.config.apiKeyCacheMs);
  app.decorate('deps', { config: deps.config, database: deps.database, clock: deps.clock ?? systemClock, redis: deps.redis, apiKeys });

  // A callback hook, not an async one: it runs on every request, and a promise per request costs more than the header.
  app.addHook('onRequest', (req, reply, done) => {
    reply.header('x-request-id', req.id);
    done();
  });
  // GET /metrics and the timing of every request, only when a scraper may read them (METRICS_TOKEN); a
  // process without it never loads prom-client.
  if (deps.config.metricsToken) {
    const { createMetrics } = await import('./http/metrics.js');
    createMetrics({ database: deps.database, clock: deps.clock ?? systemClock, readTimeoutMs: deps.config.dbReadTimeoutMs, token: deps.config.metricsToken }).register(app);
  }
  app.setErrorHandler((err, req, reply) => sendError(err, req, reply));
  app.setNotFoundHandler((req, reply) => sendError(new AppError('NOT_FOUND', `No route for ${req.method} ${req.url.split('?')[0]}`), req, reply));

  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_req, reply) => {
    try {
      await withDeadline(deps.database.ping(), deps.config.dbReadTimeoutMs);
      return { status: 'ok', database: deps.database.kind };
    } catch {
      return reply.code(503).send({ status: 'unavailable', database: deps.database.kind });
    }
  });

  const openapi = buildOpenApi(operations, { serverUrl: `${deps.config.publicUrl}/v1`, version: VERSION });
  await app.register(
    async (v1) => {
      v1.get('/openapi.json', async () => openapi);
      await registerDocs(v1);
      const limiter = deps.config.restRateLimit > 0 ? createLimiter({ name: 'rest', points: deps.config.restRateLimit, durationSeconds: 60 }, deps.redis) : undefined;
      registerRestRoutes(v1, operations, { db: deps.database.db, auth: apiKeys, limiter, readTimeoutMs: deps.config.dbReadTimeoutMs });
    },
    { prefix: '/v1' },
  );

  await registerChannelHooks(app, { run: runOperation, publicUrl: deps.config.publicUrl, rateLimit: deps.config.sms.hookRateLimit, failureLimit: deps.config.sms.hookFailureLimit });
  // The only endpoints a browser calls (OAuth's documents and endpoints, the MCP transports) in one context
  // with the CORS hook: no other request runs it (`http/cors.ts`).
  await app.register(async (browserFacing) => {
    await registerCors(browserFacing);
    await browserFacing.register(registerOAuth);
    await browserFacing.register(registerMcp);
  });
  return app;
}

const database = (deps: AppDeps) => deps.database;
