import { fillPlaceholders, type Query, type SQL } from 'drizzle-orm';
import type { PgDialect, PgSession } from 'drizzle-orm/pg-core';
import pg from 'pg';
import { JsonText } from '../core/json-text.js';
import type { DbOrTx } from './client.js';

/**
 * The node-postgres pool behind a database handle, when the handle is the database itself on PostgreSQL
 * (not a transaction, not PGlite): a statement Drizzle rendered once can go to it directly, without the
 * prepared-query object Drizzle builds per call. The values fill the placeholders as Drizzle fills them
 * (`fillPlaceholders`, with the columns' encoders); errors are the driver's own (every check of them reads
 * the cause chain, where Drizzle puts them).
 */
export function poolOf(db: DbOrTx): pg.Pool | undefined {
  const client = (db as { $client?: unknown }).$client;
  return client instanceof pg.Pool ? client : undefined;
}

/**
 * A hot read whose one column is a record's JSON as text (`jsonRow(…)::text`), sent straight to the driver:
 * Drizzle renders the statement once (its text and where each placeholder goes); each call then sends that
 * text as a named prepared statement (node-postgres, planned once per connection) or as is (PGlite), asks
 * for rows as arrays, and answers each row's text as a `JsonText`. Nothing is mapped per row in JavaScript:
 * the answer reaches the client as PostgreSQL wrote it. Inside a transaction the statement goes through the
 * transaction's own session (the same text, the same answer).
 */
export function textRead(name: string, build: (db: DbOrTx) => SQL) {
  let rendered: Query | undefined;
  return async (db: DbOrTx, values: Record<string, unknown>): Promise<JsonText[]> => {
    const query = (rendered ??= (db as unknown as Internals).dialect.sqlToQuery(build(db)));
    const pool = poolOf(db);
    const client = (db as { $client?: unknown }).$client;
    let rows: unknown[][];
    if (pool) {
      rows = (await pool.query<unknown[]>({ name, text: query.sql, values: fillPlaceholders(query.params, values), rowMode: 'array' })).rows;
    } else if (client && typeof (client as PgliteLike).query === 'function') {
      rows = (await (client as PgliteLike).query(query.sql, fillPlaceholders(query.params, values), { rowMode: 'array' })).rows;
    } else {
      // A transaction handle: its session, which keeps the statement inside the transaction.
      const { session } = db as unknown as Internals;
      const result = (await session.prepareQuery(query, undefined, name, false).execute(values)) as { rows: Record<string, unknown>[] };
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
