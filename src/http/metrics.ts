import { sql } from 'drizzle-orm';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { Clock } from '../core/clock.js';
import { withDeadline } from '../core/deadline.js';
import { AppError } from '../core/errors.js';
import { bearerToken, safeEqual } from '../core/secrets.js';
import type { Database } from '../db/client.js';
import { VERSION } from '../version.js';
import { sendError } from './errors.js';
import { channelKinds } from '../modules/channels/kinds.js';

/**
 * `GET /metrics`: Prometheus's text format (prom-client), behind `METRICS_TOKEN` (absent: the route does not
 * exist). What an operator watches (docs/operating.md, "What to watch"):
 *
 * - the process: prom-client's default metrics, event-loop lag (`nodejs_eventloop_lag_*`) among them;
 * - HTTP requests and their latency by route (`switchboard_http_request_duration_seconds`), observed in one
 *   `onResponse` hook (a label lookup and a histogram bucket per request);
 * - the queues, read from the database: mail and texts waiting to leave and the age of the oldest, per channel
 *   kind; webhook deliveries waiting; channels per kind and status; the age of each IMAP mailbox's last sync;
 *   automations waiting to be evaluated and events waiting to be offered to automations;
 * - the PostgreSQL connection pool.
 *
 * The database is read in one statement of cheap, index-backed aggregates, at most once per `cacheMs` (five
 * seconds) whatever the number of scrapers: scraping cannot load the database. When the database does not
 * answer, `switchboard_database_up` is 0 and the queue gauges are left out rather than reported stale.
 */

const CACHE_MS = 5_000;

interface QueueState {
  count: number;
  oldest: string | null;
}

interface Snapshot {
  at: number;
  /** Per channel kind (the registry's `type`). */
  outbox: Record<string, QueueState>;
  webhooks: QueueState;
  channels: { type: string; status: string; count: number }[];
  mailboxes: { id: string; organizationId: string; lastSyncAt: string | null; createdAt: string }[];
  evaluations: QueueState;
  events: QueueState;
}

/** The queues' state in one round trip; every part reads a partial index of what is waiting. */
async function readSnapshot(database: Database): Promise<Omit<Snapshot, 'at'>> {
  const queue = (table: string, time: string, where: string) => sql.raw(`(SELECT json_build_object('count', count(*), 'oldest', min(${time})) FROM ${table} WHERE ${where})`);
  const result = await database.db.execute(sql`SELECT
      ${sql.join(
        channelKinds().map((k) => sql`${queue(k.outboxTable, 'created_at', "status IN ('pending', 'sending')")} AS ${sql.identifier(`outbox_${k.type}`)}`),
        sql`, `,
      )},
      ${queue('webhook_deliveries', 'created_at', "status IN ('pending', 'delivering')")} AS webhooks,
      ${queue('automations', 'evaluate_after', 'evaluate_after IS NOT NULL AND deleted_at IS NULL')} AS evaluations,
      ${queue('events', 'occurred_at', 'dispatched_at IS NULL')} AS events,
      (SELECT coalesce(json_agg(c), '[]'::json) FROM (SELECT type, status, count(*)::int AS count FROM channels WHERE deleted_at IS NULL GROUP BY 1, 2) c) AS channels,
      (SELECT coalesce(json_agg(m), '[]'::json) FROM (
         SELECT id, organization_id AS "organizationId", last_sync_at AS "lastSyncAt", created_at AS "createdAt" FROM channels
          WHERE deleted_at IS NULL AND status <> 'disabled' AND inbound->>'mode' = 'imap') m) AS mailboxes`);
  const row = (result as unknown as { rows: Record<string, unknown>[] }).rows[0]!;
  const json = <T>(v: unknown): T => (typeof v === 'string' ? JSON.parse(v) : v) as T;
  return {
    outbox: Object.fromEntries(channelKinds().map((k) => [k.type, json<QueueState>(row[`outbox_${k.type}`])])),
    webhooks: json(row.webhooks),
    evaluations: json(row.evaluations),
    events: json(row.events),
    channels: json(row.channels),
    mailboxes: json(row.mailboxes),
  };
}

export interface MetricsDeps {
  database: Database;
  clock: Clock;
  /** The longest the database may take to answer a scrape's statement (ms). */
  readTimeoutMs: number;
  token: string;
  cacheMs?: number;
}

