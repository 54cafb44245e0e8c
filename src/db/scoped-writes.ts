import { eq, sql, type SQL } from 'drizzle-orm';
import { fieldError } from '../core/errors.js';
import type { DbOrTx } from './client.js';
import { jsonRow } from './json.js';
import { live, softDeleteLive, type ScopedTable } from './scoped.js';
import { placeholder, Write, writeShapes, type WriteCheck, type WriteSpec } from './write.js';

/** The placeholders every statement of this module and of `childWrites` shares. */
export const orgId = placeholder('orgId');
export const id = placeholder('id');

/** A column that names another record of the organization, which must be live (a customer's business). */
export interface Reference {
  table: ScopedTable;
  /** The field's error when it names no live record. */
  message: string;
}

/**
 * The checks of the references a shape of values gives (`WriteCheck`, evaluated in the write's statement):
 * each given one must name a live record of the organization, or the write refuses as a whole with the
 * field's error. A null reference names nothing to check.
 */
export const referenceChecks = (references: Record<string, Reference> | undefined, fields: Record<string, unknown>): WriteCheck[] =>
  Object.entries(references ?? {})
    .filter(([key]) => fields[key] !== undefined && fields[key] !== null)
    .map(([key, ref]) => ({
      holds: sql`EXISTS (SELECT 1 FROM ${ref.table} WHERE ${live(ref.table, orgId, eq(ref.table.id, fields[key]))})`,
      marker: `switchboard:no-such-${key}`,
      error: () => fieldError(key, ref.message),
    }));

export interface ScopedWritesSpec {
  table: ScopedTable;
  label: string;
  /** Columns naming other records, by field: each given one is checked in the write's statement. */
  references?: Record<string, Reference>;
  /** What a soft delete takes with it (a customer's transactions): statements that may read `written`. */
  cascade?: (db: DbOrTx) => SQL[];
  /** The answer over the written row, when it is more than the row (`jsonRow(table, extra)`); by default the row. */
  answer?: SQL;
  /** Further conditions of an update, by the fields it gives (a folder's move: not into its own subtree); may read `orgId`, `id`. */
  updateChecks?: (fields: Record<string, unknown>) => WriteCheck[];
}

/**
 * The writes of an organization's top-level resource whose answer is the stored row (a business, a
 * customer; a folder, with its counts), each one statement answering it as JSON (`jsonRow`), for the
 * operation runner to compose with its events (`src/db/write.ts`); built once per shape of values, with
 * placeholders. `update` and `softDelete` find only the organization's live row (a 404 with the label,
 * before any reference check).
 */
export function scopedWrites<Row, Insert extends Record<string, unknown>>(spec: ScopedWritesSpec) {
  const { table, label } = spec;
  const answer = spec.answer ?? jsonRow(table);

  /** A write of `fields` answering the row, with the checks of the references they give (and `more`). */
  const checked = (statement: SQL, fields: Record<string, unknown>, more: WriteCheck[] = []): WriteSpec => ({
    statement,
    table,
    answer,
    label,
    checks: [...referenceChecks(spec.references, fields), ...more],
  });

  const insertShapes = writeShapes<Insert>((fields, db) =>
    checked(
      db
        .insert(table)
        .values({ ...fields, organizationId: orgId } as never)
        .returning()
        .getSQL(),
      fields,
    ),
  );
  const updateShapes = writeShapes<Partial<Insert>>((fields, db) =>
    checked(
      db
        .update(table)
        .set({ ...fields, updatedAt: sql`now()` } as never)
        .where(live(table, orgId, eq(table.id, id)))
        .returning()
        .getSQL(),
      fields,
      spec.updateChecks?.(fields),
    ),
  );
  const deleteShapes = writeShapes<Record<string, never>>((_fields, db) => ({
    statement: softDeleteLive(db, table, orgId, eq(table.id, id)).returning().getSQL(),
    table,
    ...(spec.cascade ? { also: spec.cascade(db) } : {}),
    answer,
    label,
  }));

  return {
    insert(db: DbOrTx, org: string, values: Insert): Write<Row> {
      const { spec: shape, values: filled } = insertShapes(db, values);
      return new Write(db, shape, { ...filled, orgId: org });
    },
    update(db: DbOrTx, org: string, row: string, patch: Partial<Insert>): Write<Row> {
      const { spec: shape, values: filled } = updateShapes(db, patch);
      return new Write(db, shape, { ...filled, orgId: org, id: row });
    },
    softDelete(db: DbOrTx, org: string, row: string): Write<Row> {
      return new Write(db, deleteShapes(db, {}).spec, { orgId: org, id: row });
    },
  };
}
