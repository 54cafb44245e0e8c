import { eq } from 'drizzle-orm';
import type { PgColumn } from 'drizzle-orm/pg-core';
import { z } from 'zod';
import type { Category } from '../core/categories.js';
import { defineOperation, type Operation, type OperationContext, type Wire } from '../core/operation.js';
import { Pagination } from '../core/pagination.js';
import { IdParam } from '../core/schemas.js';
import { childWrites, type ChildWritesSpec } from '../db/child-writes.js';
import type { ScopedRepository, ScopedTable } from '../db/scoped.js';

type Id = ReturnType<typeof IdParam>;
/** The path parameters of a child: the parent's `id` and the child's own, e.g. `emailId`. */
type Ids<P extends string> = { id: Id } & Record<P, Id>;

/**
 * The five operations of a resource that lives under a parent (a contact's emails, phone numbers and
 * addresses, a customer's transactions, a domain's registrations): list and create at
 * `/<area>/{id}/<segment>`, get, update and delete at `/<area>/{id}/<segment>/{<param>}`.
 *
 * Every one is scoped to the parent: list and create answer 404 unless the parent is live, get, update and
 * delete find only the parent's own children (a parent's soft delete also deletes them). The rules of a
 * resource (derived columns, defaults taken from the parent, references to check) are the spec's
 * `toInsert` and `toPatch`, written beside the resource's other operations; the repository only reads and
 * writes.
 */
export interface ChildResourceSpec<T extends ScopedTable, PT extends ScopedTable, P extends string, C extends z.ZodRawShape, U extends z.ZodRawShape, O extends z.ZodType> {
  area: Category;
  /** The parent, in words ("contact"): the summaries and the parent id's description. */
  parent: string;
  parentRows: ScopedRepository<PT>;
  /** The path segment under the parent ("phone-numbers"). */
  segment: string;
  /** The child's word in operation ids and event types ("phone_number": `contacts.create_phone_number`, `contact.phone_number.created`). */
  action: string;
  /** The child id's path parameter ("phoneNumberId"). */
  param: P;
  singular: string;
  plural: string;
  /** What the child id's description calls it, when not `singular`. */
  idLabel?: string;
  rows: ScopedRepository<T>;
  /** The child's column holding its parent's id. */
  parentColumn: PgColumn;
  output: O;
  /** A stored row as the output schema describes it (usually the row itself: the type checker holds the two together). */
  present: (row: T['$inferSelect']) => Wire<z.input<O>>;
  create: {
    summary: string;
    description?: string;
    fields: C;
    /** The row to insert, from the validated body and the live parent. */
    toInsert: (body: z.output<z.ZodObject<C>>, parent: PT['$inferSelect'], ctx: OperationContext) => T['$inferInsert'] | Promise<T['$inferInsert']>;
  };
  update: {
    method: 'PATCH' | 'PUT';
    description: string;
    fields: U;
    /** The columns to change, from the validated body (fields absent from it are left alone). */
    toPatch: (body: z.output<z.ZodObject<U>>, ctx: OperationContext, ids: { parentId: string; childId: string }) => Partial<T['$inferInsert']> | Promise<Partial<T['$inferInsert']>>;
  };
  /**
   * The writes as one statement each, composed with their events (`src/db/child-writes.ts`): for a child
   * whose answer is its stored row (`present` is the row itself), whose `toInsert` reads only the parent's
   * id and whose `toInsert` and `toPatch` answer at once (no promise).
   */
  oneStatement?: true;
  /** With `oneStatement`: columns a create takes from the parent's row when the body leaves them out. */
  fromParent?: ChildWritesSpec['fromParent'];
  /** With `oneStatement`: fields naming other records, checked in the write's statement. */
  references?: ChildWritesSpec['references'];
  /** The list's description, when it has one. */
  listDescription?: string;
  deleteDescription?: string;
}

/** `obj` without `keys`. */
function without(obj: Record<string, unknown>, keys: readonly string[]): Record<string, unknown> {
  return Object.fromEntries(Object.entries(obj).filter(([key]) => !keys.includes(key)));
}

