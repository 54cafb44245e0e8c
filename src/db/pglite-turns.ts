import type { PGlite, Transaction } from '@electric-sql/pglite';

/**
 * The embedded database runs on the main thread and answers each statement within the same turn of the event
 * loop (its calls settle as microtasks): a chain of statements (a transaction of many writes, a worker's
 * pass, one mail written for forty channels) would otherwise run as one stretch in which no request is even
 * read. So its statements share the event loop: once a turn has spent `SLICE_MS` on them, the next statement
 * waits for the next turn (`setImmediate`), letting requests, timers and other connections in. Statements of
 * an open transaction wait as well: the transaction keeps its place (PGlite runs one at a time), but the
 * event loop goes on meanwhile. A turn shorter than the slice (every ordinary request) never waits.
 */

/** How long one turn of the event loop may spend on the embedded database's statements before it yields (ms). */
export const SLICE_MS = 15;

/** When the current turn's first statement started, or undefined when no statement ran in this turn yet. */
let sliceStartedAt: number | undefined;
const endSlice = () => {
  sliceStartedAt = undefined;
};

/** Waits for the next turn of the event loop when this turn has spent its slice; counts the slice from the first statement. */
export async function shareTurn(): Promise<void> {
  const now = performance.now();
  if (sliceStartedAt === undefined) {
    sliceStartedAt = now;
    // Runs once this turn (and its microtasks) is over: the next statement starts a new slice.
    setImmediate(endSlice);
    return;
  }
  if (now - sliceStartedAt < SLICE_MS) return;
  // The slice is spent: the continuation runs after `endSlice` (queued earlier), in a new slice.
  await new Promise<void>((resolve) => setImmediate(resolve));
  if (sliceStartedAt === undefined) {
    sliceStartedAt = performance.now();
    setImmediate(endSlice);
  }
}

/** `run` waiting for its turn first (the same signature: generic methods such as `query<T>` keep theirs). */
const paced = <F extends (...args: never[]) => Promise<unknown>>(run: F): F =>
  (async (...args: Parameters<F>) => {
    await shareTurn();
    return run(...args);
  }) as F;

/** The client with its statements (`query`, `exec`, and those of its transactions) sharing the event loop. */
export function shareEventLoop(client: PGlite): PGlite {
  const query = paced(client.query.bind(client));
  const exec = paced(client.exec.bind(client));
  const transaction = client.transaction.bind(client);
  return Object.assign(client, {
    query,
    exec,
    transaction: <T>(callback: (tx: Transaction) => Promise<T>) =>
      transaction((tx) => {
        tx.query = paced(tx.query.bind(tx));
        tx.exec = paced(tx.exec.bind(tx));
        return callback(tx);
      }),
  } as Pick<PGlite, 'query' | 'exec' | 'transaction'>);
}
