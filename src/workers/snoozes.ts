import { sql } from 'drizzle-orm';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../core/clock.js';
import type { Db } from '../db/client.js';
import { notifyEventsCommitted } from '../modules/events/events.signal.js';
import { createWorkerLoop, type WorkerLoop } from './loop.js';

/** A pass every 15 s: a snooze ends within 60 s of its time, with room for a busy database. */
export const SNOOZE_INTERVAL_MS = 15_000;
/** Threads reopened per statement: short transactions. */
const BATCH = 500;

export interface SnoozeDeps {
  db: Db;
  clock: Clock;
  log: Pick<FastifyBaseLogger, 'error'>;
  intervalMs?: number;
}

/**
 * Ends the snoozes that are due: each due thread becomes `open` with its events (`thread.updated`,
 * `thread.reopened` with reason `snooze_ended`), by the database function that also reopens a thread for an
 * incoming message (`reopen_thread`, migration 0022). One statement claims the due rows (`FOR UPDATE SKIP
 * LOCKED`) and reopens them, so with any number of processes each snooze ends exactly once. The snooze is the
 * thread's own state, so a restart loses nothing: the next pass finds it.
 */
export function createSnoozeWorker(deps: SnoozeDeps): WorkerLoop & { runOnce(): Promise<number> } {
  async function runOnce(): Promise<number> {
    let total = 0;
    for (;;) {
      const result = await deps.db.execute(sql`SELECT count(*) FILTER (WHERE reopen_thread(due.organization_id, due.id, 'snooze_ended'))::int AS reopened
        FROM (SELECT organization_id, id FROM threads
               WHERE status = 'snoozed' AND snoozed_until <= ${deps.clock().toISOString()}::timestamptz
               ORDER BY snoozed_until LIMIT ${BATCH} FOR UPDATE SKIP LOCKED) AS due`);
      const reopened = Number((result.rows[0] as { reopened?: number } | undefined)?.reopened ?? 0);
      // Its events may have queued webhook deliveries and work for automations: every worker looks.
      if (reopened > 0) notifyEventsCommitted();
      total += reopened;
      if (reopened < BATCH) return total;
    }
  }
  const loop = createWorkerLoop({ name: 'snooze worker', pass: runOnce, intervalMs: deps.intervalMs ?? SNOOZE_INTERVAL_MS, log: deps.log });
  return { ...loop, runOnce };
}
