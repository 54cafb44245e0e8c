import { getTableColumns, sql } from 'drizzle-orm';
import type { PgTable } from 'drizzle-orm/pg-core';
import type { DbOrTx } from '../db/client.js';

/** Rows per INSERT: large enough to amortise the round trip, far below PostgreSQL's 65,535 parameters. */
export const BATCH = 1000;

/**
 * One INSERT for many rows, sent as a single JSON parameter that PostgreSQL unpacks with
 * `jsonb_populate_recordset`: building a 1000-row VALUES list with the query builder cost more CPU than
 * the database spent storing the rows (Drizzle has no bulk path of its own). Every row must have the
 * same keys (the table's property names).
 */
export async function bulkInsert(db: DbOrTx, table: PgTable, rows: Record<string, unknown>[]) {
  if (rows.length === 0) return;
  const columns = getTableColumns(table);
  const keys = Object.keys(rows[0]!);
  const names = keys.map((k) => columns[k]!.name);
  const json = JSON.stringify(rows.map((row) => Object.fromEntries(keys.map((k, i) => [names[i], row[k] ?? null]))));
  const list = sql.raw(names.map((n) => `"${n}"`).join(', '));
  await db.execute(sql`INSERT INTO ${table} (${list}) SELECT ${list} FROM jsonb_populate_recordset(NULL::${table}, ${json}::jsonb)`);
}

/**
 * Writes batches with one statement in flight while the caller builds the next batch: on PostgreSQL the
 * database works while this process generates rows. Statements still run one after another, so parents
 * land before their children. No enclosing transaction: a running server keeps answering between
 * batches, and an interrupted seed keeps what it wrote.
 */
export class PipelinedWriter<Tables extends Record<string, PgTable>> {
  private inflight: Promise<void> = Promise.resolve();
  /** Rows written so far, per table. */
  readonly written = {} as Record<keyof Tables, number>;

  constructor(
    private readonly db: DbOrTx,
    private readonly tables: Tables,
  ) {
    for (const key of Object.keys(tables) as (keyof Tables)[]) this.written[key] = 0;
  }

  async write<K extends keyof Tables>(key: K, rows: Tables[K]['$inferInsert'][]) {
    for (let i = 0; i < rows.length; i += BATCH) {
      await this.inflight;
      this.inflight = bulkInsert(this.db, this.tables[key]!, rows.slice(i, i + BATCH));
      this.inflight.catch(() => {}); // awaited (and thrown) by the next write or by flush()
    }
    this.written[key] += rows.length;
  }

  /** Waits for the statement in flight (and throws its error). */
  flush() {
    return this.inflight;
  }
}
