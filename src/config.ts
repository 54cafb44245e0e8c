import { resolve } from 'node:path';
import { z } from 'zod';
import { parseDnsServers } from './core/dns.js';
import { DATABASE_URL_FORM, namesDatabase } from './core/database-names.js';

/** Recipients of automatic messages per organization in any hour, unless `AUTOMATIC_MESSAGES_PER_HOUR` says otherwise. */
export const DEFAULT_AUTOMATIC_MESSAGES_PER_HOUR = 300;

/** `AUTOMATIC_MESSAGES_PER_HOUR` and its former name; unset (or empty) leaves the choice to the other, then the default. */
const perHour = z.coerce
  .number()
  .int()
  .min(1)
  .max(1_000_000)
  .optional()
  .or(z.literal('').transform(() => undefined));

/**
 * Environment, parsed once at start-up. Every setting the service reads is here, each with its meaning in
 * `.describe()` (shown in `docs/configuration.md`, which `npm run docs:config` generates from this schema;
 * `.meta({ typeText, defaultText })` overrides how a type or default reads there). A test fails when the code reads a
 * variable not declared here, when one has no description, or when the page differs from the schema.
 */
export const Env = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(3000).describe('Port to listen on (`0` picks a free port).'),
  HOST: z
    .string()
    .min(1)
    .default('127.0.0.1')
    .describe('Interface to listen on: this machine only by default (a trial on a laptop is not served to the network); `0.0.0.0` (all interfaces) or one address in production, behind the reverse proxy (see [deploy.md](deploy.md)). The SMTP receiver listens on it too unless `SMTP_HOST` says otherwise.'),
  DATA_DIR: z.string().min(1).default('./data').describe('Where the embedded database (and the command line\'s local socket) live; the command line must be given the same one as the server.'),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, { message: `must be a postgres:// or postgresql:// URL: ${DATABASE_URL_FORM}`, abort: true })
    .refine(namesDatabase, `must name the database (without one PostgreSQL would use the user's own): ${DATABASE_URL_FORM}`)
    .optional()
    .or(z.literal('').transform(() => undefined))
    .meta({ typeText: 'URL `postgres://user:password@host:5432/database`', description: '`postgres://…` selects PostgreSQL (the URL must name the database); unset selects the embedded database in `DATA_DIR`.' }),
  PUBLIC_URL: z
    .url()
    .optional()
    .or(z.literal('').transform(() => undefined))
    .meta({ defaultText: '`http://localhost:$PORT`', description: 'External origin, used in OAuth metadata, the OpenAPI `servers` entry and redirects.' }),
  REDIS_URL: z.string().optional().or(z.literal('').transform(() => undefined)).meta({ typeText: 'URL `redis://…`', description: 'Shared rate limits (and cross-instance transport sessions) for several instances.' }),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info').describe('pino log level.'),
  REST_RATE_LIMIT: z.coerce.number().int().min(0).default(6000).describe('REST requests allowed per API key per minute; `0` turns the limit off.'),
  MCP_RATE_LIMIT: z.coerce.number().int().min(0).default(100).describe('MCP transport requests allowed per (user, client) per minute, the specification\'s limit; `0` turns it off (load tests only).'),
  TRUST_PROXY: z
    .string()
    .default('false')
    .meta({ typeText: '`true`, `false`, a hop count, or addresses', description: 'Whether to believe `X-Forwarded-For` / `X-Forwarded-Proto`: `true` behind a reverse proxy you run, a hop count, or a comma-separated list of proxy addresses. Off by default, so a client cannot choose the address that per-IP limits count.' }),
  API_KEY_CACHE_MS: z.coerce.number().int().min(0).max(60_000).default(5000).describe('How long a verified API key is trusted from memory before it is looked up again (ms). Revocation through the command line is immediate on the server that handles it; elsewhere it takes effect within this time.'),
  AUTOMATION_LLM_URL: z.url().optional().or(z.literal('').transform(() => undefined)).describe('OpenAI-compatible chat-completions endpoint that evaluates automation instructions; unset uses the built-in English vocabulary.'),
  AUTOMATION_LLM_MODEL: z.string().optional().or(z.literal('').transform(() => undefined)).describe('Model name sent to `AUTOMATION_LLM_URL`.'),
  AUTOMATION_LLM_API_KEY: z.string().optional().or(z.literal('').transform(() => undefined)).describe('Bearer token sent to `AUTOMATION_LLM_URL`.'),
  AUTOMATION_WORKER: z.enum(['true', 'false']).default('true').describe('Whether this process runs the automation engine (evaluation, dispatch, schedules, executions); any number of processes may.'),
  AUTOMATION_POLL_MS: z.coerce.number().int().min(50).max(60_000).default(500).describe('How often the engine looks for work written by other processes (ms); its own process\'s writes wake it at once.'),
  AUTOMATIC_MESSAGES_PER_HOUR: perHour.meta({
    defaultText: `\`${DEFAULT_AUTOMATIC_MESSAGES_PER_HOUR}\``,
    description:
      'Recipients of automatic messages (email, texts: every `messages.send`, `messages.reply` and `messages.forward` step of automations) one organization may have in any hour; a step past it is skipped with the reason. In runs an event triggered, each automation also sends a recipient at most one message a UTC day (see [automations](automations.md#automatic-messages)).',
  }),
  AUTOMATIC_MAIL_PER_HOUR: perHour.describe('The former name of `AUTOMATIC_MESSAGES_PER_HOUR`, still read when that one is unset (it counted email only; it now counts every automatic message).'),
  EVENT_RETENTION_DAYS: z.coerce.number().int().min(1).max(3650).default(30).describe('Days events are kept (for `GET /events` and the automations). An hourly cleanup (safe with several processes) removes older ones, along with expired OAuth codes, tokens and sessions (a day after expiry; refresh tokens live 90 days), grants revoked more than 30 days ago, and registered OAuth clients that no user approved within 24 hours.'),
  DB_STATEMENT_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(4000).describe('PostgreSQL: a statement that runs or waits for a lock longer is cancelled and the request answers 503 `SERVICE_UNAVAILABLE` with `Retry-After` (ms); a database that stops answering is given up 0.5 s later (migrations have no limit). Bounds writes, which are never abandoned half-way: a write\'s 503 means it was not written.'),
  DB_READ_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(1500).describe('A read (a GET, or a read-only MCP tool, with its API key or token check) and `/readyz` answer 503 `SERVICE_UNAVAILABLE` when the database has not answered by then (ms).'),
  MCP_API_KEYS: z.enum(['true', 'false']).default('false').describe('`true` lets `/mcp` and `/sse` also accept a REST API key as the bearer token, for scripts and editors without OAuth: the key\'s permissions decide the tools (`contacts:read` alone gives the read tools of contacts), writes are recorded as the key, the rate limit counts per key; any other token still gets the same 401.'),
  WEBHOOK_ALLOW_INSECURE: z.enum(['true', 'false']).default('false').describe('Development and tests only: `true` lets webhook endpoints use http on a loopback host and reach private addresses (what a receiver on your own machine, `examples/webhook-receiver.mjs`, needs).'),
  OAUTH_CLIENT_METADATA_DOCUMENTS: z.enum(['true', 'false']).default('true').describe('Whether a client may use the https URL of its Client ID Metadata Document as its `client_id`.'),
  OAUTH_CLIENT_METADATA_ALLOW_INSECURE: z.enum(['true', 'false']).default('false').describe('Development and tests only: `true` lets client metadata documents be http on a loopback host and on private addresses.'),
  SECRETS_KEY: z
    .string()
    .optional()
    .transform((v) => v?.trim() || undefined)
    .refine((v) => v === undefined || keyProblem(v) === undefined, { message: 'must be 32 bytes, as base64 (44 characters) or hex (64 characters)' })
    .meta({ typeText: '32 bytes, base64 or hex', description: 'Key of stored secrets (mail server passwords). Unset: a key file generated in `DATA_DIR` (embedded database only); required with `DATABASE_URL` to store a password.' }),
  SECRETS_KEY_PREVIOUS: z.string().default('').meta({ typeText: 'keys, comma-separated', defaultText: 'unset', description: 'Older secrets keys: they still decrypt, and what they encrypted is re-encrypted under `SECRETS_KEY` at start-up (key rotation).' }),
  CHANNELS_ALLOW_PRIVATE: z.enum(['true', 'false']).default('false').describe('Self-hosting on a LAN and tests: `true` lets channels reach mail servers on private and loopback addresses.'),
  SMTP_PORT: z.coerce.number().int().min(0).max(65535).optional().or(z.literal('').transform(() => undefined)).describe('Port of the built-in SMTP receiver; unset: no receiver. `0` picks a free port.'),
  SMTP_HOST: z.string().optional().or(z.literal('').transform(() => undefined)).meta({ defaultText: '`HOST`', description: 'Interface the SMTP receiver listens on.' }),
  SMTP_MAX_BYTES: z.coerce.number().int().min(1024).max(200 * 1024 * 1024).default(25 * 1024 * 1024).describe('Largest message the SMTP receiver accepts (bytes; 552 beyond; the size is announced in EHLO).'),
  SMTP_TLS_CERT: z.string().optional().or(z.literal('').transform(() => undefined)).meta({ typeText: 'file path', description: 'PEM file of the certificate the SMTP receiver offers STARTTLS with; set with `SMTP_TLS_KEY` (both or neither).' }),
  SMTP_TLS_KEY: z.string().optional().or(z.literal('').transform(() => undefined)).meta({ typeText: 'file path', description: 'PEM file of the private key of `SMTP_TLS_CERT`.' }),
  SMTP_MAX_CONNECTIONS: z.coerce.number().int().min(1).max(100_000).default(200).describe('Simultaneous SMTP connections, in all.'),
  SMTP_MAX_CONNECTIONS_PER_IP: z.coerce.number().int().min(1).max(10_000).default(20).describe('Simultaneous SMTP connections from one IP address.'),
  SMTP_RATE_LIMIT: z.coerce.number().int().min(0).default(120).describe('Messages one IP address may deliver per minute; `0` turns the limit off.'),
  EMAIL_ATTACHMENT_MAX_BYTES: z.coerce.number().int().min(0).max(100 * 1024 * 1024).default(10 * 1024 * 1024).describe('Attachment content kept per received message (bytes), email or text (MMS media); past it the content is dropped with a note (email) or the item is marked failed (text), names and sizes are kept.'),
  IMAP_SYNC_WORKER: z.enum(['true', 'false']).default('true').describe('Whether this process runs the IMAP sync of inbound-IMAP channels; any number of processes may, each channel is synced by one at a time.'),
  IMAP_INITIAL_DAYS: z.coerce.number().int().min(0).max(36_500).default(30).describe('The first sync of an IMAP mailbox takes the mail of this many last days (IMAP counts whole days: `0` takes today\'s mail).'),
  IMAP_POLL_MS: z.coerce.number().int().min(1000).max(3_600_000).default(60_000).describe('Where the IMAP server has no IDLE, how often a mailbox is looked at; with IDLE, the longest wait before a look anyway (ms).'),
  CHANNEL_LEASE_MS: z.coerce.number().int().min(1000).max(600_000).default(20_000).describe('How long a process\'s claim on an IMAP or SMPP channel lasts without renewal (ms; renewed every third of it): the channels of a process that died without giving them back are taken over by another process when it runs out.'),
  IMAP_MAX_CHANNELS: z.coerce.number().int().min(1).max(10_000).default(100).describe('Inbound-IMAP channels one process syncs at most (one IMAP connection each).'),
  MAIL_SEND_TIMEOUT_MS: z.coerce.number().int().min(500).max(600_000).default(60_000).describe('The longest one attempt to send an email through a channel\'s relay may take (connection, login, transfer, answer; ms); an attempt a crashed process held is taken over after twice this.'),
  EMAIL_PARSE_THREADS: z.coerce
    .number()
    .int()
    .min(1)
    .max(64)
    .optional()
    .or(z.literal('').transform(() => undefined))
    .meta({ defaultText: 'the cores less one, 2 to 4', description: 'Worker threads that read (parse and authenticate) received mail off the main thread; each client address has one email read at a time, so with 2 or more one sender never holds them all.' }),
  EMAIL_PARSE_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(30_000).describe('The longest the reading of one received email may take (ms), over SMTP counted from its arrival (its wait for a thread included); past it the thread is replaced and the email refused for now (SMTP 451; the third time for good, unless it was the wait).'),
  EMAIL_PARSE_QUEUE: z.coerce.number().int().min(4).max(10_000).default(64).describe('Emails received over SMTP that may wait for a reading thread, one client address at most a quarter of them (fewer when its mail takes long to read); the place of a message is taken at `MAIL FROM`, and beyond the queue the receiver answers 451 there, before the message is sent.'),
  EMAIL_PARSE_IDLE_MS: z.coerce.number().int().min(100).max(3_600_000).default(10_000).describe('How long a reading thread with nothing to read stays (ms); the next email starts one again.'),
  EMAIL_PARSE_HEAP_MB: z.coerce.number().int().min(16).max(4096).default(64).describe('The heap one reading thread may use (MB); an email that needs more is refused for now (SMTP 451; the third time for good).'),
  SMTP_RCPT_RATE_LIMIT: z.coerce.number().int().min(0).default(600).describe('RCPT commands one IP address (an IPv6 /64) may give per minute, accepted or refused; `0` turns the limit off.'),
  SMTP_MAX_ERRORS: z.coerce.number().int().min(1).max(10_000).default(20).describe('Refused commands (RCPT TO an unknown address, …) after which the receiver closes the connection (421).'),
  SMTP_DATA_TIMEOUT_MS: z.coerce.number().int().min(1000).max(3_600_000).default(600_000).describe('The longest the DATA of one message may take in all (ms).'),
  SMTP_DATA_MIN_RATE: z.coerce.number().int().min(0).default(500).describe('The slowest DATA the receiver waits for (bytes per second, averaged from the start of DATA, after its first 10 s); `0`: no minimum.'),
  DNS_SERVERS: z
    .string()
    .default('')
    .refine((v) => dnsServersProblem(v) === undefined, { error: (i) => dnsServersProblem(String(i.input)) ?? 'invalid' })
    .meta({ typeText: '`host:port`, comma-separated', defaultText: 'unset (the system\'s)', description: 'DNS servers for domain verification and the authentication of received mail; unset: the system\'s resolver.' }),
  SMS_SEND_TIMEOUT_MS: z.coerce.number().int().min(500).max(600_000).default(15_000).describe('The longest one request to a text provider (Twilio-compatible API) may take (ms), also each request fetching the media of a received text; a send that left without an answer is an unknown outcome: the text is marked failed, never sent twice.'),
  METRICS_TOKEN: z
    .string()
    .optional()
    .transform((v) => v?.trim() || undefined)
    .refine((v) => v === undefined || v.length >= 16, { message: 'must be at least 16 characters (e.g. openssl rand -hex 24)' })
    .meta({
      typeText: 'text, at least 16 characters',
      defaultText: 'unset',
      description:
        '`GET /metrics` (Prometheus text format: requests, event-loop lag, queues, channels, mailboxes; see [operating.md](operating.md#what-to-watch)) answers a scraper that sends `Authorization: Bearer <METRICS_TOKEN>` (401 otherwise); unset: `/metrics` does not exist (404).',
    }),
  SMS_HOOK_RATE_LIMIT: z.coerce.number().int().min(1).max(1_000_000).default(6000).describe('Provider webhooks (`/hooks/{kind}/{channelId}` and the paths below it, of every kind whose provider calls in) one channel may receive per minute; past it 429 with `Retry-After` (the provider retries). Only correctly signed webhooks count; a subscription handshake (Meta\'s) counts none.'),
  SMS_HOOK_FAILURE_LIMIT: z.coerce.number().int().min(1).max(1_000_000).default(60).describe('Refused provider webhooks of every channel kind together (a missing or wrong signature or verify token, an unknown channel) one client address (an IPv6 /64) may send per minute; past it its webhooks are answered 429 with `Retry-After` before anything is looked up.'),
  SMPP_DELIVER_RATE_LIMIT: z.coerce.number().int().min(1).max(1_000_000).default(6000).describe('deliver_sm (texts, parts of long texts, delivery receipts) one SMPP channel\'s SMSC may deliver per minute; past it they are answered `ESME_RTHROTTLED` (the SMSC delivers them again later).'),
});

