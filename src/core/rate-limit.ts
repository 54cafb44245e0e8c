import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';

export type Verdict = { allowed: true } | { allowed: false; retryAfter: number };

/** A fixed-window limiter: memory by default, Redis when configured so that instances share one count. */
export interface Limiter {
  /** Counts one request for `key`; answers how many seconds to wait when the limit is exceeded. */
  consume(key: string): Promise<Verdict>;
  /** The same, answered at once, where the count is in memory (no promise: it sits in every API request's path). */
  consumeNow?: (key: string) => Verdict;
}

const ALLOWED: Verdict = Object.freeze({ allowed: true });

/**
 * The memory limiter: per key, a window of `durationSeconds` opened by its first request, `points` requests
 * in it (as rate-limiter-flexible's memory store counts, without its promise, result object and timer per
 * key). Ended windows are dropped once per window's length.
 */
export function memoryWindows(spec: Pick<LimiterSpec, 'points' | 'durationSeconds'>, now: () => number = () => Date.now()) {
  const windowMs = spec.durationSeconds * 1000;
  const windows = new Map<string, { count: number; endsAt: number }>();
  let sweptAt = now();
  return {
    consume: (key: string) => Promise.resolve(consumeNow(key)),
    consumeNow,
    /** How many keys have a window open or not yet dropped (for tests). */
    get size() {
      return windows.size;
    },
  };
  function consumeNow(key: string): Verdict {
    const at = now();
    if (at - sweptAt >= windowMs) {
      for (const [k, w] of windows) if (w.endsAt <= at) windows.delete(k);
      sweptAt = at;
    }
    let w = windows.get(key);
    if (!w || w.endsAt <= at) windows.set(key, (w = { count: 0, endsAt: at + windowMs }));
    w.count++;
    return w.count <= spec.points ? ALLOWED : { allowed: false, retryAfter: Math.max(1, Math.ceil((w.endsAt - at) / 1000)) };
  }
}

export interface LimiterSpec {
  /** Distinguishes the counters of different limits in a shared store. */
  name: string;
  points: number;
  durationSeconds: number;
}

/** The store of a limit: memory, or Redis with memory as its stand-in while Redis is unreachable (an outage never blocks requests). */
function limiterStore(spec: LimiterSpec, redis?: Redis): RateLimiterAbstract {
  const opts = { keyPrefix: `sb:${spec.name}`, points: spec.points, duration: spec.durationSeconds };
  return redis ? new RateLimiterRedis({ ...opts, storeClient: redis, insuranceLimiter: new RateLimiterMemory(opts) }) : new RateLimiterMemory(opts);
}

export function createLimiter(spec: LimiterSpec, redis?: Redis): Limiter {
  if (!redis) return memoryWindows(spec);
  const limiter = limiterStore(spec, redis);
  return {
    async consume(key) {
      try {
        await limiter.consume(key);
        return { allowed: true };
      } catch (res) {
        if (res instanceof RateLimiterRes) return { allowed: false, retryAfter: Math.max(1, Math.ceil(res.msBeforeNext / 1000)) };
        throw res;
      }
    },
  };
}

/**
 * Counts chosen outcomes only (failed sign-ins, completed registrations): a key is refused once it has
 * `points` of them in the window, while the attempts that do not count stay free.
 */
export interface OutcomeLimiter {
  /** Seconds until `key` may try again; 0 when it may now. */
  retryAfter(key: string): Promise<number>;
  /** Counts one outcome of `key`; answers how many it now has in the window. */
  count(key: string): Promise<number>;
  /** Refuses `key` for `seconds`, whatever its count. */
  block(key: string, seconds: number): Promise<void>;
  /** Forgets the outcomes of `key` (e.g. a successful sign-in). */
  reset(key: string): Promise<void>;
}

export function createOutcomeLimiter(spec: LimiterSpec, redis?: Redis): OutcomeLimiter {
  const limiter = limiterStore(spec, redis);
  return {
    async retryAfter(key) {
      const res = await limiter.get(key);
      return res && res.consumedPoints >= spec.points ? Math.max(1, Math.ceil(res.msBeforeNext / 1000)) : 0;
    },
    async count(key) {
      const res = await limiter.consume(key).catch((res: unknown) => {
        if (!(res instanceof RateLimiterRes)) throw res;
        return res;
      });
      return res.consumedPoints;
    },
    async block(key, seconds) {
      await limiter.block(key, seconds);
    },
    async reset(key) {
      await limiter.delete(key);
    },
  };
}
