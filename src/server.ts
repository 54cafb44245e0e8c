import closeWithGrace from 'close-with-grace';
import { buildApp } from './app.js';
import { loadConfig, type Config } from './config.js';
import { startCommandSocket, type CommandSocket } from './cli/command-socket.js';
import { openDatabase } from './db/client.js';
import { describePostgres } from './core/database-names.js';
import { databaseProblem, interruptedError, listenProblem, watchStartupSignals } from './startup.js';
import { mailHostname } from './modules/domains/dkim.js';
import { evaluatorFromConfig } from './workers/evaluator/index.js';
import { createAutomationEngine } from './workers/automation-engine.js';
import { createCleanup } from './workers/cleanup.js';
import { closeParsePool, configureParsePool, onParsePoolError } from './modules/channels/email/parse-pool.js';
import { createImapSync } from './workers/imap-sync.js';
import { createChannelSenders } from './workers/channel-senders.js';
import { createMediaFetcher } from './workers/media-fetcher.js';
import { createSnoozeWorker } from './workers/snoozes.js';
import { createSmppBinds, deliverWindowOf } from './workers/smpp-binds.js';
import { runOperation } from './run-operation.js';
import { createWebhookDelivery } from './workers/webhook-delivery.js';
import type { SmtpReceiver } from './workers/smtp-receiver.js';
import { readFileSync } from 'node:fs';
import { assertSecretsReadable, recordKeyLocation, reencryptSecrets } from './db/encrypted-columns.js';
import { currentKeyId, currentKeyLocation } from './core/encryption.js';

/** The longest a stop takes (SIGTERM to exit). */
const STOP_MS = 3_000;
/** Requests still under way this long after a stop began have their connections closed. */
const FORCE_CLOSE_MS = 1_800;
/** The longest the workers may take to end (sessions, leases given back); whatever is left is taken over by lease expiry. */
const WORKERS_STOP_MS = 1_500;

/** Waits for `work`, at most `ms` (its failure is left to the step itself: a stop goes on). */
const within = (ms: number, work: Promise<unknown>) =>
  Promise.race([work.catch(() => {}), new Promise<void>((resolve) => setTimeout(resolve, ms).unref())]);

/**
 * `switchboard serve` / `npm start`: configuration -> database (+ migrations) -> app -> listen.
 * SIGTERM and SIGINT stop accepting connections, give the workers' leases back, let in-flight requests
 * finish (for up to 1.8 s), then exit 0, within 3 s.
 */
export async function serve(config: Config = loadConfig()) {
  // Until the server's own shutdown takes over, a signal ends start-up at its next step, and whatever
  // start-up fails on closes what it opened (in reverse) before it says, in one line, what to do.
  const signals = watchStartupSignals();
  const opened: (() => Promise<unknown> | void)[] = [];
  const undo = async () => {
    for (const close of opened.reverse()) await Promise.resolve().then(close).catch(() => {});
  };
  try {
    return await start(config, signals, opened);
  } catch (err) {
    await undo();
    throw signals.interrupted ? interruptedError(signals.interrupted) : databaseProblem(err, config.databaseUrl);
  } finally {
    signals.stop();
  }
}

