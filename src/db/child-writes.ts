import { and, eq, getTableColumns, param, sql } from 'drizzle-orm';
import type { PgColumn } from 'drizzle-orm/pg-core';
import { jsonRow } from './json.js';
import { live, softDeleteLive, type ScopedTable } from './scoped.js';
import { id, orgId, referenceChecks, type Reference } from './scoped-writes.js';
import { placeholder, Write, writeShapes } from './write.js';
import type { DbOrTx } from './client.js';

const parentId = placeholder('parentId');

export interface ChildWritesSpec {
  table: ScopedTable;
  label: string;
  parentColumn: PgColumn;
  parent: ScopedTable;
  parentLabel: string;
  /** Columns a create takes from the parent's row when its values leave them out (a transaction's business: its customer's). */
  fromParent?: Record<string, PgColumn>;
  /** Columns naming other records, by field: each given one is checked in the write's statement (`WriteCheck`). */
  references?: Record<string, Reference>;
}

/**
 * The writes of a resource that lives under a parent (a contact's emails), each one statement answering the
 * stored row as JSON (`jsonRow`), for the operation runner to compose with its events (`src/db/write.ts`):
 *
 * - `insert` stands only when the parent is live: `INSERT … SELECT <values> FROM <the parent> WHERE <live>`,
 *   so no row (a 404 with the parent's label) when it is not, without a read before it; the values may take
 *   columns of the parent's row (`fromParent`);
 * - `update` and `softDelete` find only the parent's own live children (a 404 with the child's label);
 * - a reference the values give (`references`) must name a live record of the organization, or the write
 *   refuses as a whole with the field's error (checked after the 404: an unknown parent or child comes first).
 *
 * For resources whose answer is the stored row itself; the rest read and write through `scopedRepository`.
 */
export function childWrites<Row, Insert extends Record<string, unknown>>(spec: ChildWritesSpec) {
  const { table, parent } = spec;
  const columns = getTableColumns(table) as Record<string, PgColumn>;
  const answer = jsonRow(table);
  const ofParent = and(eq(table.id, id), eq(spec.parentColumn, parentId))!;

  const checks = (fields: Record<string, unknown>) => referenceChecks(spec.references, fields);

  const insertShapes = writeShapes<Insert>((fields) => {
    const keys = Object.keys(fields);
    // The values are a SELECT list, where PostgreSQL cannot infer a placeholder's type from its column: each is cast.
    const values = keys.map((key) => {
      const column = columns[key]!;
      const type = sql.raw(column.getSQLType());
      return fields[key] === null ? sql`NULL::${type}` : sql`${param(fields[key], column)}::${type}`;
    });
    const inherited = Object.entries(spec.fromParent ?? {}).filter(([key]) => !(key in fields));
    return {
      statement: sql`INSERT INTO ${table} (${sql.join(
        [...keys, ...inherited.map(([key]) => key)].map((key) => sql.identifier(columns[key]!.name)),
        sql`, `,
      )}) SELECT ${sql.join([...values, ...inherited.map(([, column]) => sql`${column}`)], sql`, `)} FROM ${parent} WHERE ${live(parent, orgId, eq(parent.id, parentId))} RETURNING *`,
      table,
      answer,
      label: spec.parentLabel,
      checks: checks(fields),
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
    checks: checks(fields),
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
