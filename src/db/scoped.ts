import { and, count, eq, isNull, sql, type SQL } from 'drizzle-orm';
import type { PgColumn, PgTable } from 'drizzle-orm/pg-core';
import { notFound } from '../core/errors.js';
import { pageOrder, pageWindow, type Page, type PageInput } from '../core/pagination.js';
import type { DbOrTx } from './client.js';

/** A table whose rows belong to an organization and are soft-deleted. */
export type ScopedTable = PgTable & {
  id: PgColumn;
  organizationId: PgColumn;
  createdAt: PgColumn;
  updatedAt: PgColumn;
  deletedAt: PgColumn;
};

/** `organization_id = $org AND deleted_at IS NULL [AND extra…]`: the filter every read and write uses. */
export function live(table: ScopedTable, orgId: string, ...extra: (SQL | undefined)[]): SQL {
  return and(eq(table.organizationId, orgId), isNull(table.deletedAt), ...extra)!;
}

/** Soft-deletes every live row of the organization matching `where`; the cascades of a parent's delete use it. */
export function softDeleteLive(db: DbOrTx, table: ScopedTable, orgId: string, where: SQL) {
  return db
    .update(table)
    .set({ deletedAt: sql`now()`, updatedAt: sql`now()` } as never)
    .where(live(table, orgId, where));
}

/** A table whose rows are listed newest (or oldest) first, ties broken by id. */
type PagedTable = PgTable & { id: PgColumn; createdAt: PgColumn };

/** One page of `table`'s rows matching `where`, ordered by creation date and id as the page asks. */
export async function listPage<T extends PagedTable>(db: DbOrTx, table: T, where: SQL | undefined, page: PageInput): Promise<T['$inferSelect'][]> {
  const t = table as PagedTable;
  const { limit, offset } = pageWindow(page);
  const rows = await db
    .select()
    .from(t)
    .where(where)
    .orderBy(...pageOrder(page, t.createdAt, t.id))
    .limit(limit)
    .offset(offset);
  return rows as T['$inferSelect'][];
}

/**
 * The reads and writes every organization-scoped resource needs, each scoped by `live()`, so a caller
 * cannot forget the organization or the soft delete. Another organization's row is simply not found.
 */
export function scopedRepository<T extends ScopedTable>(table: T, label: string) {
  type Row = T['$inferSelect'];
  type Insert = T['$inferInsert'];
  const t = table as ScopedTable;

  return {
    table,
    /** The resource's label in its 404 ("Contact"). */
    label,
    live: (orgId: string, ...extra: (SQL | undefined)[]) => live(t, orgId, ...extra),

    /** The live row, or 404. */
    async get(db: DbOrTx, orgId: string, id: string, extra?: SQL): Promise<Row> {
      const [row] = await db.select().from(t).where(live(t, orgId, eq(t.id, id), extra)).limit(1);
      if (!row) throw notFound(label);
      return row as Row;
    },

    /** Whether a live row with this id exists in the organization. */
    async exists(db: DbOrTx, orgId: string, id: string, extra?: SQL): Promise<boolean> {
      const rows = await db.select({ one: sql`1` }).from(t).where(live(t, orgId, eq(t.id, id), extra)).limit(1);
      return rows.length > 0;
    },

    /** One page ordered by creation date; `withTotal` adds a count (use it only where the set is small). */
    async list(db: DbOrTx, orgId: string, page: PageInput, opts: { where?: SQL | undefined; withTotal?: boolean } = {}): Promise<Page<Row>> {
      const where = live(t, orgId, opts.where);
      const items = listPage(db, table, where, page);
      if (!opts.withTotal) return { items: await items };
      const [rows, [totalRow]] = await Promise.all([items, db.select({ n: count() }).from(t).where(where)]);
      return { items: rows, total: Number(totalRow?.n ?? 0) };
    },

    async insert(db: DbOrTx, values: Insert): Promise<Row> {
      const [row] = await db.insert(t).values(values as never).returning();
      return row as Row;
    },

    /** Updates the given fields of a live row (and `updatedAt`); 404 when there is none. */
    async update(db: DbOrTx, orgId: string, id: string, patch: Partial<Insert>, extra?: SQL): Promise<Row> {
      const [row] = await db
        .update(t)
        .set({ ...(patch as object), updatedAt: sql`now()` } as never)
        .where(live(t, orgId, eq(t.id, id), extra))
        .returning();
      if (!row) throw notFound(label);
      return row as Row;
    },

    /** Sets `deletedAt` on a live row and returns it; 404 when there is none. */
    async softDelete(db: DbOrTx, orgId: string, id: string, extra?: SQL): Promise<Row> {
      const [row] = await softDeleteLive(db, t, orgId, and(eq(t.id, id), extra)!).returning();
      if (!row) throw notFound(label);
      return row as Row;
    },
  };
}

export type ScopedRepository<T extends ScopedTable> = ReturnType<typeof scopedRepository<T>>;

/** Drops keys whose value is `undefined`, so a PATCH touches only the fields it was given. */
export function definedOnly<T extends Record<string, unknown>>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
