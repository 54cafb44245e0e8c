import { createHash } from 'node:crypto';
import { fillPlaceholders, getTableName, sql, type Query, type SQL } from 'drizzle-orm';
import type { PgDialect, PgSession, PgTable } from 'drizzle-orm/pg-core';
import { notFound } from '../core/errors.js';
import type { DbOrTx } from './client.js';
import { poolOf } from './text-read.js';

/**
 * A write that has not been sent yet: one data-modifying statement (`INSERT`, `UPDATE` or `DELETE` …
 * `RETURNING` the row), the further statements of the same write that depend on it (a cascade), and the
 * answer as a JSON expression over the written row. A repository returns it instead of running it; who
 * receives it decides how it is sent:
 *
 * - awaited (it is a `PromiseLike`), it runs as one statement on the handle it was made with;
 * - returned by an operation's handler, the operation runner sends it composed with the write's events,
 *   their webhook deliveries and the credit debit, still as one statement (`src/run-operation.ts`).
 *
 * Both send the same SQL text for the write part, as a named prepared statement (planned once per connection).
 */
export interface WriteSpec {
  /** The data-modifying statement, `RETURNING` the columns `answer` reads; read by the rest as `written`. */
  statement: SQL;
  /** The table whose name `answer`'s column references carry: `written` is read under that name. */
  table: PgTable;
  /** Further data-modifying statements of the same write (e.g. a cascade of soft deletes); they may read `written`. */
  also?: SQL[];
  /** The answer, a JSON expression over the written row (`jsonRow(table)`). */
  answer: SQL;
  /** The resource's label for the 404 when no row was written. */
  label: string;
  /** Conditions the written row must meet, checked in the same statement (a reference to another record). */
  checks?: WriteCheck[];
}

/**
 * A condition a write must meet, evaluated in its statement once the row is written (`answer` is in scope):
 * when it does not hold, the statement refuses to stand (`refusal`), nothing is written, and the write
 * answers `error`. Not evaluated when nothing was written (the 404 comes first), unless `always`.
 */
export interface WriteCheck {
  holds: SQL;
  /** The refusal's marker, unique to the check. */
  marker: string;
  error: () => Error;
  /** Evaluated whether or not a row was written (`answer.data` is null when none was): a refusal then comes before the 404. */
  always?: boolean;
}

export class Write<T> implements Promise<T> {
  /**
   * `spec` is the same object for every write of one shape (built with placeholders, see `placeholders`),
   * `values` fills its placeholders: the statement's text is rendered once per shape, not per write.
   */
  constructor(
    readonly db: DbOrTx,
    readonly spec: WriteSpec,
    readonly values: Record<string, unknown> = {},
  ) {}

  readonly [Symbol.toStringTag] = 'Write';
  private sent: Promise<T> | undefined;

  /** Runs the write on its handle, as one statement; once, however often it is awaited. */
  private send(): Promise<T> {
    return (this.sent ??= runWrite<T>(this.db, this));
  }

  then<A = T, B = never>(onFulfilled?: ((value: T) => A | PromiseLike<A>) | null, onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null): Promise<A | B> {
    return this.send().then(onFulfilled, onRejected);
  }

  catch<B = never>(onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null): Promise<T | B> {
    return this.send().catch(onRejected);
  }

  finally(onFinally?: (() => void) | null): Promise<T> {
    return this.send().finally(onFinally);
  }
}

export const isWrite = (value: unknown): value is Write<unknown> => value instanceof Write;

/** A `Write` carried past the promise of an async handler (`unsent`). */
class Unsent {
  constructor(readonly write: Write<unknown>) {}
}

/**
 * A `Write` that an async handler answers after statements of its own (a lock it must hold first): returned
 * as is, the promise of the async function would send it on its own; wrapped, it reaches the operation
 * runner unsent, which composes it with the events in the handler's transaction. For operation handlers
 * only: the runner is what unwraps it (`sentLater`).
 */
export const unsent = <T>(write: Write<T>): T => new Unsent(write) as T;

/** The `Write` an `unsent` wrapper carries, or the value itself. */
export const sentLater = (value: unknown): unknown => (value instanceof Unsent ? value.write : value);

/**
 * A write's field values as placeholders, for a statement built once per shape: a field absent stays
 * absent (the column's default, or unchanged), a null is part of the shape (Drizzle's encoders do not take
 * null), any other value is the placeholder of its name. `shape` names the statement; `values` fills it.
 */
export function placeholders<T extends Record<string, unknown>>(values: T): { shape: string; fields: T; values: Record<string, unknown> } {
  const fields: Record<string, unknown> = {};
  const filled: Record<string, unknown> = {};
  const shape: string[] = [];
  for (const [key, value] of Object.entries(values)) {
    if (value === undefined) continue;
    if (value === null) {
      fields[key] = null;
      shape.push(`${key}=null`);
    } else {
      fields[key] = sql.placeholder(key);
      filled[key] = value;
      shape.push(key);
    }
  }
  return { shape: shape.join(','), fields: fields as T, values: filled };
}

/**
 * The specs of one repository write, one per shape of its fields (`placeholders`), built on first use
 * (with the handle at hand: the SQL does not depend on it) and kept in a bounded map: the shapes in use
 * are few, the possible ones many. Answers the spec and the values that fill it.
 */
export function writeShapes<T extends Record<string, unknown>>(build: (fields: T, db: DbOrTx) => WriteSpec, max = 256) {
  const specs = new Map<string, WriteSpec>();
  return (db: DbOrTx, values: T): { spec: WriteSpec; values: Record<string, unknown> } => {
    const { shape, fields, values: filled } = placeholders(values);
    let spec = specs.get(shape);
    if (!spec) {
      if (specs.size >= max) specs.delete(specs.keys().next().value!);
      specs.set(shape, (spec = build(fields, db)));
    }
    return { spec, values: filled };
  };
}

