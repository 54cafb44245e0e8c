import { and, eq, sql, type SQL } from 'drizzle-orm';
import type { AnyPgColumn, PgTable } from 'drizzle-orm/pg-core';
import type { Db, DbOrTx } from '../db/client.js';
import { notifySql, onNotification } from '../db/notify.js';
import { messages } from '../db/schema.js';
import { committedColumns, committedOf, eventCtes } from './events/events.recorder.js';
import { CommittedWork } from './events/events.signal.js';
import { messageJson } from './messages/messages.repository.js';

/**
 * The leased work queue, written once: the outboxes of mail and texts, the media of received texts and the
 * webhook deliveries are each a table of rows `pending` → claimed (`working`, until `lease_until`) → done or
 * `failed`, and this module is everything they share:
 *
 * - **Claim** (`claim`): one statement per pass, `FOR UPDATE SKIP LOCKED`, so several processes never take one
 *   row; fair by construction: every lane (a channel, an endpoint) offers its oldest due rows, the lanes of an
 *   organization take turns, and the organizations take turns (an organization with a thousand rows waiting
 *   and one with one row both get their first in the first claim). The claims under way in every process count
 *   (per lane, per organization), as the database holds them.
 * - **At most once** (`markTransmitted`): for a transmission that cannot be taken back (a text, a mail),
 *   `transmitted_at` is committed before it leaves; a claim whose lease ran out with it set is never sent
 *   again (`abandoned`: the caller settles it as an unknown outcome). A claim that ran out before it is
 *   claimed again.
 * - **Retry** (`retryLater`, `retryDelay`): the one backoff with ±10% jitter, at least the provider's
 *   `Retry-After`; past the attempts the caller fails the row.
 * - **Release** (`release`): a stopping process gives back what it has not transmitted, pending at once and
 *   the attempt not counted.
 * - **Wake** (`queuedNotice`, `onQueued`): the statement that writes a row notifies (`pg_notify`) the
 *   workers of every process when its transaction commits, and only then.
 */

/** The columns every queue has. */
export type QueueTable = PgTable & {
  id: AnyPgColumn;
  organizationId: AnyPgColumn;
  status: AnyPgColumn;
  attempt: AnyPgColumn;
  nextAttemptAt: AnyPgColumn;
  leaseUntil: AnyPgColumn;
  createdAt: AnyPgColumn;
  lastError: AnyPgColumn;
};

/** A row's identity for the claim it was taken under. */
export interface Claimed {
  id: string;
  attempt: number;
}

export interface QueueSpec<T extends QueueTable> {
  table: T;
  /** The lane a row waits in: its channel, its endpoint. */
  lane: AnyPgColumn;
  /** The status of a claimed row: `sending`, `fetching`, `delivering`. */
  working: string;
  /** `transmitted_at`, for a transmission that must happen at most once. */
  transmittedAt?: AnyPgColumn;
  /** `updated_at`, when the table has one. */
  updatedAt?: AnyPgColumn;
  /** How long a claim holds (longer than an attempt can last). */
  leaseMs: number;
  /** The waits before attempts 2, 3, …; the last one repeats. */
  retryDelaysMs: readonly number[];
  /** Attempts before a temporary failure gives up. */
  maxAttempts: number;
  /** More columns a claim sets (e.g. the time of the last attempt). */
  onClaim?: (now: Date) => Record<string, unknown>;
}

export interface ClaimOptions {
  /** The most rows this claim takes. */
  limit: number;
  /**
   * The most rows claimed at once per lane (a number, or an SQL expression over the queue's row). `batch`:
   * only a lane with no claim under way gets any (its rows go out in order, as one batch); `slots`: a lane
   * gets up to this many under way at once, counting every process's claims.
   */
  perLane: number | SQL;
  mode: 'batch' | 'slots';
  /** The most rows claimed at once per organization, counting every process's claims. */
  perOrganization?: number;
  /** More conditions on the rows (e.g. the channel's relay not paused). */
  where?: SQL | undefined;
  /**
   * `batch` only: the next batch of this one lane, for the attempt that holds the lane's batch now and
   * continues it (its own claim under way does not close the lane; no other attempt gets the lane meanwhile).
   */
  lane?: string;
}

