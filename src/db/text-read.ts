import { Placeholder, type Query, type SQL } from 'drizzle-orm';
import type { PgDialect, PgSession } from 'drizzle-orm/pg-core';
import pg from 'pg';
import { JsonText } from '../core/json-text.js';
import type { DbOrTx } from './client.js';

/**
 * A hot read whose one column is a record's JSON as text (`jsonRow(…)::text`), sent straight to the driver:
 * Drizzle renders the statement once (its text and where each placeholder goes); each call then sends that
 * text as a named prepared statement (node-postgres, planned once per connection) or as is (PGlite), asks
 * for rows as arrays, and answers each row's text as a `JsonText`. Nothing is mapped per row in JavaScript:
 * the answer reaches the client as PostgreSQL wrote it. Inside a transaction the statement goes through the
 * transaction's own session (the same text, the same answer).
 */
export function textRead(name: string, build: (db: DbOrTx) => SQL) {
  let rendered: { query: Query; order: (string | { value: unknown })[] } | undefined;
  const render = (db: DbOrTx) => {
    const query = (db as unknown as Internals).dialect.sqlToQuery(build(db));
    // Each parameter is a placeholder's name, filled per call, or a constant of the statement.
    const order = query.params.map((p) => (p instanceof Placeholder ? (p.name as string) : { value: p }));
    return { query, order };
  };
  return async (db: DbOrTx, values: Record<string, unknown>): Promise<JsonText[]> => {
    rendered ??= render(db);
    const params = rendered.order.map((p) => (typeof p === 'string' ? values[p] : p.value));
    const client = (db as { $client?: unknown }).$client;
    let rows: unknown[][];
    if (client instanceof pg.Pool) {
      rows = (await client.query<unknown[]>({ name, text: rendered.query.sql, values: params, rowMode: 'array' })).rows;
    } else if (client && typeof (client as PgliteLike).query === 'function') {
      rows = (await (client as PgliteLike).query(rendered.query.sql, params, { rowMode: 'array' })).rows;
    } else {
      // A transaction handle: its session, which keeps the statement inside the transaction.
      const { session } = db as unknown as Internals;
      const result = (await session.prepareQuery(rendered.query, undefined, name, false).execute(values)) as { rows: Record<string, unknown>[] };
      rows = result.rows.map((row) => Object.values(row));
    }
    return rows.map((row) => new JsonText(row[0] as string));
  };
}

interface Internals {
  session: PgSession;
  dialect: PgDialect;
}

/** The part of PGlite's client used here (its type is not imported: a process on PostgreSQL never loads it). */
interface PgliteLike {
  query(text: string, params: unknown[], options: { rowMode: 'array' }): Promise<{ rows: unknown[][] }>;
}
