import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../core/clock.js';
import { toAppError } from '../core/errors.js';
import type { Db } from '../db/client.js';
import { onQueued, type Claimed } from '../modules/outbox.js';
import { busyWork, createWorkerLoop, type WorkerLoop } from './loop.js';

/**
 * The worker side of the queue engine (`src/modules/outbox.ts`): a loop that claims, hands each lane's claimed
 * rows to the kind's `run` (its transmit step) without waiting for it, and claims again when a run ends, when a
 * row is queued (the commit's notification) and every `pollMs`. A pass never waits for a run: one lane's
 * slow or dead provider holds its own rows only, until their deadline.
 */
export interface OutboxWorkerSpec<R extends Claimed> {
  /** What the worker calls its work in the log. */
  name: string;
  db: Db;
  clock: Clock;
  log: Pick<FastifyBaseLogger, 'error'>;
  /** The queue's table, whose commits wake the worker. */
  table: string;
  pollMs: number;
  /** The most rows under way in this process. */
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
  /** On stop: ends what can be ended at once (attempts that have not transmitted), for `run` to give back. */
  abort?(): void;
  /** The longest a stop waits for the runs under way. */
  stopWaitMs: number;
  /** What else wakes the worker (besides the commit of a row queued in `table`); answers the unsubscribe. */
  wake?: (kick: () => void) => () => void;
}

export type OutboxWorker = WorkerLoop & {
  /** One pass: claims and starts runs, without waiting for them. */
  pass(): Promise<number>;
  /** Resolves once no run is under way. */
  idle(): Promise<void>;
};

export function createOutboxWorker<R extends Claimed>(spec: OutboxWorkerSpec<R>): OutboxWorker {
  const work = busyWork<number>();
  let inFlight = 0;
  let stopping = false;
  let runs = 0;

  function start(rows: R[]) {
    inFlight += rows.length;
    const key = runs++;
    const run = spec
      .run(rows, () => stopping)
      .catch(async (err: unknown) => {
        if (toAppError(err).code === 'SERVICE_UNAVAILABLE') return; // the database is away: the leases bring the rows back
        spec.log.error({ err, ids: rows.map((r) => r.id) }, `${spec.name} attempt failed`);
        await spec.recover(rows, err).catch(() => {});
      })
      .finally(() => {
        inFlight -= rows.length;
        work.busy.delete(key);
        if (!stopping) loop.kick();
      });
    work.busy.set(key, run);
  }

  async function pass(): Promise<number> {
    await spec.settleAbandoned?.(spec.clock());
    let total = 0;
    for (let round = 0; round < 20 && !stopping; round++) {
      const claimed = await spec.claim(spec.clock(), spec.maxInFlight - inFlight);
      if (claimed.length === 0) break;
      const lanes = new Map<string, R[]>();
      for (const row of claimed) {
        const lane = spec.laneOf(row);
        lanes.set(lane, [...(lanes.get(lane) ?? []), row]);
      }
      for (const rows of lanes.values()) start(rows);
      total += claimed.length;
    }
    return total;
  }

  const loop = createWorkerLoop({ name: spec.name, pass, intervalMs: spec.pollMs, wake: (kick) => {
      const offs = [onQueued(spec.db, spec.table, kick), spec.wake?.(kick)];
      return () => offs.forEach((off) => off?.());
    }, wakeDelayMs: 10, log: spec.log });
  return {
    ...loop,
    pass,
    idle: work.idle,
    start() {
      stopping = false;
      loop.start();
    },
    async stop() {
      stopping = true;
      await loop.stop();
      spec.abort?.();
      await work.settleWithin(spec.stopWaitMs);
    },
  };
}