/** The wait before the attempt after `attempt` failures: ±10% jitter, at least `retryAfterMs`. */
export function retryDelay(delaysMs: readonly number[], attempt: number, retryAfterMs?: number, random: () => number = Math.random): number {
  const base = delaysMs[Math.max(0, attempt - 1)] ?? delaysMs.at(-1)!;
  return Math.max(retryAfterMs ?? 0, Math.round(base * (0.9 + 0.2 * random())));
}

/** The notification channel of queued work; the payload names the queue's table. */
export const QUEUED_CHANNEL = 'switchboard_queued';

/** A column for the `RETURNING` of a statement that queues rows in `table`: the commit then wakes its workers. */
export const queuedNotice = (table: string) => notifySql(QUEUED_CHANNEL, table);

/** Calls `kick` when a transaction that queued rows in `table` commits (on this database, in any process). */
export const onQueued = (db: Db, table: string, kick: () => void) => onNotification(db, QUEUED_CHANNEL, (payload) => payload === table && kick());

export function createQueue<T extends QueueTable>(db: Db, spec: QueueSpec<T>, random: () => number = Math.random) {
  const t = spec.table;
  type Row = T['$inferSelect'] & Claimed;
  const leaseUntil = (now: Date) => new Date(now.getTime() + spec.leaseMs);
  const touched = (now: Date) => (spec.updatedAt ? { updatedAt: now } : {});
  const live = (now: Date) => sql`${t.status} = ${spec.working} AND ${t.leaseUntil} > ${now}`;
  /** What may be claimed now: pending and due, or claimed by an attempt that ended (and did not transmit). */
  const due = (now: Date) =>
    sql`((${t.status} = 'pending' AND ${t.nextAttemptAt} <= ${now}) OR (${t.status} = ${spec.working} AND ${t.leaseUntil} <= ${now}${spec.transmittedAt ? sql` AND ${spec.transmittedAt} IS NULL` : sql``}))`;
  const update = () => db.update(t as PgTable);
  /** This attempt's claim: the row is still claimed under the attempt it was taken with. */
  const mine = (row: Claimed) => and(eq(t.id, row.id), eq(t.status, spec.working), eq(t.attempt, row.attempt));
  /** Any of these rows, each under its own claim. */
  const allMine = (rows: Claimed[]) =>
    sql`(${t.id}, ${t.attempt}) IN (${sql.join(
      rows.map((r) => sql`(${r.id}::uuid, ${r.attempt}::int)`),
      sql`, `,
    )}) AND ${t.status} = ${spec.working}`;

  return {
    spec,
    mine,
    allMine,

    /** Claims due rows, fairly (see the top); answers them claimed, their attempt counted. */
    async claim(now: Date, opts: ClaimOptions): Promise<Row[]> {
      if (opts.limit <= 0) return [];
      const perLane = typeof opts.perLane === 'number' ? sql`${opts.perLane}::int` : opts.perLane;
      const open =
        opts.mode === 'batch' ? (opts.lane !== undefined ? sql`d.lane_turn <= d.lane_max` : sql`coalesce(ll.n, 0) = 0 AND d.lane_turn <= d.lane_max`) : sql`d.lane_turn + coalesce(ll.n, 0) <= d.lane_max`;
      const lane = opts.mode === 'batch' && opts.lane !== undefined ? sql` AND ${spec.lane} = ${opts.lane}` : sql``;
      const picked = sql`
        WITH d AS (
          SELECT ${t.id} AS id, ${t.organizationId} AS org, ${spec.lane} AS lane, ${t.nextAttemptAt} AS at,
                 row_number() OVER (PARTITION BY ${spec.lane} ORDER BY ${t.nextAttemptAt}, ${t.createdAt}, ${t.id}) AS lane_turn,
                 ${perLane} AS lane_max
            FROM ${t}
           WHERE ${due(now)}${lane}${opts.where ? sql` AND ${opts.where}` : sql``}
        ),
        ll AS (SELECT ${spec.lane} AS lane, count(*)::int AS n FROM ${t} WHERE ${live(now)} GROUP BY 1),
        lo AS (SELECT ${t.organizationId} AS org, count(*)::int AS n FROM ${t} WHERE ${live(now)} GROUP BY 1),
        r AS (
          SELECT d.id, d.at, row_number() OVER (PARTITION BY d.org ORDER BY d.lane_turn, d.lane) + coalesce(lo.n, 0) AS org_turn
            FROM d LEFT JOIN ll ON ll.lane = d.lane LEFT JOIN lo ON lo.org = d.org
           WHERE ${open}
        ),
        p AS (
          SELECT r.id FROM r${opts.perOrganization ? sql` WHERE r.org_turn <= ${opts.perOrganization}` : sql``}
           ORDER BY r.org_turn, r.at LIMIT ${opts.limit}
        ),
        k AS (SELECT ${t.id} AS id FROM ${t} WHERE ${t.id} IN (SELECT p.id FROM p) AND ${due(now)} FOR UPDATE SKIP LOCKED)
        ${
          opts.mode === 'batch'
            ? // Two processes that claim at once both see a lane with no claim under way (neither sees the other's
              // uncommitted claim), and SKIP LOCKED would split its batch between them, out of order. So a lane's
              // rows are taken only as the unbroken run from its first due row: only the one claim that locked
              // that row gets any, and it keeps the run up to the first row it did not lock.
              sql`SELECT x.id FROM (SELECT d.id, d.lane_turn, row_number() OVER (PARTITION BY d.lane ORDER BY d.lane_turn) AS n FROM k JOIN d ON d.id = k.id) x WHERE x.n = x.lane_turn`
            : sql`SELECT k.id FROM k`
        }`;
      const set = { status: spec.working, leaseUntil: leaseUntil(now), attempt: sql`${t.attempt} + 1`, ...(spec.transmittedAt ? { transmittedAt: null } : {}), ...touched(now), ...spec.onClaim?.(now) };
      const rows = await update()
        .set(set as never)
        .where(sql`${t.id} IN (${picked})`)
        .returning();
      // In each lane's order (the order its rows were queued in), whatever order the update returned them in.
      const at = (r: Record<string, unknown>) => [(r.nextAttemptAt as Date).getTime(), (r.createdAt as Date).getTime(), r.id as string] as const;
      return (rows as unknown as Row[]).sort((x, y) => {
        const [a, b] = [at(x), at(y)];
        return a[0] - b[0] || a[1] - b[1] || (a[2] < b[2] ? -1 : a[2] > b[2] ? 1 : 0);
      });
    },

    /**
     * Commits "these rows leave now" (`transmitted_at`) and renews the lease of `rest` (the rows of the batch
     * still to go), while this attempt holds them; answers the ids still held.
     */
    async markTransmitted(now: Date, rows: Claimed[], rest: Claimed[] = []): Promise<Set<string>> {
      const all = [...rows, ...rest];
      if (all.length === 0) return new Set();
      const leaving = sql.join(
        rows.map((r) => sql`${r.id}::uuid`),
        sql`, `,
      );
      const set = {
        ...(spec.transmittedAt && rows.length ? { transmittedAt: sql`CASE WHEN ${t.id} IN (${leaving}) THEN ${now}::timestamptz ELSE ${spec.transmittedAt} END` } : {}),
        leaseUntil: leaseUntil(now),
        ...touched(now),
      };
      const held = await update()
        .set(set as never)
        .where(and(allMine(all), sql`${t.leaseUntil} > ${now}`))
        .returning({ id: t.id });
      return new Set(held.map((h) => h.id as string));
    },

    /**
     * A temporary failure: pending again after the backoff. Answers false (nothing written) once the attempts
     * are used up: the caller then fails the row.
     */
    async retryLater(now: Date, row: Claimed, error: string, retryAfterMs?: number, extra: Record<string, unknown> = {}): Promise<boolean> {
      if (row.attempt >= spec.maxAttempts) return false;
      const next = new Date(now.getTime() + retryDelay(spec.retryDelaysMs, row.attempt, retryAfterMs, random));
      await update()
        .set({ status: 'pending', lastError: error, leaseUntil: null, nextAttemptAt: next, ...(spec.transmittedAt ? { transmittedAt: null } : {}), ...touched(now), ...extra } as never)
        .where(mine(row));
      return true;
    },

    /** Gives back claims that have not transmitted: pending at once, the attempt not counted. */
    async release(now: Date, rows: Claimed[]) {
      if (rows.length === 0) return;
      await update()
        .set({ status: 'pending', attempt: sql`${t.attempt} - 1`, leaseUntil: null, ...touched(now) } as never)
        .where(and(allMine(rows), spec.transmittedAt ? sql`${spec.transmittedAt} IS NULL` : undefined));
    },

    /** Claims whose lease ran out after they transmitted: their outcome is unknown, they are never sent again. */
    async abandoned(now: Date, limit: number): Promise<Row[]> {
      if (!spec.transmittedAt) return [];
      const rows = await db
        .select()
        .from(t as PgTable)
        .where(and(eq(t.status, spec.working), sql`${t.leaseUntil} <= ${now}`, sql`${spec.transmittedAt} IS NOT NULL`))
        .limit(limit);
      return rows as unknown as Row[];
    },
  };
}

