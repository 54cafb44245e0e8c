/**
 * Paces each client address by what its messages cost the main thread. A message's main-thread cost is the
 * wall time of its write (the embedded database runs its statements on the main thread, and one statement that
 * writes a 4 MB HTML part cannot be interrupted) plus its bytes at `bytesPerMs` (receiving its DATA and the
 * garbage it leaves). After a message whose cost reaches `floorMs`, the address's next message waits at its
 * `MAIL FROM` until the address's share of the main thread is back at `share` (a message that cost 0.8 s at a
 * quarter: the next one starts 2.4 s after the write), and the address has one such message on its way at a
 * time: its other connections wait their turn at `MAIL FROM`, and past `maxWaitMs` are refused for now (451)
 * before their message is sent. Small mail (under the floor) is never paced, and other addresses never wait.
 */

export interface PacingSettings {
  /** The share of the main thread one address's back-to-back costly mail may take (0 < share <= 1). */
  share: number;
  /** Messages that cost less than this (ms) leave their address unpaced. */
  floorMs: number;
  /** Bytes of a message the main thread handles per ms (receiving and collecting them). */
  bytesPerMs: number;
  /** The longest a MAIL FROM waits for its address's turn; then 451. */
  maxWaitMs: number;
  now?: () => number;
}

export const DEFAULT_PACING: PacingSettings = { share: 0.25, floorMs: 50, bytesPerMs: 20_000, maxWaitMs: 20_000 };

/** A message's turn: `done` with what it cost (or 0 when nothing was written). */
export interface PacedTurn {
  done(costMs: number): void;
}

interface Client {
  /** When its next message may start (ms since the epoch). */
  restUntil: number;
  /** A message of it is on its way (between its MAIL FROM and its write). */
  busy: boolean;
  waiting: { wake: () => void }[];
  timer?: NodeJS.Timeout | undefined;
}

const KEPT = 4096;

export function createPacer(settings: Partial<PacingSettings> = {}) {
  const s = { ...DEFAULT_PACING, ...settings };
  const now = s.now ?? Date.now;
  const clients = new Map<string, Client>();

  /** The main-thread cost of a written message: its write's wall time and its bytes. */
  const cost = (writeMs: number, bytes: number) => writeMs + bytes / s.bytesPerMs;

  /** Wakes the next waiting message once the client rests no more, or forgets the client. */
  function next(key: string, c: Client) {
    if (c.busy || c.timer) return;
    const ms = c.restUntil - now();
    if (ms > 0) {
      c.timer = setTimeout(() => {
        c.timer = undefined;
        next(key, c);
      }, ms);
      c.timer.unref?.();
      return;
    }
    const w = c.waiting.shift();
    if (w) {
      c.busy = true;
      return w.wake();
    }
    clients.delete(key);
  }

  function turnOf(key: string, c: Client): PacedTurn {
    let open = true;
    return {
      done(costMs) {
        if (!open) return;
        open = false;
        c.busy = false;
        if (costMs >= s.floorMs) c.restUntil = Math.max(c.restUntil, now()) + (costMs * (1 - s.share)) / s.share;
        if (clients.get(key) === c) next(key, c);
      },
    };
  }

  return {
    cost,
    /**
     * The turn of a client's next message: at once when the client is not paced, else when its last costly
     * message's rest is over and no other of its messages is on its way; undefined after `maxWaitMs`.
     */
    turn(key: string): Promise<PacedTurn | undefined> {
      const c = clients.get(key);
      if (!c) {
        let open = true;
        return Promise.resolve({
          done(costMs: number) {
            if (open) paced(key, costMs);
            open = false;
          },
        });
      }
      return new Promise((resolve) => {
        const entry = {
          wake: () => {
            clearTimeout(giveUp);
            resolve(turnOf(key, c));
          },
        };
        const giveUp = setTimeout(() => {
          const at = c.waiting.indexOf(entry);
          if (at >= 0) c.waiting.splice(at, 1);
          resolve(undefined);
        }, s.maxWaitMs);
        giveUp.unref?.();
        c.waiting.push(entry);
        next(key, c);
      });
    },
    /** How many clients are paced now (for tests). */
    get size() {
      return clients.size;
    },
  };

  /** An unpaced client's message cost `costMs`: a costly one makes the client paced from now on. */
  function paced(key: string, costMs: number) {
    if (costMs < s.floorMs) return;
    let c = clients.get(key);
    if (!c) {
      if (clients.size >= KEPT) {
        for (const [k, old] of clients) {
          if (!old.busy && old.waiting.length === 0) {
            clearTimeout(old.timer);
            clients.delete(k);
            break;
          }
        }
      }
      clients.set(key, (c = { restUntil: 0, busy: false, waiting: [] }));
    }
    c.restUntil = Math.max(c.restUntil, now()) + (costMs * (1 - s.share)) / s.share;
    next(key, c);
  }
}

export type Pacer = ReturnType<typeof createPacer>;
