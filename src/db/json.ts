import { getTableColumns, sql, type SQL } from 'drizzle-orm';
import type { PgColumn, PgTable } from 'drizzle-orm/pg-core';

/**
 * A row as a JSON object built by PostgreSQL: keys are the schema's property names, timestamps are ISO 8601
 * UTC strings with milliseconds (`2026-11-22T03:09:56.743Z`). The hot reads return this document as is, so
 * no per-row mapping runs in Node (Drizzle's relational queries decode every nested field in JavaScript).
 */
export function jsonRow(table: PgTable, extra: Record<string, SQL> = {}, omit: string[] = []): SQL {
  const columns = Object.fromEntries(Object.entries(getTableColumns(table)).filter(([key]) => !omit.includes(key)));
  return jsonColumns(columns, extra);
}

/**
 * The same JSON object over chosen columns, in the order given (a record whose schema orders its keys
 * differently from the table, or holds only some of its columns), then `extra`.
 */
export function jsonColumns(columns: Record<string, PgColumn>, extra: Record<string, SQL> = {}): SQL {
  const entries: [string, SQL][] = Object.entries(columns).map(([key, column]) => [key, jsonValue(column)]);
  entries.push(...Object.entries(extra));
  // Keys come from the schema and the code, never from input: safe to inline.
  return sql`json_build_object(${sql.join(
    entries.map(([key, value]) => sql`${sql.raw(`'${key}'`)}, ${value}`),
    sql`, `,
  )})`;
}

function jsonValue(column: PgColumn): SQL {
  if (column.columnType === 'PgTimestamp') return isoTimestamp(column);
  // A decimal as the text stored, as the driver reads it (a JSON number could lose its digits).
  if (column.columnType === 'PgNumeric') return sql`${column}::text`;
  return sql`${column}`;
}

export const isoTimestamp = (column: PgColumn | SQL) => sql`to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/** `coalesce(json_agg(<row> ORDER BY created_at, id), '[]')` of a child table's live rows matching `where`. */
export function jsonChildren(table: PgTable & { createdAt: PgColumn; id: PgColumn; deletedAt: PgColumn }, where: SQL): SQL {
  return sql`(SELECT coalesce(json_agg(${jsonRow(table)} ORDER BY ${table.createdAt}, ${table.id}), '[]'::json)
    FROM ${table} WHERE ${where} AND ${table.deletedAt} IS NULL)`;
}
