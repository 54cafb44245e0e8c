import type { Claimed } from './outbox.js';

/**
 * One queue of the queue engine (`src/modules/outbox.ts`) as a worker runs it (`src/workers/outbox-worker.ts`):
 * a channel kind's sender (declared in its folder), the media fetches, the webhook deliveries.
 */
export interface QueueWork<R extends Claimed> {
  /** What the queue's failures are called in the log. */
  name: string;
  /** The queue's table, whose commits wake the worker. */
  table: string;
  /** The most of its rows under way in this process. */
  maxInFlight: number;
  /** Claims up to `limit` rows. */
  claim(now: Date, limit: number): Promise<R[]>;
  /** The lane a row belongs to: one run per lane and claim. */
  laneOf(row: R): string;
  /** Transmits one lane's claimed rows and settles them; `stopping()` turns true when the worker stops. */
  run(rows: R[], stopping: () => boolean): Promise<void>;
  /** A run that threw: each of its rows is retried later (or failed). */
  recover(rows: R[], err: unknown): Promise<void>;
  /** Before claiming: settles claims that ran out after they transmitted (unknown outcomes). */
  settleAbandoned?(now: Date): Promise<unknown>;
  /** On stop, before the runs are waited for: ends what can be ended at once (attempts that have not transmitted, pauses). */
  stop?(): void;
  /** On start. */
  start?(): void;
  /** The longest a stop waits for its runs under way. */
  stopWaitMs: number;
  /** What else wakes the worker (besides the commit of a row queued in `table`); answers the unsubscribe. */
  wake?: (kick: () => void) => () => void;
}