async function start(config: Config, signals: ReturnType<typeof watchStartupSignals>, opened: (() => Promise<unknown> | void)[]) {
  process.stderr.write(`Starting Switchboard with ${config.databaseUrl ? `the ${describePostgres(config.databaseUrl)} (DATABASE_URL)` : `the embedded database in ${config.dataDir}`}…\n`);
  const database = await openDatabase({ url: config.databaseUrl, dataDir: config.dataDir, statementTimeoutMs: config.dbStatementTimeoutMs });
  opened.push(() => database.close());
  signals.check();
  await database.migrate();
  signals.check();
  // Loaded only when configured: a process without Redis does not hold its client.
  const redis = config.redisUrl ? new (await import('ioredis')).Redis(config.redisUrl, { lazyConnect: false, maxRetriesPerRequest: 1, enableOfflineQueue: false }) : undefined;
  redis?.on('error', () => {}); // rate limits fall back to memory while Redis is away
  if (redis) opened.push(() => redis.disconnect());
  const app = await buildApp({ config, database, redis, logger: { level: config.logLevel } });
  opened.push(() => app.close());
  signals.check();
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
    if (commandSocket) opened.push(() => commandSocket!.close());
  }

  // Background work: claimed in the database, so every process may run it.
  const workers: { start(): void; stop(): Promise<void> }[] = [
    createCleanup({ db: database.db, clock: app.deps.clock, log: app.log, eventRetentionDays: config.eventRetentionDays }),
    createWebhookDelivery({ db: database.db, clock: app.deps.clock, log: app.log, allowInsecure: config.webhookAllowInsecure }),
    createSnoozeWorker({ db: database.db, clock: app.deps.clock, log: app.log }),
    // Every channel kind's outbox, in one loop (each kind's transmit step).
    createChannelSenders({
      db: database.db,
      clock: app.deps.clock,
      log: app.log,
      allowPrivate: config.channelsAllowPrivate,
      config,
      hostname: mailHostname(),
    }),
    createMediaFetcher({
      db: database.db,
      clock: app.deps.clock,
      log: app.log,
      allowPrivate: config.channelsAllowPrivate,
      timeoutMs: config.sms.sendTimeoutMs,
      maxBytes: config.attachmentMaxBytes,
    }),
    // SMPP channels: one process holds each bind (a lease), texts go over it, what the SMSC delivers comes in on it.
    createSmppBinds({
      db: database.db,
      clock: app.deps.clock,
      log: app.log,
      run: runOperation,
      allowPrivate: config.channelsAllowPrivate,
      timeoutMs: config.sms.sendTimeoutMs,
      deliverRateLimit: config.sms.smppDeliverRateLimit,
      deliverWindow: deliverWindowOf(database.kind),
      leaseMs: config.channelLeaseMs,
    }),
  ];
  if (config.automations.worker) {
    workers.push(
      createAutomationEngine({
        db: database.db,
        clock: app.deps.clock,
        log: app.log,
        pollMs: config.automations.pollMs,
        limits: { automaticMessagesPerHour: config.automations.automaticMessagesPerHour },
        evaluator: evaluatorFromConfig({ url: config.automations.llmUrl, model: config.automations.llmModel, apiKey: config.automations.llmApiKey }),
      }),
    );
  }

  // Every stored secret must be readable (else start-up refuses, saying which key is missing); after a
  // rotation, what the previous keys encrypted is encrypted again under SECRETS_KEY.
  await assertSecretsReadable(database.db);
  const keyId = currentKeyId();
  if (keyId) await recordKeyLocation(database.db, { id: keyId, location: currentKeyLocation() });
  if (config.secrets.previousKeys.length > 0) {
    const changed = await reencryptSecrets(database.db);
    app.log.info(`Re-encrypted ${changed} stored secret(s) (passwords, DKIM keys) under the current SECRETS_KEY`);
  }

  // Received mail is read in worker threads (started on the first email).
  configureParsePool(config.emailParse);
  onParsePoolError((err) => app.log.error({ err }, 'A mail reading thread failed'));

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
      ...config.smtpAbuse,
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
        leaseMs: config.channelLeaseMs,
        allowPrivate: config.channelsAllowPrivate,
        inbound: { attachmentMaxBytes: config.attachmentMaxBytes },
      }),
    );
  }

  signals.check();
  signals.stop(); // from here on a signal is a shutdown, handled below

  // On SIGTERM or SIGINT (or an error nothing caught): a stop within STOP_MS whatever is open, then exit 0
  // (1 after an error); a second signal exits at once. All at once: the workers end their IMAP sessions and
  // give their leases and unsent mail claims back (another process takes them over at its next pass), the
  // listeners close, open MCP streams end, idle keep-alive connections close; requests under way get until
  // FORCE_CLOSE_MS to finish, SMTP sessions are ended with a 421 after 1 s; then the database closes.
  closeWithGrace({ delay: STOP_MS, logger: { error: (msg: string) => app.log.error(msg) } }, async ({ signal, err }) => {
    if (err) app.log.error({ err }, 'stopping after an unexpected error');
    else app.log.info({ signal }, 'shutting down');
    const force = setTimeout(() => app.server.closeAllConnections(), FORCE_CLOSE_MS);
    await Promise.all([
      within(WORKERS_STOP_MS, Promise.all([...workers.map((w) => w.stop()), closeParsePool()])),
      within(FORCE_CLOSE_MS + 200, Promise.all([commandSocket?.close(), smtpReceiver?.stop(), app.close()])),
    ]);
    clearTimeout(force);
    await within(500, database.close());
    redis?.disconnect();
  });

  await app.listen({ port: config.port, host: config.host }).catch((err: unknown) => {
    throw listenProblem(err, config.port, config.host) ?? err;
  });
  for (const w of workers) w.start();
  opened.push(() => Promise.all(workers.map((w) => w.stop())));
  if (smtpReceiver) {
    const receiver = smtpReceiver;
    const bound = await receiver.listen().catch((err: unknown) => {
      throw listenProblem(err, config.smtp.port!, config.smtp.host, 'SMTP_PORT') ?? err;
    });
    opened.push(() => receiver.stop());
    app.log.info(`SMTP receiver listening on ${bound.address} port ${bound.port}${config.smtp.tlsCert ? ' (STARTTLS offered)' : ''}`);
  }
  app.log.info(`Switchboard listening on ${config.publicUrl} (REST ${config.publicUrl}/v1, MCP ${config.publicUrl}/mcp) with ${database.kind === 'pglite' ? `the embedded database in ${config.dataDir}` : 'PostgreSQL'}`);
  return { app, database };
}