export type Queue<T extends QueueTable> = ReturnType<typeof createQueue<T>>;

/** An outbox row's message and who queued it (the events of its sending carry the same actor and depth). */
export interface OutgoingRow {
  messageId: string;
  actorType: string;
  actorId: string | null;
  depth: number;
}

/** An outgoing message's outcome: its reason (or note) and, when the provider answered one, its id. */
type Settling = { row: OutgoingRow; reason: string | null; providerMessageId?: string | null | undefined };

/** The outcomes as the rows of `v(id, reason, pid, actor_type, actor_id, depth)`, each with who queued its message. */
const settlingValues = (items: Settling[]) =>
  sql`(VALUES ${sql.join(
    items.map((i) => sql`(${i.row.messageId}::uuid, ${i.reason}::text, ${i.providerMessageId ?? null}::text, ${i.row.actorType}::text, ${i.row.actorId}::uuid, ${i.row.depth}::int)`),
    sql`, `,
  )}) AS v(id, reason, pid, actor_type, actor_id, depth)`;

/**
 * The CTEs that settle the messages of `v` (a CTE of the outcomes, `settlingValues`): each message moves to
 * `status` (with its reason and, when given, the provider's id) when it is in one of `from`, and gets its
 * event (`message.sent`, `message.failed`) with the message as its data and the actor that queued it; a
 * deleted message gets none. `upd` answers the messages moved.
 */