export function childResource<T extends ScopedTable, PT extends ScopedTable, P extends string, C extends z.ZodRawShape, U extends z.ZodRawShape, O extends z.ZodType>(
  spec: ChildResourceSpec<T, PT, P, C, U, O>,
): Operation[] {
  const { rows, present } = spec;
  const ofParent = (parentId: string) => eq(spec.parentColumn, parentId);
  const writes = spec.oneStatement
    ? childWrites<Wire<z.input<O>>, T['$inferInsert']>({
        table: rows.table,
        label: rows.label,
        parentColumn: spec.parentColumn,
        parent: spec.parentRows.table,
        parentLabel: spec.parentRows.label,
        ...(spec.fromParent ? { fromParent: spec.fromParent } : {}),
        ...(spec.references ? { references: spec.references } : {}),
      })
    : undefined;
  /** A value `oneStatement` promised would not be a promise. */
  const now = <V>(value: V | Promise<V>): V => {
    if (value instanceof Promise) throw new Error(`${spec.area}.${spec.action}: oneStatement needs toInsert and toPatch to answer without a promise`);
    return value;
  };
  const parentId = { id: IdParam(spec.parent) };
  // A computed key is typed `string` by TypeScript: this says it is the literal P.
  const ids: Ids<P> = { ...parentId, ...({ [spec.param]: IdParam(spec.idLabel ?? spec.singular) } as Record<P, Id>) };
  const path = `/${spec.area}/{id}/${spec.segment}`;
  const item = `${path}/{${spec.param}}`;
  // Zod cannot name the fields of an object schema built from generic shapes, so the factory reads the
  // parsed input through the shapes it built itself: the two ids and the body (the rest). These are the
  // only places where types are asserted; everything the modules write is checked as it stands.
  const idOf = (input: object) => (input as { id: string }).id;
  const childOf = (input: object) => (input as Record<P, string>)[spec.param];
  const bodyOf = <B>(input: object, keys: string[]) => without(input as Record<string, unknown>, keys) as B;

  return [
    defineOperation({
      id: `${spec.area}.list_${spec.segment.replaceAll('-', '_')}`,
      kind: 'list',
      method: 'GET',
      path,
      summary: `List a ${spec.parent}'s ${spec.plural}`,
      ...(spec.listDescription ? { description: spec.listDescription } : {}),
      input: Pagination.extend(parentId).strict(),
      output: spec.output,
      handler: async (input, ctx) => {
        const id = idOf(input);
        await spec.parentRows.get(ctx.db, ctx.orgId, id);
        const found = await rows.list(ctx.db, ctx.orgId, input, { where: ofParent(id), withTotal: true });
        return { ...found, items: found.items.map(present) };
      },
    }),
    defineOperation({
      id: `${spec.area}.create_${spec.action}`,
      method: 'POST',
      event: `${spec.parent}.${spec.action}.created`,
      path,
      summary: spec.create.summary,
      ...(spec.create.description ? { description: spec.create.description } : {}),
      input: z.strictObject({ ...parentId, ...spec.create.fields }),
      output: spec.output,
      // Not async when it answers a Write: returned from an async function, the Write would be sent alone.
      handler: (input, ctx) => {
        const body = bodyOf<z.output<z.ZodObject<C>>>(input, ['id']);
        if (writes) return writes.insert(ctx.db, ctx.orgId, idOf(input), now(spec.create.toInsert(body, { id: idOf(input) } as PT['$inferSelect'], ctx)));
        return (async () => {
          const parent = await spec.parentRows.get(ctx.db, ctx.orgId, idOf(input));
          return present(await rows.insert(ctx.db, await spec.create.toInsert(body, parent, ctx)));
        })();
      },
    }),
    defineOperation({
      id: `${spec.area}.get_${spec.action}`,
      method: 'GET',
      path: item,
      summary: `Get a ${spec.parent}'s ${spec.singular}`,
      input: z.strictObject(ids),
      output: spec.output,
      handler: async (input, ctx) => present(await rows.get(ctx.db, ctx.orgId, childOf(input), ofParent(idOf(input)))),
    }),
    defineOperation({
      id: `${spec.area}.update_${spec.action}`,
      method: spec.update.method,
      event: `${spec.parent}.${spec.action}.updated`,
      path: item,
      summary: `Update a ${spec.parent}'s ${spec.singular}`,
      description: spec.update.description,
      input: z.strictObject({ ...ids, ...spec.update.fields }),
      output: spec.output,
      handler: (input, ctx) => {
        const target = { parentId: idOf(input), childId: childOf(input) };
        const body = bodyOf<z.output<z.ZodObject<U>>>(input, ['id', spec.param]);
        if (writes) return writes.update(ctx.db, ctx.orgId, target.parentId, target.childId, now(spec.update.toPatch(body, ctx, target)));
        return (async () => {
          const patch = await spec.update.toPatch(body, ctx, target);
          return present(await rows.update(ctx.db, ctx.orgId, target.childId, patch, ofParent(target.parentId)));
        })();
      },
    }),
    defineOperation({
      id: `${spec.area}.delete_${spec.action}`,
      method: 'DELETE',
      event: `${spec.parent}.${spec.action}.deleted`,
      path: item,
      summary: `Delete a ${spec.parent}'s ${spec.singular}`,
      description: spec.deleteDescription ?? 'Soft delete: the record gets `deletedAt` and disappears from lists and gets.',
      input: z.strictObject(ids),
      output: spec.output,
      handler: (input, ctx) =>
        writes ? writes.softDelete(ctx.db, ctx.orgId, idOf(input), childOf(input)) : rows.softDelete(ctx.db, ctx.orgId, childOf(input), ofParent(idOf(input))).then(present),
    }),
  ];
}
