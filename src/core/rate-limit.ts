import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';

/** A fixed-window limiter: memory by default, Redis when configured so that instances share one count. */
export interface Limiter {
  /** Counts one request for `key`; answers how many seconds to wait when the limit is exceeded. */
  consume(key: string): Promise<{ allowed: true } | { allowed: false; retryAfter: number }>;
}

export interface LimiterSpec {
  /** Distinguishes the counters of different limits in a shared store. */
  name: string;
  points: number;
  durationSeconds: number;
}

export function createLimiter(spec: LimiterSpec, redis?: Redis): Limiter {
  const opts = { keyPrefix: `sb:${spec.name}`, points: spec.points, duration: spec.durationSeconds };
  // When Redis is unreachable the in-memory limiter takes over, so a Redis outage never blocks requests.
  const limiter: RateLimiterAbstract = redis
    ? new RateLimiterRedis({ ...opts, storeClient: redis, insuranceLimiter: new RateLimiterMemory(opts) })
    : new RateLimiterMemory(opts);
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