function dnsServersProblem(value: string): string | undefined {
  try {
    parseDnsServers(value);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

function keyProblem(value: string): string | undefined {
  const t = value.trim();
  const bytes = /^[0-9a-f]{64}$/i.test(t) ? Buffer.from(t, 'hex') : Buffer.from(t, 'base64');
  return bytes.length === 32 ? undefined : 'bad length';
}


/** The service's settings, read from the environment (see `Env` for each one's meaning). */
export type Config = ReturnType<typeof fromEnv>;

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = Env.safeParse(env);
  if (!parsed.success) {
    // `X.or(z.literal(''))` fails as a union: its first branch (the setting's own schema) says what is wrong.
    const message = (i: z.core.$ZodIssue): string => (i.code === 'invalid_union' && i.errors[0]?.[0] ? message(i.errors[0][0]) : i.message);
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${message(i)}`);
    throw new Error(`Invalid configuration:\n${lines.join('\n')}`);
  }
  return fromEnv(parsed.data);
}

function fromEnv(e: z.infer<typeof Env>) {
  return {
    port: e.PORT,
    host: e.HOST,
    dataDir: resolve(e.DATA_DIR),
    databaseUrl: e.DATABASE_URL,
    publicUrl: (e.PUBLIC_URL ?? `http://localhost:${e.PORT}`).replace(/(?<!\/)\/+$/, ''),
    redisUrl: e.REDIS_URL,
    logLevel: e.LOG_LEVEL,
    restRateLimit: e.REST_RATE_LIMIT,
    mcpRateLimit: e.MCP_RATE_LIMIT,
    apiKeyCacheMs: e.API_KEY_CACHE_MS,
    trustProxy: parseTrustProxy(e.TRUST_PROXY),
    automations: {
      llmUrl: e.AUTOMATION_LLM_URL,
      llmModel: e.AUTOMATION_LLM_MODEL,
      llmApiKey: e.AUTOMATION_LLM_API_KEY,
      worker: e.AUTOMATION_WORKER === 'true',
      pollMs: e.AUTOMATION_POLL_MS,
      automaticMessagesPerHour: e.AUTOMATIC_MESSAGES_PER_HOUR ?? e.AUTOMATIC_MAIL_PER_HOUR ?? DEFAULT_AUTOMATIC_MESSAGES_PER_HOUR,
    },
    eventRetentionDays: e.EVENT_RETENTION_DAYS,
    webhookAllowInsecure: e.WEBHOOK_ALLOW_INSECURE === 'true',
    clientDocuments: { enabled: e.OAUTH_CLIENT_METADATA_DOCUMENTS === 'true', allowInsecure: e.OAUTH_CLIENT_METADATA_ALLOW_INSECURE === 'true' },
    dbStatementTimeoutMs: e.DB_STATEMENT_TIMEOUT_MS,
    dbReadTimeoutMs: e.DB_READ_TIMEOUT_MS,
    mcpApiKeys: e.MCP_API_KEYS === 'true',
    secrets: {
      key: e.SECRETS_KEY,
      previousKeys: e.SECRETS_KEY_PREVIOUS.split(',').map((k) => k.trim()).filter(Boolean),
    },
    channelsAllowPrivate: e.CHANNELS_ALLOW_PRIVATE === 'true',
    smtp: {
      port: e.SMTP_PORT,
      host: e.SMTP_HOST ?? e.HOST,
      maxBytes: e.SMTP_MAX_BYTES,
      tlsCert: e.SMTP_TLS_CERT,
      tlsKey: e.SMTP_TLS_KEY,
      maxConnections: e.SMTP_MAX_CONNECTIONS,
      maxConnectionsPerIp: e.SMTP_MAX_CONNECTIONS_PER_IP,
      ratePerMinute: e.SMTP_RATE_LIMIT,
    },
    attachmentMaxBytes: e.EMAIL_ATTACHMENT_MAX_BYTES,
    imap: { worker: e.IMAP_SYNC_WORKER === 'true', initialDays: e.IMAP_INITIAL_DAYS, pollMs: e.IMAP_POLL_MS, maxChannels: e.IMAP_MAX_CHANNELS },
    channelLeaseMs: e.CHANNEL_LEASE_MS,
    mailSendTimeoutMs: e.MAIL_SEND_TIMEOUT_MS,
    emailParse: { ...(e.EMAIL_PARSE_THREADS ? { threads: e.EMAIL_PARSE_THREADS } : {}), timeoutMs: e.EMAIL_PARSE_TIMEOUT_MS, queue: e.EMAIL_PARSE_QUEUE, idleMs: e.EMAIL_PARSE_IDLE_MS, heapMb: e.EMAIL_PARSE_HEAP_MB },
    smtpAbuse: { rcptPerMinute: e.SMTP_RCPT_RATE_LIMIT, maxErrors: e.SMTP_MAX_ERRORS, dataTimeoutMs: e.SMTP_DATA_TIMEOUT_MS, dataMinRate: e.SMTP_DATA_MIN_RATE },
    dnsServers: parseDnsServers(e.DNS_SERVERS),
    sms: { sendTimeoutMs: e.SMS_SEND_TIMEOUT_MS, hookRateLimit: e.SMS_HOOK_RATE_LIMIT, hookFailureLimit: e.SMS_HOOK_FAILURE_LIMIT, smppDeliverRateLimit: e.SMPP_DELIVER_RATE_LIMIT },
    metricsToken: e.METRICS_TOKEN,
  };
}

type TrustProxy = boolean | string[] | ((address: string, hop: number) => boolean);

function parseTrustProxy(value: string): TrustProxy {
  const v = value.trim().toLowerCase();
  if (v === '' || v === 'false' || v === '0' || v === 'no') return false;
  if (v === 'true' || v === 'yes') return true;
  if (/^\d+$/.test(v)) {
    const hops = Number(v);
    return (_address, hop) => hop < hops;
  }
  return v.split(',').map((s) => s.trim()).filter(Boolean);
}