function settleCtes(status: 'sent' | 'failed', from: readonly string[] | undefined, now: Date): SQL[] {
  const type = status === 'sent' ? 'message.sent' : 'message.failed';
  const moving = from
    ? sql` AND ${messages.status} IN (${sql.join(
        from.map((f) => sql`${f}`),
        sql`, `,
      )})`
    : sql``;
  const upd = sql`upd AS (
    UPDATE ${messages} SET status = ${status}, status_reason = v.reason, provider_message_id = coalesce(v.pid, ${messages.providerMessageId}), updated_at = ${now}
      FROM v
     WHERE ${messages.id} = v.id${moving}
    RETURNING ${messages.organizationId} AS organization_id, ${messages.id} AS id, ${messages.deletedAt} AS deleted_at, ${messageJson} AS data, v.actor_type, v.actor_id, v.depth
  )`;
  const source = sql`SELECT organization_id, ${type}::text AS type, id AS resource_id, data, actor_type, actor_id, depth FROM upd WHERE deleted_at IS NULL`;
  return [upd, ...eventCtes(source, { type: sql`x.actor_type`, id: sql`x.actor_id`, depth: sql`x.depth` })];
}

/**
 * Settles outgoing messages in one statement (in the caller's transaction), whoever queued them: see
 * `settleCtes`. The events go to `work`, announced after the commit.
 */
