import { sql } from 'drizzle-orm';
import { debitCredits, debitCte, insufficientCredits } from './accounts/accounts.js';
import { AppError, notFound } from './core/errors.js';
import { plainValue } from './core/json-text.js';
import { hasPermission, SEND_PERMISSION } from './core/permissions.js';
import { eventTypesOf, parseInput, type Actor, type Envelope, type Operation, type OperationContext } from './core/operation.js';
import { paginationMeta, type PageInput } from './core/pagination.js';
import type { Db, DbOrTx } from './db/client.js';
import { LazyTransaction } from './db/lazy-transaction.js';
import { composeWrite, executeWrite, failsWith, isWrite, refusal, renderWrite, runWrite, sentLater, type Write } from './db/write.js';
import { isEventType, type EventType } from './modules/events/events.catalog.js';
import { answerEventsSource, committedColumns, committedOf, eventCtes, nothingRecorded, recordEvents, type NewEvent, type Recorded } from './modules/events/events.recorder.js';
import { notifyEventsCommitted, type Committed, type CommittedWork } from './modules/events/events.signal.js';

/** Who runs an operation, as the adapters (REST, MCP) and the automation engine describe it. */
export interface Caller {
  orgId: string;
  actor: Actor;
  permissions: readonly string[];
  db: Db;
  /** `PUBLIC_URL`, for links in answers. */
  publicUrl?: string | undefined;
  /** Told of the messages a sending operation queues besides the one it answers (see `OperationContext`). */
  alsoQueued?: ((message: unknown) => void) | undefined;
  /**
   * The caller writes the envelope as JSON text (`envelopeJson`: REST, MCP), so a record the database built
   * as JSON may stay text (`JsonText`). Otherwise every record in the envelope is a value.
   */
  jsonText?: boolean;
}

/**
 * Runs an operation for a caller whose permission is already checked; returns the envelope.
 *
 * A write, its events (the operation's `event`), the webhook deliveries they queue and its credit debit
 * (the operation's `cost`) are written together or not at all, in one of two shapes:
 *
 * - one statement: the handler returned a `Write` (`src/db/write.ts`) without sending anything. The runner
 *   composes it with the events, the deliveries and the debit as CTEs of one named statement: one round
 *   trip, atomic by itself (no BEGIN/COMMIT).
 * - one transaction: the handler sent statements of its own (reads, several writes). Its handle is a
 *   transaction that began at its first statement (`LazyTransaction`, the debit first); the events follow
 *   in it (composed with the handler's last write when that is a `Write`), then COMMIT.
 *
 * Handlers need not know which: any handler works through the second; a repository that returns a
 * `Write` makes its operations the first. `tx` lets the automation engine and the idempotency store run
 * operations in their own transaction (the same composition, inside it); the work it recorded goes to
 * `committed`, which the transaction's owner announces after its commit.
 */
export async function runOperation(op: Operation, raw: unknown, caller: Caller, tx?: DbOrTx, committed?: CommittedWork): Promise<Envelope> {
  if (op.effects?.sends && !hasPermission(caller.permissions, SEND_PERMISSION)) throw missingSendConsent();
  const input = parseInput(op, raw);
  const call = (db: DbOrTx): unknown => {
    const ctx: OperationContext = { orgId: caller.orgId, actorId: caller.actor.id ?? caller.orgId, actor: caller.actor, permissions: caller.permissions, db, publicUrl: caller.publicUrl, alsoQueued: caller.alsoQueued };
    return op.handler(input as never, ctx);
  };
  if (op.kind === 'list') {
    const page = (await call(tx ?? caller.db)) as Awaited<ReturnType<typeof op.handler>>;
    return { data: caller.jsonText ? page.items : page.items.map(plainValue), meta: { pagination: paginationMeta(input as PageInput, page) } };
  }
  // Nothing to debit and no event to record: the handler's own statements need no transaction around them.
  if (!op.cost && !op.event) {
    const data = await call(tx ?? caller.db);
    return { data: caller.jsonText ? data : plainValue(data) };
  }

  const writer = new EventWriter(op, caller, input);
  if (tx) {
    // Inside the caller's transaction: debit first, as ever; then the write with its events.
    if (op.cost) await debitCredits(tx, caller.orgId, op.cost);
    const { result } = await settle(call(tx));
    const data = await writer.finish(tx, result);
    committed?.add(writer.committed());
    return { data };
  }

  const lazy = new LazyTransaction(caller.db, op.cost ? (t) => debitCredits(t, caller.orgId, op.cost!) : undefined);
  let result: unknown;
  try {
    ({ result } = await settle(call(lazy.db)));
  } catch (err) {
    await lazy.rollback();
    throw err;
  }
  let data: unknown;
  if (isWrite(result) && !lazy.opened) {
    data = await writer.alone(caller.db, result);
  } else if (!lazy.opened && !op.cost) {
    // The handler sent nothing and nothing is debited: the events alone are one statement.
    data = await writer.finish(caller.db, result);
  } else {
    data = await lazy.commit((t) => writer.finish(t, result));
  }
  if (writer.recorded.events > 0) notifyEventsCommitted(writer.committed());
  return { data };
}

