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
  /**
   * Transmits one lane's claimed rows and settles them; `stopping()` turns true when the worker stops. A queue
   * with `claimNext` may call `next` as its rows' last transmission leaves, to go on with the lane's next batch
   * in the same run (see `next`).
   */
  run(rows: R[], stopping: () => boolean, next: NextBatch<R>): Promise<void>;
  /**
   * A batch queue: the next batch of `lane` (at most `limit` rows), for the run that holds the lane's batch
   * now (`ClaimOptions.lane`).
   */
  claimNext?(now: Date, lane: string, limit: number): Promise<R[]>;
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

/**
 * The lane's next batch for a run going on with it: claimed (and counted as the run's) only when the worker
 * is not stopping, has room for it, and rows are likely waiting: `full` (the run's batch was as large as a
 * claim gives) or rows of the queue committed since the run's last claim. Otherwise none, without a
 * statement: the run ends and the worker's next pass claims as usual.
 */
export type NextBatch<R extends Claimed> = (full: boolean) => Promise<R[]>;
