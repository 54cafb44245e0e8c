import { Redis } from 'ioredis';
import { buildApp } from './app.js';
import { loadConfig, type Config } from './config.js';
import { startCommandSocket, type CommandSocket } from './cli/command-socket.js';
import { openDatabase } from './db/client.js';
import { evaluatorFromConfig } from './modules/automations/evaluator/index.js';
import { createAutomationEngine } from './workers/automation-engine.js';
import { createCleanup } from './workers/cleanup.js';
import { createWebhookDelivery } from './workers/webhook-delivery.js';

/**
 * `switchboard serve` / `npm start`: configuration -> database (+ migrations) -> app -> listen.
 * SIGTERM and SIGINT stop accepting connections, let in-flight requests finish, then exit 0.
 */
export async function serve(config: Config = loadConfig()) {
  const database = await openDatabase({ url: config.databaseUrl, dataDir: config.dataDir, statementTimeoutMs: config.dbStatementTimeoutMs });
  await database.migrate();
  const redis = config.redisUrl ? new Redis(config.redisUrl, { lazyConnect: false, maxRetriesPerRequest: 1, enableOfflineQueue: false }) : undefined;
  redis?.on('error', () => {}); // rate limits fall back to memory while Redis is away
  const app = await buildApp({ config, database, redis, logger: { level: config.logLevel } });
  // The embedded database is this process's alone: the CLI hands its commands over this socket instead.
  let commandSocket: CommandSocket | undefined;
  if (database.kind === 'pglite') {
    try {
      commandSocket = await startCommandSocket({
        dataDir: config.dataDir,
        context: {
          db: database.db,
          databaseKind: database.kind,
          migrate: () => database.migrate(),
          forgetApiKey: (keyHash) => app.deps.apiKeys.forget(keyHash),
          ...(database.backup ? { backup: () => database.backup!() } : {}),
        },
        log: app.log,
      });
    } catch (err) {
      app.log.warn({ err }, 'command socket unavailable: the CLI cannot reach this server while it runs');
    }
  }

  // Background work: claimed in the database, so every process may run it.
  const workers: { start(): void; stop(): Promise<void> }[] = [
    createCleanup({ db: database.db, clock: app.deps.clock, log: app.log, eventRetentionDays: config.eventRetentionDays }),
    createWebhookDelivery({ db: database.db, clock: app.deps.clock, log: app.log, allowInsecure: config.webhookAllowInsecure }),
  ];
  if (config.automations.worker) {
    workers.push(
      createAutomationEngine({
        db: database.db,
        clock: app.deps.clock,
        log: app.log,
        pollMs: config.automations.pollMs,
        evaluator: evaluatorFromConfig({ url: config.automations.llmUrl, model: config.automations.llmModel, apiKey: config.automations.llmApiKey }),
      }),
    );
  }

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    app.log.info({ signal }, 'shutting down');
    const force = setTimeout(() => process.exit(1), 25_000);
    force.unref();
    try {
      await commandSocket?.close();
      await app.close();
      await Promise.all(workers.map((w) => w.stop()));
      await database.close();
      redis?.disconnect();
      process.exit(0);
    } catch (err) {
      app.log.error({ err }, 'shutdown failed');
      process.exit(1);
    }
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));

  await app.listen({ port: config.port, host: config.host });
  for (const w of workers) w.start();
  app.log.info(`Switchboard listening on ${config.publicUrl} (REST ${config.publicUrl}/v1, MCP ${config.publicUrl}/mcp) with ${database.kind === 'pglite' ? `the embedded database in ${config.dataDir}` : 'PostgreSQL'}`);
  return { app, database };
}
