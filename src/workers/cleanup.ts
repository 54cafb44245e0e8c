import { and, inArray, isNotNull, lt, notExists, sql, type SQL } from 'drizzle-orm';
import type { PgColumn, PgTable } from 'drizzle-orm/pg-core';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../core/clock.js';
import type { Db } from '../db/client.js';
import { automaticMessages, events, idempotencyKeys, oauthClients, oauthCodes, oauthGrants, oauthSessions, oauthTokens } from '../db/schema.js';
import { expiredIdempotencyKeys } from '../idempotency.js';
import { createWorkerLoop, type WorkerLoop } from './loop.js';

const DAY_MS = 24 * 60 * 60 * 1000;
/** Rows deleted per statement: short transactions, no long locks. */
const BATCH = 1000;
/** A registered OAuth client that no user approved within this time is removed (clients register again on `invalid_client`). */
export const UNUSED_CLIENT_HOURS = 24;
/** A revoked grant (and what hangs off it) is kept this long for the record, then removed. */
export const REVOKED_GRANT_DAYS = 30;
/** Expired codes, tokens and sessions are kept this long after expiry (for support questions), then removed. */
const EXPIRED_GRACE_MS = DAY_MS;

export interface CleanupDeps {
  db: Db;
  clock: Clock;
  log: Pick<FastifyBaseLogger, 'error' | 'info'>;
  eventRetentionDays: number;
  /** Pause between passes (ms); an hour by default. */
  intervalMs?: number;
}

interface Purge {
  name: string;
  table: PgTable;
  /** The key the batch selects by: the primary key column, or `ctid` for a composite key. */
  key: PgColumn | SQL;
  where: (now: Date) => SQL | undefined;
}

/**
 * Deletes what has outlived its use: events past retention (once the automations have seen them),
 * expired authorization codes, tokens and sign-in sessions, and registered OAuth clients nobody approved.
 * Each statement deletes one batch of rows it locked with SKIP LOCKED, so processes that clean up at the
 * same time share the rows instead of waiting on each other.
 */
export function createCleanup(deps: CleanupDeps): WorkerLoop & { runOnce(): Promise<Record<string, number>> } {
  const purges: Purge[] = [
    {
      name: 'events',
      table: events,
      key: events.id,
      where: (now) => and(lt(events.occurredAt, new Date(now.getTime() - deps.eventRetentionDays * DAY_MS)), isNotNull(events.dispatchedAt)),
    },
    // The daily cap of automatic messages reads today's rows and the hourly rate the last hour's: two days is plenty.
    { name: 'automatic message records', table: automaticMessages, key: automaticMessages.id, where: (now) => lt(automaticMessages.createdAt, new Date(now.getTime() - 2 * DAY_MS)) },
    { name: 'oauth codes', table: oauthCodes, key: oauthCodes.codeHash, where: (now) => lt(oauthCodes.expiresAt, new Date(now.getTime() - EXPIRED_GRACE_MS)) },
    { name: 'oauth tokens', table: oauthTokens, key: oauthTokens.tokenHash, where: (now) => lt(oauthTokens.expiresAt, new Date(now.getTime() - EXPIRED_GRACE_MS)) },
    { name: 'oauth sessions', table: oauthSessions, key: oauthSessions.idHash, where: (now) => lt(oauthSessions.expiresAt, now) },
    { name: 'idempotency keys', table: idempotencyKeys, key: sql`ctid`, where: expiredIdempotencyKeys },
    {
      name: 'unused oauth clients',
      table: oauthClients,
      key: oauthClients.id,
      where: (now) =>
        and(
          lt(oauthClients.createdAt, new Date(now.getTime() - UNUSED_CLIENT_HOURS * 60 * 60 * 1000)),
          notExists(deps.db.select({ one: sql`1` }).from(oauthGrants).where(sql`${oauthGrants.clientId} = ${oauthClients.id}`)),
        ),
    },
  ];

  async function purge(p: Purge, now: Date): Promise<number> {
    let total = 0;
    for (;;) {
      const batch = deps.db.select({ key: p.key }).from(p.table).where(p.where(now)).limit(BATCH).for('update', { skipLocked: true });
      const deleted = await deps.db.delete(p.table).where(sql`${p.key} IN (${batch})`).returning({ key: p.key });
      total += deleted.length;
      if (deleted.length < BATCH) return total;
    }
  }

  /** Grants revoked more than REVOKED_GRANT_DAYS ago, with their codes and tokens (which reference them). */
  async function purgeRevokedGrants(now: Date): Promise<number> {
    const old = deps.db
      .select({ id: oauthGrants.id })
      .from(oauthGrants)
      .where(lt(oauthGrants.revokedAt, new Date(now.getTime() - REVOKED_GRANT_DAYS * DAY_MS)));
    return deps.db.transaction(async (tx) => {
      await tx.delete(oauthCodes).where(inArray(oauthCodes.grantId, old));
      await tx.delete(oauthTokens).where(inArray(oauthTokens.grantId, old));
      const deleted = await tx.delete(oauthGrants).where(inArray(oauthGrants.id, old)).returning({ id: oauthGrants.id });
      return deleted.length;
    });
  }

  async function runOnce() {
    const now = deps.clock();
    const counts: Record<string, number> = { 'revoked oauth grants': await purgeRevokedGrants(now) };
    for (const p of purges) counts[p.name] = await purge(p, now);
    const removed = Object.entries(counts).filter(([, n]) => n > 0);
    if (removed.length) deps.log.info({ removed: Object.fromEntries(removed) }, 'cleanup removed expired rows');
    return counts;
  }

  const loop = createWorkerLoop({ name: 'cleanup', pass: runOnce, intervalMs: deps.intervalMs ?? 60 * 60 * 1000, log: deps.log });
  return { ...loop, runOnce };
}
