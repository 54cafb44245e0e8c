import type { FastifyBaseLogger } from 'fastify';
import { toAppError } from '../core/errors.js';

export interface WorkerLoop {
  start(): void;
  /** Stops polling and waits for the pass under way. */
  stop(): Promise<void>;
  /** Runs a pass now (or right after the one under way). */
  kick(): void;
}

export interface WorkerLoopOptions {
  /** What the worker calls its work in the log, e.g. "automation engine". */
  name: string;
  /** One pass over the work at hand. */
  pass: () => Promise<unknown>;
  /** The pause between passes (ms). */
  intervalMs: number;
  /** Subscribes to a wake-up signal (e.g. events committed in this process); returns the unsubscribe. */
  wake?: (kick: () => void) => () => void;
  /**
   * The window (ms) within which wake-ups share one pass, so that a burst of writes is served by one pass
   * rather than a pass each: a wake-up runs its pass at once unless another one did within the window; then
   * it waits for the window's end. 0 runs every wake-up at once.
   */
  wakeDelayMs?: number;
  log: Pick<FastifyBaseLogger, 'error'>;
}

/**
 * The loop every background worker runs: one pass at a time, again after `intervalMs`, at once when
 * woken (a wake during a pass runs another pass right after it). A pass that throws is logged and the
 * loop goes on; a database outage (503) is not logged on every pass. Work is claimed in the database by
 * the passes themselves, so several processes may run the same loop.
 */
export function createWorkerLoop(opts: WorkerLoopOptions): WorkerLoop {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let again = false;
  let stopped = true;
  let unsubscribe: (() => void) | undefined;
  let wakeTimer: NodeJS.Timeout | undefined;

  const kick = () => {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    clearTimeout(timer);
    running = (async () => {
      do {
        again = false;
        try {
          await opts.pass();
        } catch (err) {
          if (toAppError(err).code !== 'SERVICE_UNAVAILABLE') opts.log.error({ err }, `${opts.name} pass failed`);
        }
      } while (again && !stopped);
    })().finally(() => {
      running = undefined;
      if (!stopped) timer = setTimeout(kick, opts.intervalMs);
    });
  };

  /** When a wake-up last ran its pass. */
  let wokenAt = Number.NEGATIVE_INFINITY;
  const woken = () => {
    if (!opts.wakeDelayMs) return kick();
    if (wakeTimer) return;
    const since = performance.now() - wokenAt;
    if (since >= opts.wakeDelayMs) {
      wokenAt = performance.now();
      return kick();
    }
    wakeTimer = setTimeout(() => {
      wakeTimer = undefined;
      wokenAt = performance.now();
      kick();
    }, opts.wakeDelayMs - since);
  };

  return {
    kick,
    start() {
      if (!stopped) return;
      stopped = false;
      unsubscribe = opts.wake?.(woken);
      kick();
    },
    async stop() {
      stopped = true;
      unsubscribe?.();
      clearTimeout(timer);
      clearTimeout(wakeTimer);
      wakeTimer = undefined;
      await running;
    },
  };
}

/**
 * The work a worker has under way (one promise per item), for its stop and its tests: a stop waits for it at
 * most `ms` (a request under way may take up to its own deadline; what it held is then taken over through
 * its lease), and `idle` until nothing is under way.
 */
export function busyWork<K>() {
  const busy = new Map<K, Promise<unknown>>();
  return {
    busy,
    async settleWithin(ms: number) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([Promise.all(busy.values()), new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
      clearTimeout(timer);
    },
    async idle() {
      while (busy.size > 0) await Promise.all(busy.values());
    },
  };
}
