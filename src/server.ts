import closeWithGrace from 'close-with-grace';
import { Redis } from 'ioredis';
import { buildApp } from './app.js';
import { loadConfig, type Config } from './config.js';
import { startCommandSocket, type CommandSocket } from './cli/command-socket.js';
import { openDatabase } from './db/client.js';
import { mailHostname } from './modules/domains/dkim.js';
import { evaluatorFromConfig } from './workers/evaluator/index.js';
import { createAutomationEngine } from './workers/automation-engine.js';
import { createCleanup } from './workers/cleanup.js';
import { createImapSync } from './workers/imap-sync.js';
import { createMailSender } from './workers/mail-sender.js';
import { createWebhookDelivery } from './workers/webhook-delivery.js';
import type { SmtpReceiver } from './workers/smtp-receiver.js';
import { readFileSync } from 'node:fs';
import { assertSecretsReadable, reencryptSecrets } from './db/encrypted-columns.js';

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
    createMailSender({
      db: database.db,
      clock: app.deps.clock,
      log: app.log,
      allowPrivate: config.channelsAllowPrivate,
      sendTimeoutMs: config.mailSendTimeoutMs,
      hostname: mailHostname(),
    }),
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

  // Every stored secret must be readable (else start-up refuses, saying which key is missing); after a
  // rotation, what the previous keys encrypted is encrypted again under SECRETS_KEY.
  await assertSecretsReadable(database.db);
  if (config.secrets.previousKeys.length > 0) {
    const changed = await reencryptSecrets(database.db);
    app.log.info(`Re-encrypted ${changed} stored secret(s) (passwords, DKIM keys) under the current SECRETS_KEY`);
  }

  // The built-in SMTP receiver, when SMTP_PORT is set.
  let smtpReceiver: SmtpReceiver | undefined;
  if (config.smtp.port !== undefined) {
    if (Boolean(config.smtp.tlsCert) !== Boolean(config.smtp.tlsKey)) throw new Error('SMTP_TLS_CERT and SMTP_TLS_KEY must be set together');
    // Loaded only when it runs: a process without SMTP_PORT does not hold the SMTP server library.
    const { createSmtpReceiver } = await import('./workers/smtp-receiver.js');
    smtpReceiver = createSmtpReceiver({
      db: database.db,
      log: app.log,
      port: config.smtp.port,
      host: config.smtp.host,
      serverName: config.publicUrl ? new URL(config.publicUrl).hostname : undefined,
      maxBytes: config.smtp.maxBytes,
      tls: config.smtp.tlsCert && config.smtp.tlsKey ? { cert: readFileSync(config.smtp.tlsCert), key: readFileSync(config.smtp.tlsKey) } : undefined,
      maxConnections: config.smtp.maxConnections,
      maxConnectionsPerIp: config.smtp.maxConnectionsPerIp,
      ratePerMinute: config.smtp.ratePerMinute,
      attachmentMaxBytes: config.attachmentMaxBytes,
      clock: app.deps.clock,
    });
  }

  if (config.imap.worker) {
    workers.push(
      createImapSync({
        db: database.db,
        clock: app.deps.clock,
        log: app.log,
        initialDays: config.imap.initialDays,
        pollMs: config.imap.pollMs,
        maxChannels: config.imap.maxChannels,
        allowPrivate: config.channelsAllowPrivate,
        inbound: { attachmentMaxBytes: config.attachmentMaxBytes },
      }),
    );
  }

  // On SIGTERM or SIGINT (or an error nothing caught): close in order, then exit 0 (1 after an error);
  // a second signal, or 25 s without an end, exits at once.
  closeWithGrace({ delay: 25_000, logger: { error: (msg: string) => app.log.error(msg) } }, async ({ signal, err }) => {
    if (err) app.log.error({ err }, 'stopping after an unexpected error');
    else app.log.info({ signal }, 'shutting down');
    await commandSocket?.close();
    await smtpReceiver?.stop();
    await app.close();
    await Promise.all(workers.map((w) => w.stop()));
    await database.close();
    redis?.disconnect();
  });

  await app.listen({ port: config.port, host: config.host });
  for (const w of workers) w.start();
  if (smtpReceiver) {
    const bound = await smtpReceiver.listen();
    app.log.info(`SMTP receiver listening on ${bound.address} port ${bound.port}${config.smtp.tlsCert ? ' (STARTTLS offered)' : ''}`);
  }
  app.log.info(`Switchboard listening on ${config.publicUrl} (REST ${config.publicUrl}/v1, MCP ${config.publicUrl}/mcp) with ${database.kind === 'pglite' ? `the embedded database in ${config.dataDir}` : 'PostgreSQL'}`);
  return { app, database };
}
