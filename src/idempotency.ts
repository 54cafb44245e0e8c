import { createHash } from 'node:crypto';
import { and, eq, lt, sql } from 'drizzle-orm';
import { AppError } from './core/errors.js';
import type { Envelope } from './core/operation.js';
import type { Db, DbOrTx } from './db/client.js';
import { idempotencyKeys } from './db/schema.js';

/** How long a key is remembered. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
/** A first request that holds its key longer than this is taken to have died with its process: another may run. */
const STALE_LOCK_MS = 60_000;
/** Visible ASCII, 1 to 255 characters (Stripe allows 255). */
const KEY_SHAPE = /^[\x21-\x7e]{1,255}$/;

export interface IdempotentAnswer {
  status: number;
  body: unknown;
  replayed: boolean;
}

/** The key of the `Idempotency-Key` header, or undefined; a malformed one is a 400. */
export function idempotencyKeyOf(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  if (typeof header !== 'string' || !KEY_SHAPE.test(header)) {
    throw new AppError('BAD_REQUEST', 'Idempotency-Key must be 1 to 255 visible ASCII characters, sent once');
  }
  return header;
}

/** The `idempotencyKey` argument of an MCP tool call, or undefined; a malformed one is a validation error. */
export function idempotencyArgument(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !KEY_SHAPE.test(value)) {
    throw new AppError('VALIDATION_ERROR', 'The request is invalid', { errors: [], properties: { idempotencyKey: { errors: ['Must be 1 to 255 visible ASCII characters'] } } });
  }
  return value;
}

/** The JSON Schema of that argument, added to the tools of creating operations. */
export const IDEMPOTENCY_ARGUMENT_SCHEMA = {
  type: 'string',
  minLength: 1,
  maxLength: 255,
  description: 'Retry key (e.g. a UUID): the same key and arguments return the first result',
};

/** What makes two requests "the same": method, path and input. */
export const requestHash = (method: string, path: string, input: unknown) => createHash('sha256').update(`${method} ${path}\n${JSON.stringify(input)}`).digest('hex');

/**
 * Runs a POST at most once per (API key, Idempotency-Key), with Stripe's semantics. The first request
 * claims the key in its own short transaction, then runs the operation and stores its answer in one
 * transaction with the operation's write, so an answer is stored exactly when the write committed. A
 * retry with the same request gets the stored answer again (`replayed`); with another request, 400
 * IDEMPOTENCY_KEY_REUSED; while the first still runs, 409 IDEMPOTENCY_IN_PROGRESS with Retry-After. An
 * operation that fails stores nothing, so the key can be used again (as Stripe does for requests that
 * did not begin executing).
 */
export async function runIdempotent(
  db: Db,
  scope: { callerId: string; orgId: string; key: string; hash: string },
  status: number,
  run: (tx: DbOrTx) => Promise<Envelope>,
): Promise<IdempotentAnswer> {
  const now = new Date();
  const mine = and(eq(idempotencyKeys.callerId, scope.callerId), eq(idempotencyKeys.key, scope.key));
  const claimed = await db
    .insert(idempotencyKeys)
    .values({ callerId: scope.callerId, key: scope.key, organizationId: scope.orgId, requestHash: scope.hash, lockedAt: now, createdAt: now })
    .onConflictDoNothing()
    .returning({ key: idempotencyKeys.key });
  if (claimed.length === 0) {
    const [existing] = await db.select().from(idempotencyKeys).where(mine).limit(1);
    if (existing && existing.createdAt.getTime() < now.getTime() - IDEMPOTENCY_TTL_MS) {
      // Expired but not yet cleaned up: start afresh.
      await db.delete(idempotencyKeys).where(and(mine, eq(idempotencyKeys.createdAt, existing.createdAt)));
      return runIdempotent(db, scope, status, run);
    }
    if (!existing) return runIdempotent(db, scope, status, run); // deleted by a failed first request meanwhile
    if (existing.requestHash !== scope.hash) {
      throw new AppError('IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was already used with a different request; use a new key for a new request');
    }
    if (existing.responseStatus !== null) return { status: existing.responseStatus, body: existing.responseBody, replayed: true };
    // Still running, unless its process died: then take the key over.
    const [taken] = await db
      .update(idempotencyKeys)
      .set({ lockedAt: now })
      .where(and(mine, sql`${idempotencyKeys.responseStatus} IS NULL`, lt(idempotencyKeys.lockedAt, new Date(now.getTime() - STALE_LOCK_MS))))
      .returning({ key: idempotencyKeys.key });
    if (!taken) throw new AppError('IDEMPOTENCY_IN_PROGRESS', 'A request with this Idempotency-Key is still running; retry shortly', undefined, 1);
  }
  try {
    const body = await db.transaction(async (tx) => {
      const envelope = await run(tx);
      const json = JSON.parse(JSON.stringify(envelope)) as unknown;
      await tx.update(idempotencyKeys).set({ responseStatus: status, responseBody: json }).where(mine);
      return json;
    });
    return { status, body, replayed: false };
  } catch (err) {
    await db.delete(idempotencyKeys).where(and(mine, sql`${idempotencyKeys.responseStatus} IS NULL`));
    throw err;
  }
}

/** Keys older than the TTL, for the cleanup. */
export const expiredIdempotencyKeys = (now: Date) => lt(idempotencyKeys.createdAt, new Date(now.getTime() - IDEMPOTENCY_TTL_MS));