/** The 403 of a send, reply or forward through a grant whose person did not consent to sending. */
export const missingSendConsent = () =>
  new AppError(
    'FORBIDDEN',
    `Sending needs the consent "Send email and text messages on your behalf" ("${SEND_PERMISSION}"), which this grant lacks: the person who connected the app can give it at /account/apps`,
  );

/**
 * A handler's answer, or its `Write` left unsent: awaiting a `Write` (a thenable, so also returning it from
 * an async function) would send it; an async handler answers one wrapped (`unsent`).
 */
async function settle(value: unknown): Promise<{ result: unknown }> {
  return { result: isWrite(value) ? value : sentLater(await value) };
}

const EVENT_GUARD = 'switchboard:event-types-changed';
const NO_CREDITS = 'switchboard:insufficient-credits';

/** The runner's own values in a composed write: placeholders, so that its text is rendered once per shape. */
const P = {
  org: sql.placeholder('_org'),
  types: sql.placeholder('_types'),
  actor: { type: sql.placeholder('_actor_type'), id: sql.placeholder('_actor_id'), depth: sql.placeholder('_actor_depth') },
};

/** The events of one run of a write operation, in the shape the write was sent in. */
class EventWriter {
  recorded: Recorded = nothingRecorded;
  /** The event types recorded (predicted, when the write went alone). */
  types: readonly string[] = [];

  constructor(
    private readonly op: Operation,
    private readonly caller: Caller,
    private readonly input: Record<string, unknown>,
  ) {}

  /** What this run recorded, for the workers' nudge after the commit. */
  committed(): Committed {
    return { ...this.recorded, types: this.types, operation: this.op.id };
  }

  private values(types: readonly EventType[]): Record<string, unknown> {
    const { actor, orgId } = this.caller;
    return { _org: orgId, _types: JSON.stringify(types), _actor_type: actor.type, _actor_id: actor.id, _actor_depth: actor.depth, _cost: this.op.cost };
  }

  /** Inside a transaction (the debit done): the handler's answer, or its `Write` sent with the events as one statement. */
  async finish(tx: DbOrTx, result: unknown): Promise<unknown> {
    const types = this.fixedTypes();
    if (isWrite(result) && this.composable() && types) {
      const rendered = renderWrite(tx, result.spec, `${this.op.id}:events`, () =>
        composeWrite(result.spec, eventCtes(answerEventsSource(P.org, P.types), P.actor), committedColumns),
      );
      const [row] = await executeWrite(tx, result.spec, rendered, { ...result.values, ...this.values(types) });
      if (row?.data == null) throw notFound(result.spec.label);
      this.recorded = committedOf(row);
      this.types = types;
      return row.data;
    }
    const data = isWrite(result) ? await runWrite(tx, result) : result;
    const list = eventsOf(this.op, this.caller.orgId, data);
    this.recorded = await recordEvents(tx, this.caller.actor, list);
    this.types = list.map((e) => e.type);
    return data;
  }