export async function settleMessages(tx: DbOrTx, items: Settling[], status: 'sent' | 'failed', from: readonly string[] | undefined, now: Date, work: CommittedWork) {
  if (items.length === 0) return;
  const v = sql`v AS (SELECT * FROM ${settlingValues(items)})`;
  const result = await tx.execute(sql`WITH ${sql.join([v, ...settleCtes(status, from, now)], sql`, `)} SELECT ${sql.join(committedColumns, sql`, `)}`);
  work.add({ ...committedOf(result.rows[0] as Record<string, unknown> | undefined), types: [status === 'sent' ? 'message.sent' : 'message.failed'] });
}

/** An outbox of outgoing messages: a queue whose rows each send one message. */
export type MessageQueueTable = QueueTable & { messageId: AnyPgColumn; sentAt: AnyPgColumn; updatedAt: AnyPgColumn };

/** What differs between the outboxes of outgoing messages: how long a claim holds, and the retries. */
export type MessageRetry = Pick<QueueSpec<QueueTable>, 'leaseMs' | 'retryDelaysMs' | 'maxAttempts'>;

/**
 * The queue of an outbox of outgoing messages (each channel kind's), the same for every kind: one lane per
 * channel, claimed rows `sending`, each transmitted at most once (`transmitted_at`), `updated_at` kept.
 */
export function messageQueue<T extends MessageQueueTable & { channelId: AnyPgColumn; transmittedAt: AnyPgColumn }>(table: T, retry: MessageRetry): QueueSpec<T> {
  return { table, lane: table.channelId, working: 'sending', transmittedAt: table.transmittedAt, updatedAt: table.updatedAt, ...retry };
}

export interface MessageOutboxSpec {
  /** The text of a claim whose lease ran out after it transmitted (its outcome is unknown; it is never sent again). */
  unknownOutcome: string;
  /**
   * The message statuses a settle moves a message from (undefined: any). The kinds whose providers report
   * deliveries settle forward only: a delivery report that came before the provider's answer stays.
   */
  from?: { sent?: readonly string[]; failed?: readonly string[] };
}

/**
 * How every outbox of outgoing messages (each channel kind's) settles its claims, written once and set-based:
 * each call is one transaction whatever the number of rows, the outbox rows and their messages and events
 * moving together (`settleMessages`), and only rows still claimed under the attempt they were taken with.
 */
