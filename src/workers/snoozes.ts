import { sql } from 'drizzle-orm';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../core/clock.js';
import type { Actor } from '../core/operation.js';
import type { Db } from '../db/client.js';
import { committedColumns, committedOf } from '../modules/events/events.recorder.js';
import { eventCtes } from '../modules/events/events.recorder.js';
import { notifyEventsCommitted } from '../modules/events/events.signal.js';
import { REOPEN_EVENTS, reopenCte } from '../modules/threads/threads.repository.js';
import { createWorkerLoop, type WorkerLoop } from './loop.js';

/** A pass every 15 s: a snooze ends within 60 s of its time, with room for a busy database. */
export const SNOOZE_INTERVAL_MS = 15_000;
/** Threads reopened per statement: short transactions. */
const BATCH = 500;
const SYSTEM: Actor = { type: 'system', id: null, depth: 0 };

export interface SnoozeDeps {
  db: Db;
  clock: Clock;
  log: Pick<FastifyBaseLogger, 'error'>;
  intervalMs?: number;
}

/**
 * Ends the snoozes that are due: each due thread becomes `open` with its events (`thread.updated`,
 * `thread.reopened` with reason `snooze_ended`) in one statement that claims the rows (`FOR UPDATE SKIP
 * LOCKED`) and reopens only those still snoozed and due, so with any number of processes each snooze ends
 * exactly once. The snooze is the thread's own state, so a restart loses nothing: the next pass finds it.
 */
export function createSnoozeWorker(deps: SnoozeDeps): WorkerLoop & { runOnce(): Promise<number> } {
  async function runOnce(): Promise<number> {
    let total = 0;
    for (;;) {
      const now = deps.clock();
      const result = await deps.db.execute(sql`WITH before AS (
          SELECT organization_id, id, status, snoozed_until FROM threads
           WHERE status = 'snoozed' AND snoozed_until <= ${now.toISOString()}::timestamptz
           ORDER BY snoozed_until LIMIT ${BATCH} FOR UPDATE SKIP LOCKED
        ), ${reopenCte('snooze_ended')}, ${sql.join(eventCtes(REOPEN_EVENTS, SYSTEM), sql`, `)}
        SELECT (SELECT count(*) FROM r)::int AS reopened, ${sql.join(committedColumns, sql`, `)}`);
      const row = result.rows[0] as Record<string, unknown> | undefined;
      const reopened = Number(row?.reopened ?? 0);
      const recorded = committedOf(row);
      if (recorded.events > 0) notifyEventsCommitted({ ...recorded, types: ['thread.updated', 'thread.reopened'] });
      total += reopened;
      if (reopened < BATCH) return total;
    }
  }
  const loop = createWorkerLoop({ name: 'snooze worker', pass: runOnce, intervalMs: deps.intervalMs ?? SNOOZE_INTERVAL_MS, log: deps.log });
  return { ...loop, runOnce };
}
