import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createPacer, type PacedTurn } from '../../src/workers/smtp-pacing.js';

/** When each turn of `key` is given, in ms from the start, for `count` messages taken back to back. */
async function backToBack(pacer: ReturnType<typeof createPacer>, key: string, count: number, costMs: number, gaps: number[]) {
  const start = Date.now();
  for (let i = 0; i < count; i++) {
    const turn = pacer.turn(key);
    await vi.runAllTimersAsync();
    const t = await turn;
    expect(t).toBeDefined();
    gaps.push(Date.now() - start);
    t!.done(costMs);
  }
}

describe('pacing one address by what its messages cost the main thread', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('makes the next message of an address wait three times its last costly one at a quarter, and never small mail or another address', async () => {
    const pacer = createPacer({ share: 0.25, floorMs: 50 });
    const costly: number[] = [];
    await backToBack(pacer, 'smtp:127.0.0.2', 3, 800, costly);
    // The first at once; each next one 2.4 s after the last was written (0.8 s of the main thread at a quarter).
    expect(costly).toEqual([0, 2400, 4800]);

    // An address's small mail, and another address while this one rests, are never made to wait (no time passes).
    const given = async (key: string): Promise<PacedTurn | undefined> => {
      let turn: PacedTurn | undefined;
      void pacer.turn(key).then((t) => (turn = t));
      await vi.advanceTimersByTimeAsync(0);
      return turn;
    };
    for (let i = 0; i < 4; i++) (await given('smtp:127.0.0.4'))!.done(5);
    (await given('smtp:127.0.0.2'))?.done(800);
    expect(await given('smtp:127.0.0.2')).toBeUndefined();
    expect(await given('smtp:127.0.0.3')).toBeDefined();
    expect(await given('smtp:127.0.0.4')).toBeDefined();
  });

  it('gives a paced address one message on its way at a time, and refuses (undefined) a turn that waited past the longest wait', async () => {
    const pacer = createPacer({ share: 0.5, floorMs: 50, maxWaitMs: 5000 });
    const first = await pacer.turn('a');
    first!.done(1000); // the address rests 1 s
    const order: string[] = [];
    const second = pacer.turn('a').then((t) => (order.push('second'), t));
    const third = pacer.turn('a').then((t) => (order.push('third'), t));
    await vi.advanceTimersByTimeAsync(1000);
    // The rest is over: one of them goes, the other waits for its write.
    expect(order).toEqual(['second']);
    await vi.advanceTimersByTimeAsync(3000);
    expect(order).toEqual(['second']);
    (await second)!.done(3000); // the second costs 3 s: the third would wait 3 s more, past its 5 s
    await vi.advanceTimersByTimeAsync(1000);
    expect(await third).toBeUndefined();
  });

  it('counts a message by its write and its bytes', () => {
    const pacer = createPacer({ bytesPerMs: 20_000 });
    expect(pacer.cost(500, 4_200_000)).toBe(710);
  });
});