/** A placeholder where Drizzle's types expect a value (placeholders are filled when the statement runs). */
export const placeholder = <T = string>(name: string) => sql.placeholder(name) as unknown as T;

/**
 * The write as one statement: `WITH written AS (<statement>), also_n AS (…), answer AS (SELECT <answer>
 * AS data, id FROM written) <more CTEs> SELECT answer.data <more columns> FROM (SELECT 1) LEFT JOIN answer`.
 * The outer join answers one row even when nothing was written, so the extra columns (checks that must
 * hold, counts) are always evaluated. `more` and `columns` may read `answer` (one row per written row; its
 * `id` is the written row's, so that reading it needs no parse of the JSON).
 */
export function composeWrite(spec: WriteSpec, more: SQL[] = [], columns: SQL[] = []): SQL {
  const table = sql.identifier(getTableName(spec.table));
  const ctes = [
    sql`written AS (${spec.statement})`,
    ...(spec.also ?? []).map((statement, i) => sql`${sql.raw(`also_${i}`)} AS (${statement})`),
    sql`answer AS (SELECT ${spec.answer} AS data, ${table}.id FROM written AS ${table})`,
    ...more,
  ];
  const checks = (spec.checks ?? []).map(
    // The refusal's text reads the row, so that PostgreSQL cannot fold it into a constant (and refuse when planning).
    (check, i) =>
      check.always
        ? sql`CASE WHEN (${check.holds}) THEN true ELSE ${refusal(check.marker, sql`coalesce(answer.id::text, '')`)} END AS ${sql.raw(`check_${i}`)}`
        : sql`CASE WHEN answer.data IS NULL OR (${check.holds}) THEN true ELSE ${refusal(check.marker, sql`answer.id::text`)} END AS ${sql.raw(`check_${i}`)}`,
  );
  return sql`WITH ${sql.join(ctes, sql`, `)} SELECT answer.data${sql.join(
    [...columns, ...checks].map((c) => sql`, ${c}`),
    sql``,
  )} FROM (SELECT 1) AS one LEFT JOIN answer ON true`;
}

/** The handle's session and dialect: Drizzle's public statement builders cannot name an arbitrary SQL statement. */
interface Internals {
  session: PgSession;
  dialect: PgDialect;
}

interface Rendered {
  query: Query;
  name: string;
}
const rendered = new WeakMap<WriteSpec, Map<string, Rendered>>();

/**
 * A composition of `spec` (`variant` names it: the same variant must compose the same SQL), rendered once:
 * its text and its parameters, placeholders included. The name is derived from the text, so the same
 * shape of write is a named prepared statement, planned once per connection (node-postgres keeps a
 * name's parse per connection). The embedded database runs the same text (it keeps no statement names).
 */
export function renderWrite(db: DbOrTx, spec: WriteSpec, variant: string, compose: () => SQL): Rendered {
  let variants = rendered.get(spec);
  if (!variants) rendered.set(spec, (variants = new Map()));
  let found = variants.get(variant);
  if (!found) {
    const query = (db as unknown as Internals).dialect.sqlToQuery(compose());
    found = { query, name: `w_${createHash('sha1').update(query.sql).digest('hex').slice(0, 20)}` };
    variants.set(variant, found);
  }
  return found;
}

/** Runs a rendered write with its placeholders' values; answers the rows. */
export async function executeRendered(db: DbOrTx, { query, name }: Rendered, values: Record<string, unknown>): Promise<Record<string, unknown>[]> {
  // On PostgreSQL outside a transaction, straight to the pool (its columns are JSON, counts and checks:
  // the driver reads them as Drizzle's session would).
  const pool = poolOf(db);
  if (pool) return (await pool.query<Record<string, unknown>>({ name, text: query.sql, values: fillPlaceholders(query.params, values) })).rows;
  const { session } = db as unknown as Internals;
  const result = (await session.prepareQuery(query, undefined, name, false).execute(values)) as { rows: Record<string, unknown>[] };
  return result.rows;
}

/** Runs a rendered composition of `spec`; a check of the spec that refused becomes the check's error. */
export async function executeWrite(db: DbOrTx, spec: WriteSpec, rendered: Rendered, values: Record<string, unknown>): Promise<Record<string, unknown>[]> {
  try {
    return await executeRendered(db, rendered, values);
  } catch (err) {
    const refused = spec.checks?.find((check) => failsWith(err, check.marker));
    throw refused ? refused.error() : err;
  }
}

export async function runWrite<T>(db: DbOrTx, write: Write<unknown>): Promise<T> {
  const [row] = await executeWrite(db, write.spec, renderWrite(db, write.spec, 'alone', () => composeWrite(write.spec)), write.values);
  if (row?.data == null) throw notFound(write.spec.label);
  return row.data as T;
}

/** The text cast that fails with a recognizable message: how one statement refuses to stand (see `failsWith`). */
export const refusal = (marker: string, rowText: SQL) => sql`(${`${marker} `} || ${rowText})::boolean`;

/** Whether a database error is the refusal of `marker` (`refusal`). */
export function failsWith(err: unknown, marker: string): boolean {
  for (let e: unknown = err; e; e = (e as { cause?: unknown }).cause) {
    if (typeof (e as { message?: unknown }).message === 'string' && (e as { message: string }).message.includes(marker)) {
      // Only the database's own message counts, not the text of a statement quoted in a wrapper's message.
      if ((e as { code?: unknown }).code === '22P02') return true;
    }
  }
  return false;
}
