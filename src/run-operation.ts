import { debitCredits } from './accounts/accounts.js';
import { eventTypesOf, parseInput, type Actor, type Envelope, type Operation, type OperationContext } from './core/operation.js';
import { paginationMeta, type PageInput } from './core/pagination.js';
import type { Db, DbOrTx } from './db/client.js';
import { isEventType } from './modules/events/events.catalog.js';
import { recordEvents, type NewEvent } from './modules/events/events.recorder.js';
import { notifyEventsCommitted } from './modules/events/events.signal.js';

/** Who runs an operation, as the adapters (REST, MCP) and the automation engine describe it. */
export interface Caller {
  orgId: string;
  actor: Actor;
  permissions: readonly string[];
  db: Db;
}

/**
 * Runs an operation for a caller whose permission is already checked; returns the envelope.
 * A write runs in one transaction with its credit debit (the operation's `cost`) and the events it
 * records, so a write that rolls back leaves neither, and an acknowledged write always has both.
 * `tx` lets the automation engine run several operations in its own transaction.
 */
export async function runOperation(op: Operation, raw: unknown, caller: Caller, tx?: DbOrTx): Promise<Envelope> {
  const input = parseInput(op, raw);
  const exec = (db: DbOrTx) => {
    const ctx: OperationContext = { orgId: caller.orgId, actorId: caller.actor.id ?? caller.orgId, actor: caller.actor, permissions: caller.permissions, db };
    return op.kind === 'list'
      ? op.handler(input as never, ctx).then((page): Envelope => ({ data: page.items, meta: { pagination: paginationMeta(input as PageInput, page) } }))
      : op.handler(input as never, ctx).then((data): Envelope => ({ data }));
  };
  // Nothing to debit and no event to record: the handler's own statements need no transaction around them.
  if (!op.cost && !op.event) return exec(tx ?? caller.db);
  const write = async (t: DbOrTx) => {
    if (op.cost) await debitCredits(t, caller.orgId, op.cost);
    const envelope = await exec(t);
    const recorded = await recordEvents(t, caller.actor, eventsOf(op, caller.orgId, envelope.data));
    return { envelope, recorded };
  };
  if (tx) return (await write(tx)).envelope;
  const { envelope, recorded } = await caller.db.transaction(write);
  if (recorded > 0) notifyEventsCommitted();
  return envelope;
}

function eventsOf(op: Operation, orgId: string, data: unknown): NewEvent[] {
  const record = data as { id?: unknown };
  const resourceId = typeof record?.id === 'string' ? record.id : null;
  // Plain JSON, as REST answers it: Dates become ISO strings.
  const json = JSON.parse(JSON.stringify(op.eventData ? op.eventData(data as Record<string, unknown>) : data)) as unknown;
  return eventTypesOf(op, data)
    .filter(isEventType)
    .map((type) => ({ type, organizationId: orgId, resourceId, data: json }));
}
