import pg from 'pg';
import type { TestApp } from './app.js';
import { testDbKind } from './database.js';

/**
 * The statement log of this process: every round trip to the database, counted where the driver sends it.
 * PostgreSQL: each `Client#query` is one exchange (node-postgres sends a statement and waits for its
 * answer; a named statement's parse rides along). Embedded: each Sync message ends one exchange with the
 * backend (every statement, BEGIN and COMMIT included).
 */
const log: string[] = [];

/** Starts logging this process's round trips; answers the function that stops it. */
export function installStatementLog(t: TestApp) {
  if (testDbKind === 'postgres') {
    const original = pg.Client.prototype.query;
    pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
      const first = args[0] as string | { text?: string };
      log.push(typeof first === 'string' ? first : (first?.text ?? '?'));
      return (original as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof original;
    return () => {
      pg.Client.prototype.query = original;
    };
  }
  const client = (t.database.db as unknown as { $client: { execProtocolStream: (m: Uint8Array, o?: unknown) => Promise<unknown> } }).$client;
  const original = client.execProtocolStream.bind(client);
  client.execProtocolStream = (message: Uint8Array, options?: unknown) => {
    if (message[0] === 0x53 && message.length === 5) log.push('sync'); // 'S': Sync
    return original(message, options);
  };
  return () => {
    client.execProtocolStream = original;
  };
}

/** The round trips `run` makes to the database, with its value. */
export async function roundTrips<T>(run: () => Promise<T>): Promise<{ value: T; trips: number; statements: string[] }> {
  log.length = 0;
  const value = await run();
  return { value, trips: log.length, statements: [...log] };
}
