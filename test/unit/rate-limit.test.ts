import { describe, expect, it } from 'vitest';
import { createLimiter, memoryWindows } from '../../src/core/rate-limit.js';

/** The memory limiter sits in every API request's path: it answers at once and counts as the Redis one does. */
describe('the memory rate limiter', () => {
  it('answers without a promise, allows `points` per window opened by the first request, then says how long to wait', () => {
    let now = 1_000_000;
    const limit = memoryWindows({ points: 2, durationSeconds: 60 }, () => now);
    expect(limit.consumeNow('a')).toEqual({ allowed: true });
    now += 10_000;
    expect(limit.consumeNow('a')).toEqual({ allowed: true });
    expect(limit.consumeNow('a')).toEqual({ allowed: false, retryAfter: 50 });
    expect(limit.consumeNow('b')).toEqual({ allowed: true }); // another key, its own window
    now += 49_500;
    expect(limit.consumeNow('a')).toEqual({ allowed: false, retryAfter: 1 });
    now += 500; // the window opened 60 s ago has ended
    expect(limit.consumeNow('a')).toEqual({ allowed: true });
  });

  it('drops ended windows, so that keys seen once do not stay in memory', () => {
    let now = 0;
    const limit = memoryWindows({ points: 5, durationSeconds: 1 }, () => now);
    for (let i = 0; i < 100; i++) limit.consumeNow(`k${i}`);
    expect(limit.size).toBe(100);
    now += 1_000;
    limit.consumeNow('later');
    expect(limit.size).toBe(1);
  });

  it('is what a limit without Redis uses, with the promise form answering the same', async () => {
    const limiter = createLimiter({ name: 'test', points: 1, durationSeconds: 60 });
    expect(limiter.consumeNow).toBeTypeOf('function');
    expect(await limiter.consume('x')).toEqual({ allowed: true });
    expect(await limiter.consume('x')).toMatchObject({ allowed: false });
  });
});
