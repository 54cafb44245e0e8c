import { and, eq, getTableColumns, param, sql } from 'drizzle-orm';
import type { PgColumn } from 'drizzle-orm/pg-core';
import { jsonRow } from './json.js';
import { live, softDeleteLive, type ScopedTable } from './scoped.js';
import { placeholder, Write, writeShapes } from './write.js';
import type { DbOrTx } from './client.js';

/** The placeholders every statement below shares. */
const orgId = placeholder('orgId');
const id = placeholder('id');
const parentId = placeholder('parentId');

/**
 * The writes of a resource that lives under a parent (a contact's emails), each one statement answering the
 * stored row as JSON (`jsonRow`), for the operation runner to compose with its events (`src/db/write.ts`):
 *
 * - `insert` stands only when the parent is live: `INSERT … SELECT <values> WHERE EXISTS (<the parent>)`,
 *   so no row (a 404 with the parent's label) when it is not, without a read before it;
 * - `update` and `softDelete` find only the parent's own live children (a 404 with the child's label).
 *
 * For resources whose answer is the stored row itself; the rest read and write through `scopedRepository`.
 */
export function childWrites<Row, Insert extends Record<string, unknown>>(spec: { table: ScopedTable; label: string; parentColumn: PgColumn; parent: ScopedTable; parentLabel: string }) {
  const { table, parent } = spec;
  const columns = getTableColumns(table) as Record<string, PgColumn>;
  const answer = jsonRow(table);
  const ofParent = and(eq(table.id, id), eq(spec.parentColumn, parentId))!;

  const insertShapes = writeShapes<Insert>((fields) => {
    const keys = Object.keys(fields);
    // The values are a SELECT list, where PostgreSQL cannot infer a placeholder's type from its column: each is cast.
    const values = keys.map((key) => {
      const column = columns[key]!;
      const type = sql.raw(column.getSQLType());
      return fields[key] === null ? sql`NULL::${type}` : sql`${param(fields[key], column)}::${type}`;
    });
    return {
      statement: sql`INSERT INTO ${table} (${sql.join(
        keys.map((key) => sql.identifier(columns[key]!.name)),
        sql`, `,
      )}) SELECT ${sql.join(values, sql`, `)} WHERE EXISTS (SELECT 1 FROM ${parent} WHERE ${live(parent, orgId, eq(parent.id, parentId))}) RETURNING *`,
      table,
      answer,
      label: spec.parentLabel,
    };
  });
  const updateShapes = writeShapes<Partial<Insert>>((fields, db) => ({
    statement: db
      .update(table)
      .set({ ...fields, updatedAt: sql`now()` } as never)
      .where(live(table, orgId, ofParent))
      .returning()
      .getSQL(),
    table,
    answer,
    label: spec.label,
  }));
  const deleteShapes = writeShapes<Record<string, never>>((_fields, db) => ({
    statement: softDeleteLive(db, table, orgId, ofParent).returning().getSQL(),
    table,
    answer,
    label: spec.label,
  }));

  return {
    insert(db: DbOrTx, org: string, parentOf: string, values: Insert): Write<Row> {
      const { spec: shape, values: filled } = insertShapes(db, values);
      return new Write(db, shape, { ...filled, orgId: org, parentId: parentOf });
    },
    update(db: DbOrTx, org: string, parentOf: string, child: string, patch: Partial<Insert>): Write<Row> {
      const { spec: shape, values: filled } = updateShapes(db, patch);
      return new Write(db, shape, { ...filled, orgId: org, parentId: parentOf, id: child });
    },
    softDelete(db: DbOrTx, org: string, parentOf: string, child: string): Write<Row> {
      return new Write(db, deleteShapes(db, {}).spec, { orgId: org, parentId: parentOf, id: child });
    },
  };
}

export type ChildWrites<Row, Insert extends Record<string, unknown>> = ReturnType<typeof childWrites<Row, Insert>>;