export function messageOutbox<T extends MessageQueueTable>(db: Db, queue: Queue<T>, clock: () => Date, spec: MessageOutboxSpec) {
  const t = queue.spec.table;
  type Row = Claimed & OutgoingRow;
  /** A column as an `UPDATE`'s `SET` names it (unqualified). */
  const col = (c: AnyPgColumn) => sql.identifier(c.name);
  /** `CASE id WHEN … THEN … END` over the rows' own values. */
  const perRow = (items: { row: Claimed; value: string | null }[]) =>
    sql`CASE ${sql.join(
      items.map((i) => sql`WHEN ${t.id} = ${i.row.id}::uuid THEN ${i.value}::text`),
      sql` `,
    )} END`;

  /**
   * Fails rows (each with its reason): the outbox rows still claimed under their attempt, then their messages
   * and events, in one statement. `also` (e.g. an opt-out the failure reports) makes it a transaction with it.
   */
  async function fail(items: { row: Row; reason: string }[], also?: (tx: DbOrTx, work: CommittedWork) => Promise<void>) {
    if (items.length === 0) return;
    const now = clock();
    const work = new CommittedWork();
    const failing = sql`f AS (
      UPDATE ${t} SET ${col(t.status)} = 'failed', ${col(t.lastError)} = ${perRow(items.map((i) => ({ row: i.row, value: i.reason })))}, ${col(t.leaseUntil)} = NULL, ${col(t.updatedAt)} = ${now}
       WHERE ${queue.allMine(items.map((i) => i.row))}
      RETURNING ${t.messageId} AS message_id
    )`;
    // The messages of the rows failed: reading `f` puts the outbox rows first, the order the statement locks them in.
    const v = sql`v AS (SELECT * FROM ${settlingValues(items.map((i) => ({ row: i.row, reason: i.reason })))} WHERE v.id IN (SELECT message_id FROM f))`;
    const statement = sql`WITH ${sql.join([failing, v, ...settleCtes('failed', spec.from?.failed, now)], sql`, `)} SELECT ${sql.join(committedColumns, sql`, `)}`;
    const write = async (tx: DbOrTx) => {
      const result = await tx.execute(statement);
      work.add({ ...committedOf(result.rows[0] as Record<string, unknown> | undefined), types: ['message.failed'] });
      await also?.(tx, work);
    };
    await (also ? db.transaction(write) : write(db));
    work.announce();
  }

  /**
   * Rows sent, with the provider's ids (and a note kept as the row's `lastError`, e.g. recipients a relay
   * refused), in one statement: of the rows still claimed under their attempt, the messages with their events,
   * then the outbox rows. The messages first: the order a delivery report's write takes them in
   * (`applyStatus`), so that a report racing this answer (an SMPP receipt right behind its submit_sm_resp)
   * waits for it rather than deadlocking with it. A report that came first keeps its status; the message
   * keeps the provider's id all the same.
   */
  async function sent(items: { row: Row; providerMessageId: string | null; note?: string | null }[]) {
    if (items.length === 0) return;
    const at = clock();
    const work = new CommittedWork();
    const claims = queue.allMine(items.map((i) => i.row));
    const held = sql`held AS (SELECT ${t.id} AS id, ${t.messageId} AS message_id FROM ${t} WHERE ${claims})`;
    const v = sql`v AS (SELECT * FROM ${settlingValues(items.map((i) => ({ row: i.row, reason: i.note ?? null, providerMessageId: i.providerMessageId })))} WHERE v.id IN (SELECT message_id FROM held))`;
    // A message a report moved first: not settled, but it keeps the provider's id.
    const ids = sql`ids AS (
      UPDATE ${messages} SET provider_message_id = v.pid FROM v
       WHERE ${messages.id} = v.id AND v.pid IS NOT NULL AND ${messages.providerMessageId} IS NULL AND ${messages.id} NOT IN (SELECT id FROM upd)
      RETURNING 1
    )`;
    const notes = items.some((i) => i.note) ? perRow(items.map((i) => ({ row: i.row, value: i.note ?? null }))) : sql`NULL`;
    // Reading `upd` (the messages) before any outbox row is written: the messages are locked first.
    const done = sql`done AS (
      UPDATE ${t} SET ${col(t.status)} = 'sent', ${col(t.sentAt)} = ${at}, ${col(t.leaseUntil)} = NULL, ${col(t.lastError)} = ${notes}, ${col(t.updatedAt)} = ${at}
        FROM (SELECT count(*) AS n FROM upd) AS settled
       WHERE ${claims} AND ${t.id} IN (SELECT id FROM held)
      RETURNING 1
    )`;
    const result = await db.execute(sql`WITH ${sql.join([held, v, ...settleCtes('sent', spec.from?.sent, at), ids, done], sql`, `)}
      SELECT ${sql.join(committedColumns, sql`, `)}, (SELECT count(*) FROM ids)::int AS ids, (SELECT count(*) FROM done)::int AS done`);
    work.add({ ...committedOf(result.rows[0] as Record<string, unknown> | undefined), types: ['message.sent'] });
    work.announce();
  }

  /** Temporary failures: each pending again after its backoff, or failed (in one statement) once its attempts are used up. */
  async function retryLater(rows: Row[], error: string, retryAfterMs?: number) {
    const givenUp: { row: Row; reason: string }[] = [];
    for (const row of rows) if (!(await queue.retryLater(clock(), row, error, retryAfterMs))) givenUp.push({ row, reason: `Gave up after ${row.attempt} attempts; the last: ${error}` });
    await fail(givenUp);
  }

  return {
    fail,
    sent,
    retryLater,
    /** A run that threw: its rows are retried later (or failed). */
    recover: (rows: Row[]) => retryLater(rows, 'The attempt failed unexpectedly').catch(() => {}),
    /** Claims whose lease ran out after they transmitted: failed as unknown outcomes, never sent again. */
    async settleAbandoned(now: Date, limit = 64) {
      const rows = (await queue.abandoned(now, limit)) as unknown as Row[];
      await fail(rows.map((row) => ({ row, reason: spec.unknownOutcome })));
    },
  };
}
