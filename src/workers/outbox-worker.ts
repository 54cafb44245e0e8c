import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../core/clock.js';
import { toAppError } from '../core/errors.js';
import type { Db } from '../db/client.js';
import { onQueued, type Claimed } from '../modules/outbox.js';
import type { NextBatch, QueueWork } from '../modules/queue-work.js';
import { busyWork, createWorkerLoop, type WorkerLoop } from './loop.js';

/** A queue as the worker runs it (each kind's sender, the media fetches, the webhook deliveries). */
export type { NextBatch, QueueWork } from '../modules/queue-work.js';

/**
 * The worker side of the queue engine (`src/modules/outbox.ts`): one loop over one or more queues that claims,
 * hands each lane's claimed rows to the queue's `run` (its transmit step) without waiting for it, and claims
 * again when a run ends, when a row is queued (the commit's notification) and every `pollMs`. A pass never
 * waits for a run: one lane's slow or dead provider holds its own rows only, until their deadline.
 */
export interface OutboxWorkerSpec {
  /** What the worker calls its work in the log. */
  name: string;
  db: Db;
  clock: Clock;
  log: Pick<FastifyBaseLogger, 'error'>;
  pollMs: number;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- each queue has its own row type
  queues: QueueWork<any>[];
}

export type OutboxWorker = WorkerLoop & {
  /** One pass: claims and starts runs, without waiting for them. */
  pass(): Promise<number>;
  /** Resolves once no run is under way. */
  idle(): Promise<void>;
};

export function createOutboxWorker(spec: OutboxWorkerSpec): OutboxWorker {
  const work = busyWork<number>();
  const inFlight = new Map<QueueWork<Claimed>, number>();
  let stopping = false;
  let runs = 0;

  /** Rows committed to each queue's table, as this process heard of them (the commits' notifications). */
  const queued = new Map<QueueWork<Claimed>, number>();

  function start<R extends Claimed>(queue: QueueWork<R>, rows: R[]) {
    /** The run's batch under way (counted in flight), and the rows it may still hold: that batch and the one before. */
    let batch = rows;
    let all = rows;
    inFlight.set(queue, (inFlight.get(queue) ?? 0) + rows.length);
    let heard = queued.get(queue) ?? 0;
    const next: NextBatch<R> = async (full) => {
      if (stopping || !queue.claimNext) return [];
      if (!full && (queued.get(queue) ?? 0) === heard) return [];
      heard = queued.get(queue) ?? 0;
      const limit = queue.maxInFlight - (inFlight.get(queue) ?? 0);
      if (limit <= 0) return [];
      const more = await queue.claimNext(spec.clock(), queue.laneOf(rows[0]!), limit);
      if (more.length === 0) return more;
      // The batch before is down to its last wave: the run counts as its new batch from here on.
      inFlight.set(queue, (inFlight.get(queue) ?? 0) + more.length - batch.length);
      all = [...batch, ...more];
      batch = more;
      return more;
    };
    const key = runs++;
    const run = queue
      .run(rows, () => stopping, next)
      .catch(async (err: unknown) => {
        if (toAppError(err).code === 'SERVICE_UNAVAILABLE') return; // the database is away: the leases bring the rows back
        spec.log.error({ err, ids: all.map((r) => r.id) }, `${queue.name} attempt failed`);
        await queue.recover(all, err).catch(() => {});
      })
      .finally(() => {
        inFlight.set(queue, (inFlight.get(queue) ?? 0) - batch.length);
        work.busy.delete(key);
        if (!stopping) loop.kick();
      });
    work.busy.set(key, run);
  }

  async function passOf<R extends Claimed>(queue: QueueWork<R>): Promise<number> {
    // Claims whose lease ran out after they transmitted (never claimed again) are settled beside the claims,
    // not before them: a woken pass's first claim waits for no other statement.
    const abandoned = Promise.resolve(queue.settleAbandoned?.(spec.clock()));
    let total = 0;
    try {
      for (let round = 0; round < 20 && !stopping; round++) {
        const claimed = await queue.claim(spec.clock(), queue.maxInFlight - (inFlight.get(queue) ?? 0));
        if (claimed.length === 0) break;
        const lanes = new Map<string, R[]>();
        for (const row of claimed) {
          const lane = queue.laneOf(row);
          lanes.set(lane, [...(lanes.get(lane) ?? []), row]);
        }
        for (const rows of lanes.values()) start(queue, rows);
        total += claimed.length;
      }
    } finally {
      await abandoned;
    }
    return total;
  }

  /** Each queue's pass, side by side (no queue's claim waits for another's); one that fails does not keep the others from theirs. */
  async function pass(): Promise<number> {
    const passes = await Promise.allSettled(spec.queues.map((queue) => passOf(queue)));
    const failed = passes.find((p): p is PromiseRejectedResult => p.status === 'rejected');
    if (failed) throw failed.reason;
    return passes.reduce((total, p) => total + (p.status === 'fulfilled' ? p.value : 0), 0);
  }

  const loop = createWorkerLoop({
    name: spec.name,
    pass,
    intervalMs: spec.pollMs,
    wake: (kick) => {
      const offs = spec.queues.flatMap((q) => [
        onQueued(spec.db, q.table, () => {
          queued.set(q, (queued.get(q) ?? 0) + 1);
          kick();
        }),
        q.wake?.(kick),
      ]);
      return () => offs.forEach((off) => off?.());
    },
    wakeDelayMs: 10,
    log: spec.log,
  });
  return {
    ...loop,
    pass,
    idle: work.idle,
    start() {
      stopping = false;
      for (const q of spec.queues) q.start?.();
      loop.start();
    },
    async stop() {
      stopping = true;
      await loop.stop();
      for (const q of spec.queues) q.stop?.();
      await work.settleWithin(Math.max(...spec.queues.map((q) => q.stopWaitMs)));
    },
  };
}