export function createMetrics(deps: MetricsDeps) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const cacheMs = deps.cacheMs ?? CACHE_MS;
  const ageOf = (since: string | null, now: number) => (since ? Math.max(0, (now - Date.parse(since)) / 1000) : 0);

  // HTTP: one histogram; its children are looked up once per (method, route, status).
  const http = new Histogram({
    name: 'switchboard_http_request_duration_seconds',
    help: 'HTTP requests by method, route (its pattern, e.g. /v1/contacts/:id; "unmatched" for no route) and status code, and how long they took to answer',
    labelNames: ['method', 'route', 'status_code'] as const,
    buckets: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  const children = new Map<string, ReturnType<typeof http.labels>>();
  function observe(req: FastifyRequest, reply: FastifyReply, done: () => void) {
    const route = req.routeOptions.url ?? 'unmatched';
    const key = `${req.method} ${route} ${reply.statusCode}`;
    let child = children.get(key);
    if (!child) {
      child = http.labels(req.method, route, String(reply.statusCode));
      children.set(key, child);
    }
    child.observe(reply.elapsedTime / 1000);
    done();
  }

  // The database's part, read at most once per cacheMs (concurrent scrapes share one read).
  let cached: Snapshot | undefined;
  let reading: Promise<Snapshot | undefined> | undefined;
  async function snapshot(): Promise<Snapshot | undefined> {
    const now = deps.clock().getTime();
    if (cached && now >= cached.at && now - cached.at < cacheMs) return cached;
    reading ??= withDeadline(readSnapshot(deps.database), deps.readTimeoutMs)
      .then((s) => (cached = { ...s, at: deps.clock().getTime() }))
      .catch(() => (cached = undefined))
      .finally(() => (reading = undefined));
    return reading;
  }

  const gauge = <L extends string>(name: string, help: string, labelNames: readonly L[], collect: (g: Gauge<L>, s: Snapshot | undefined) => void) =>
    new Gauge<L>({
      name,
      help,
      labelNames,
      registers: [registry],
      async collect() {
        this.reset();
        collect(this, await snapshot());
      },
    });

  new Gauge({ name: 'switchboard_info', help: 'Always 1; the version of Switchboard that answers', labelNames: ['version'], registers: [registry] }).set({ version: VERSION }, 1);
  gauge('switchboard_database_up', 'Whether the database answered the last read of the queues (1) or not (0)', [], (g, s) => g.set(s ? 1 : 0));
  gauge('switchboard_outbox_messages', 'Messages waiting to leave (queued or being sent), per channel kind', ['kind'], (g, s) => {
    if (s) for (const [kind, q] of Object.entries(s.outbox)) g.set({ kind }, q.count);
  });
  gauge('switchboard_outbox_oldest_age_seconds', 'Age of the oldest message waiting to leave, per channel kind (0 when none waits)', ['kind'], (g, s) => {
    if (s) for (const [kind, q] of Object.entries(s.outbox)) g.set({ kind }, ageOf(q.oldest, deps.clock().getTime()));
  });
  gauge('switchboard_webhook_deliveries_pending', 'Webhook deliveries waiting to be delivered (queued, retrying or under way)', [], (g, s) => {
    if (s) g.set(s.webhooks.count);
  });
  gauge('switchboard_webhook_oldest_pending_age_seconds', 'Age of the oldest webhook delivery waiting (0 when none waits)', [], (g, s) => {
    if (s) g.set(ageOf(s.webhooks.oldest, deps.clock().getTime()));
  });
  gauge('switchboard_channels', 'Channels per kind (email, sms) and status (active, error, disabled)', ['type', 'status'], (g, s) => {
    for (const c of s?.channels ?? []) g.set({ type: c.type, status: c.status }, c.count);
  });
  gauge('switchboard_mailbox_last_sync_age_seconds', "Seconds since each IMAP mailbox's last successful sync (since its creation when it never synced)", ['channel_id', 'organization_id'], (g, s) => {
    const now = deps.clock().getTime();
    for (const m of s?.mailboxes ?? []) g.set({ channel_id: m.id, organization_id: m.organizationId }, ageOf(m.lastSyncAt ?? m.createdAt, now));
  });
  gauge('switchboard_automation_evaluations_waiting', 'Automations whose instructions wait to be evaluated into a plan', [], (g, s) => {
    if (s) g.set(s.evaluations.count);
  });
  gauge('switchboard_automation_events_waiting', 'Events not yet offered to the automations that trigger on them', [], (g, s) => {
    if (s) g.set(s.events.count);
  });
  gauge('switchboard_automation_events_oldest_age_seconds', 'Age of the oldest event not yet offered to its automations (0 when none waits)', [], (g, s) => {
    if (s) g.set(ageOf(s.events.oldest, deps.clock().getTime()));
  });
  gauge('switchboard_db_pool_connections', 'PostgreSQL connections of this process: "total" open, "idle" among them, "waiting" requests queued for one', ['state'], (g) => {
    const pool = deps.database.poolStats?.();
    if (!pool) return;
    g.set({ state: 'total' }, pool.total);
    g.set({ state: 'idle' }, pool.idle);
    g.set({ state: 'waiting' }, pool.waiting);
  });

  return {
    registry,
    observe,
    /** Registers the hook that times every request and the `GET /metrics` route. */
    register(app: FastifyInstance) {
      app.addHook('onResponse', observe);
      app.get('/metrics', async (req, reply) => {
        const token = bearerToken(req.headers.authorization);
        if (!token || !safeEqual(token, deps.token)) {
          reply.header('www-authenticate', 'Bearer realm="metrics"');
          return sendError(new AppError('UNAUTHORIZED', 'GET /metrics needs Authorization: Bearer <METRICS_TOKEN>'), req, reply);
        }
        const body = await registry.metrics();
        return reply.type(registry.contentType).header('cache-control', 'no-store').send(body);
      });
    },
  };
}