  /**
   * No transaction: the `Write`, its events, their deliveries and the debit as one statement. Event types
   * that depend on the answer are predicted from the input, and the statement refuses to stand when the
   * answer reads differently; the write then runs again in a transaction that records the events it answered.
   */
  async alone(db: Db, write: Write<unknown>): Promise<unknown> {
    const prediction = this.composable() ? this.predictTypes() : undefined;
    if (!prediction) return this.inTransaction(db, write);
    const { spec } = write;
    const guards = prediction.reads.map(([key]) => key);
    const rendered = renderWrite(db, spec, `${this.op.id}:${this.op.cost ?? 0}:alone:${guards.join(',')}`, () => {
      const ctes = [...(this.op.cost ? [debitCte(db)] : []), ...eventCtes(answerEventsSource(P.org, P.types), P.actor)];
      const columns = [...committedColumns];
      // Checks that must hold, evaluated on the one row the statement answers; a failed one aborts it whole.
      if (this.op.cost) columns.push(sql`CASE WHEN EXISTS (SELECT 1 FROM debit) THEN true ELSE ${refusal(NO_CREDITS, sql`(SELECT count(*)::text FROM debit)`)} END AS paid`);
      if (guards.length > 0) {
        const same = sql.join(
          guards.map((key, i) => sql`coalesce((answer.data -> ${key})::jsonb, 'null'::jsonb) = ${sql.placeholder(`_guard_${i}`)}::jsonb`),
          sql` AND `,
        );
        columns.push(sql`CASE WHEN answer.data IS NULL OR (${same}) THEN true ELSE ${refusal(EVENT_GUARD, sql`(answer.data->>'id')`)} END AS predicted`);
      }
      return composeWrite(spec, ctes, columns);
    });
    const values: Record<string, unknown> = { ...write.values, ...this.values(prediction.types) };
    prediction.reads.forEach(([, value], i) => (values[`_guard_${i}`] = JSON.stringify(value ?? null)));
    let row: Record<string, unknown> | undefined;
    try {
      [row] = await executeWrite(db, spec, rendered, values);
    } catch (err) {
      if (failsWith(err, NO_CREDITS)) throw insufficientCredits(this.op.cost!);
      if (failsWith(err, EVENT_GUARD)) return this.inTransaction(db, write);
      throw err;
    }
    if (row?.data == null) throw notFound(spec.label);
    this.types = prediction.types;
    this.recorded = committedOf(row);
    return row.data;
  }

  private async inTransaction(db: Db, write: Write<unknown>) {
    return db.transaction(async (t) => {
      if (this.op.cost) await debitCredits(t, this.caller.orgId, this.op.cost);
      const data = await runWrite(t, write);
      const list = eventsOf(this.op, this.caller.orgId, data);
      this.recorded = await recordEvents(t, this.caller.actor, list);
      this.types = list.map((e) => e.type);
      return data;
    });
  }

  /** The event's data is the answer as it stands (no `eventData`): the statement can write it. */
  private composable() {
    return !this.op.eventData;
  }

  /** The event types when they do not depend on the answer. */
  private fixedTypes(): EventType[] | undefined {
    return typeof this.op.event === 'string' ? [this.op.event].filter(isEventType) : undefined;
  }

  /**
   * The event types, from the answer's fields as the input gives them: the event function runs on the
   * input, and the fields it read are what the answer must hold for the types to be the same.
   */
  private predictTypes(): { types: EventType[]; reads: [string, unknown][] } | undefined {
    const fixed = this.fixedTypes();
    if (fixed) return { types: fixed, reads: [] };
    const spec = this.op.event;
    if (typeof spec !== 'function') return undefined;
    const reads = new Map<string, unknown>();
    let symbolic = false;
    const seen = new Proxy(this.input, {
      get(target, key) {
        if (typeof key !== 'string') {
          symbolic = true;
          return undefined;
        }
        const value = target[key];
        // Only plain values can be compared in SQL; anything else is not predicted.
        if (value !== null && value !== undefined && typeof value === 'object') symbolic = true;
        reads.set(key, value);
        return value;
      },
    });
    let types: string[];
    try {
      types = spec(seen);
    } catch {
      return undefined;
    }
    if (symbolic) return undefined;
    return { types: types.filter(isEventType), reads: [...reads].sort(([a], [b]) => (a < b ? -1 : 1)) };
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function eventsOf(op: Operation, orgId: string, data: unknown): NewEvent[] {
  const record = data as { id?: unknown };
  // A record whose id is no UUID (a thread of a recorded message may carry any id) has none in the event's column.
  const resourceId = typeof record?.id === 'string' && UUID.test(record.id) ? record.id : null;
  // Plain JSON, as REST answers it: Dates become ISO strings.
  const json = JSON.parse(JSON.stringify(op.eventData ? op.eventData(data as Record<string, unknown>) : data)) as unknown;
  return eventTypesOf(op, data)
    .filter(isEventType)
    .map((type) => ({ type, organizationId: orgId, resourceId, data: json }));
}
