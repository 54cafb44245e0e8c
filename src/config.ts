import { resolve } from 'node:path';
import { z } from 'zod';
import { parseDnsServers } from './core/dns.js';

/** Environment, parsed once at start-up. Every setting the service reads is here. */
const Env = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: z.string().min(1).default('0.0.0.0'),
  DATA_DIR: z.string().min(1).default('./data'),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL')
    .optional()
    .or(z.literal('').transform(() => undefined)),
  PUBLIC_URL: z.url().optional().or(z.literal('').transform(() => undefined)),
  REDIS_URL: z.string().optional().or(z.literal('').transform(() => undefined)),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** REST requests allowed per API key per minute; 0 turns the limit off. */
  REST_RATE_LIMIT: z.coerce.number().int().min(0).default(6000),
  /** MCP transport requests allowed per (user, client) per minute (the spec's limit); 0 turns the limit off. */
  MCP_RATE_LIMIT: z.coerce.number().int().min(0).default(100),
  /**
   * Whether to believe X-Forwarded-For / X-Forwarded-Proto: `true` behind a reverse proxy you run, a hop
   * count, or a comma-separated list of proxy addresses. Off by default, so a client cannot choose the
   * address that per-IP limits count.
   */
  TRUST_PROXY: z.string().default('false'),
  /** How long a verified API key is trusted from memory before it is looked up again (ms). */
  API_KEY_CACHE_MS: z.coerce.number().int().min(0).max(60_000).default(5000),
  /** OpenAI-compatible chat-completions endpoint that evaluates automation instructions; unset uses the built-in English vocabulary. */
  AUTOMATION_LLM_URL: z.url().optional().or(z.literal('').transform(() => undefined)),
  AUTOMATION_LLM_MODEL: z.string().optional().or(z.literal('').transform(() => undefined)),
  AUTOMATION_LLM_API_KEY: z.string().optional().or(z.literal('').transform(() => undefined)),
  /** Whether this process runs the automation engine (evaluation, dispatch, schedules, executions). Several processes may. */
  AUTOMATION_WORKER: z.enum(['true', 'false']).default('true'),
  /** How often the engine looks for work written by other processes (ms); its own writes wake it at once. */
  AUTOMATION_POLL_MS: z.coerce.number().int().min(50).max(60_000).default(500),
  /** Days events are kept (for GET /events and the automations); older ones are removed by the hourly cleanup. */
  EVENT_RETENTION_DAYS: z.coerce.number().int().min(1).max(3650).default(30),
  /** PostgreSQL: how long a statement may run or wait for a lock before the request answers 503 (ms); bounds writes. */
  DB_STATEMENT_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(4000),
  /** How long a read (a GET operation, and its authentication) may wait for the database before it answers 503 (ms). */
  DB_READ_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(1500),
  /** Whether /mcp and /sse also accept a REST API key as the bearer token (its permissions decide the tools). */
  MCP_API_KEYS: z.enum(['true', 'false']).default('false'),
  /** Development and tests only: webhook endpoints may be http on a loopback host and reach private addresses. */
  WEBHOOK_ALLOW_INSECURE: z.enum(['true', 'false']).default('false'),
  /** Whether a client may use the https URL of its Client ID Metadata Document as its client_id. */
  OAUTH_CLIENT_METADATA_DOCUMENTS: z.enum(['true', 'false']).default('true'),
  /** Development and tests only: client metadata documents may be http on a loopback host and on private addresses. */
  OAUTH_CLIENT_METADATA_ALLOW_INSECURE: z.enum(['true', 'false']).default('false'),
  /** Key of stored secrets (mail server passwords), 32 bytes as base64 or hex; unset: a key file generated in DATA_DIR (embedded database only). */
  SECRETS_KEY: z.string().optional().transform((v) => v?.trim() || undefined).refine((v) => v === undefined || keyProblem(v) === undefined, { message: 'must be 32 bytes, as base64 (44 characters) or hex (64 characters)' }),
  /** Older secrets keys, comma-separated: still decrypt, and what they encrypted is re-encrypted under SECRETS_KEY at start-up. */
  SECRETS_KEY_PREVIOUS: z.string().default(''),
  /** Self-hosting on a LAN and tests: channels may reach mail servers on private and loopback addresses. */
  CHANNELS_ALLOW_PRIVATE: z.enum(['true', 'false']).default('false'),
  /** DNS servers for domain verification and the authentication of received mail, comma-separated `host:port`; unset: the system's. */
  DNS_SERVERS: z.string().default('').refine((v) => dnsServersProblem(v) === undefined, { error: (i) => dnsServersProblem(String(i.input)) ?? 'invalid' }),
  /** Port of the built-in SMTP receiver; unset: no receiver. 0 picks a free port. */
  SMTP_PORT: z.coerce.number().int().min(0).max(65535).optional().or(z.literal('').transform(() => undefined)),
  /** Address the SMTP receiver listens on; default HOST. */
  SMTP_HOST: z.string().optional().or(z.literal('').transform(() => undefined)),
  /** Largest message the SMTP receiver accepts (bytes). */
  SMTP_MAX_BYTES: z.coerce.number().int().min(1024).max(200 * 1024 * 1024).default(25 * 1024 * 1024),
  /** PEM files of the certificate and key the SMTP receiver offers STARTTLS with; both or neither. */
  SMTP_TLS_CERT: z.string().optional().or(z.literal('').transform(() => undefined)),
  SMTP_TLS_KEY: z.string().optional().or(z.literal('').transform(() => undefined)),
  /** Simultaneous SMTP connections, in all and from one IP address. */
  SMTP_MAX_CONNECTIONS: z.coerce.number().int().min(1).max(100_000).default(200),
  SMTP_MAX_CONNECTIONS_PER_IP: z.coerce.number().int().min(1).max(10_000).default(20),
  /** Messages one IP address may deliver per minute; 0 turns the limit off. */
  SMTP_RATE_LIMIT: z.coerce.number().int().min(0).default(120),
  /** Attachment content kept per received message (bytes); past it the content is dropped with a note, names and sizes are kept. */
  EMAIL_ATTACHMENT_MAX_BYTES: z.coerce.number().int().min(0).max(100 * 1024 * 1024).default(10 * 1024 * 1024),
  /** Whether this process runs the IMAP sync of inbound-IMAP channels. Several processes may: each channel is synced by one at a time. */
  IMAP_SYNC_WORKER: z.enum(['true', 'false']).default('true'),
  /** The first sync of an IMAP mailbox takes the messages of this many last days. */
  IMAP_INITIAL_DAYS: z.coerce.number().int().min(0).max(36_500).default(30),
  /** Where the IMAP server has no IDLE, how often a mailbox is looked at; with IDLE, the longest wait before a look anyway (ms). */
  IMAP_POLL_MS: z.coerce.number().int().min(1000).max(3_600_000).default(60_000),
  /** Inbound-IMAP channels one process syncs at most (one IMAP connection each). */
  IMAP_MAX_CHANNELS: z.coerce.number().int().min(1).max(10_000).default(100),
  /** The longest one attempt to send an email through a channel's relay may take (ms); a crashed attempt is taken over after twice this. */
  MAIL_SEND_TIMEOUT_MS: z.coerce.number().int().min(500).max(600_000).default(60_000),
});

function keyProblem(value: string): string | undefined {
  const t = value.trim();
  const bytes = /^[0-9a-f]{64}$/i.test(t) ? Buffer.from(t, 'hex') : Buffer.from(t, 'base64');
  return bytes.length === 32 ? undefined : 'bad length';
}

function dnsServersProblem(value: string): string | undefined {
  try {
    parseDnsServers(value);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}


/** The service's settings, read from the environment (see `Env` for each one's meaning). */
export type Config = ReturnType<typeof fromEnv>;

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = Env.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
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
    dnsServers: parseDnsServers(e.DNS_SERVERS),
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
    mailSendTimeoutMs: e.MAIL_SEND_TIMEOUT_MS,
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
