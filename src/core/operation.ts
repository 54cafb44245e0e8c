import { eq, and, gte, sql } from 'drizzle-orm';
import { z } from 'zod';
import type { Db, DbOrTx } from '../db/client.js';
import { organizations } from '../db/schema.js';
import type { Category } from './categories.js';
import { OPERATION_COSTS } from './costs.js';
import { AppError, validationError, type ErrorCode } from './errors.js';
import { paginationMeta, PaginationMetaSchema, type Page, type PageInput } from './pagination.js';
import { requiredPermission, type Permission } from './permissions.js';
import { unsafeInputIssues } from './schemas.js';

/** What a handler may return for a schema: the same shape, with a Date wherever a string (timestamp) is expected. */
export type Wire<T> = T extends string ? string | Date : T extends (infer U)[] ? Wire<U>[] : T extends object ? { [K in keyof T]: Wire<T[K]> } : T;

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** Who is calling, in which organization. Built by the REST adapter (API key) or the MCP adapter (OAuth grant). */
export interface OperationContext {
  orgId: string;
  /** The API key's or the signed-in user's id; recorded as `createdBy`. */
  actorId: string;
  /** The database, or the transaction the operation runs in. */
  db: DbOrTx;
}

interface OperationBase<I extends z.ZodObject> {
  /** `<category>.<action>`, e.g. `contacts.create`; the MCP tool name is the same with `_` for `.`. */
  id: `${Category}.${string}`;
  method: HttpMethod;
  /** Relative to `{base_url}`, with `{param}` placeholders that name fields of `input`. */
  path: string;
  summary: string;
  description?: string;
  /** One flat object: path parameters, query and body fields together. */
  input: I;
  /** Error codes this operation can answer besides the ones every operation can. */
  errors?: ErrorCode[];
}

export interface ItemOperation<I extends z.ZodObject = z.ZodObject, O extends z.ZodType = z.ZodType> extends OperationBase<I> {
  kind: 'item';
  /** The schema of `data`. */
  output: O;
  handler: (input: z.output<I>, ctx: OperationContext) => Promise<Wire<z.input<O>>>;
}

export interface ListOperation<I extends z.ZodObject = z.ZodObject, O extends z.ZodType = z.ZodType> extends OperationBase<I> {
  kind: 'list';
  /** The schema of one element of `data`. */
  output: O;
  handler: (input: z.output<I> & PageInput, ctx: OperationContext) => Promise<Page<Wire<z.input<O>>>>;
}

export type Operation = ItemOperation<z.ZodObject, z.ZodType> | ListOperation<z.ZodObject, z.ZodType>;

export function defineOperation<I extends z.ZodObject, O extends z.ZodType>(op: Omit<ItemOperation<I, O>, 'kind'> & { kind?: 'item' }): Operation;
export function defineOperation<I extends z.ZodObject, O extends z.ZodType>(op: Omit<ListOperation<I, O>, 'kind'> & { kind: 'list' }): Operation;
export function defineOperation(op: Omit<Operation, 'kind'> & { kind?: 'item' | 'list' }): Operation {
  return { ...op, kind: op.kind ?? 'item' } as Operation;
}

export const operationCategory = (op: Pick<Operation, 'id'>) => op.id.slice(0, op.id.indexOf('.')) as Category;
export const operationPermission = (op: Operation): Permission => requiredPermission(operationCategory(op), op.method);
export const toolName = (op: Pick<Operation, 'id'>) => op.id.replace('.', '_');
export const successStatus = (op: Pick<Operation, 'method'>) => (op.method === 'POST' ? 201 : 200);
export const pathParams = (op: Pick<Operation, 'path'>) => [...op.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);

/** The response body of every operation, REST and MCP alike. */
export interface Envelope {
  data: unknown;
  meta?: { pagination: ReturnType<typeof paginationMeta> };
}

/** The schema of the envelope an operation answers with (OpenAPI response, MCP output schema). */
export function envelopeSchema(op: Operation): z.ZodObject {
  return op.kind === 'list'
    ? z.object({ data: z.array(op.output), meta: z.object({ pagination: PaginationMetaSchema }) })
    : z.object({ data: op.output });
}

/** Validates raw input with the operation's schema; the one place where input is checked. */
export function parseInput(op: Operation, raw: unknown): Record<string, unknown> {
  const unsafe = unsafeInputIssues(raw);
  if (unsafe) throw new AppError('VALIDATION_ERROR', 'The request is invalid', unsafe);
  const parsed = op.input.safeParse(raw ?? {});
  if (!parsed.success) throw validationError(parsed.error);
  return parsed.data as Record<string, unknown>;
}

/** Runs an operation for a caller whose permission is already checked; returns the envelope. */
export async function runOperation(op: Operation, raw: unknown, ctx: { orgId: string; actorId: string; db: Db }): Promise<Envelope> {
  const input = parseInput(op, raw);
  const cost = OPERATION_COSTS[op.id] ?? 0;
  const exec = (db: DbOrTx) => {
    const c: OperationContext = { ...ctx, db };
    return op.kind === 'list'
      ? op.handler(input as never, c).then((page) => ({ data: page.items, meta: { pagination: paginationMeta(input as PageInput, page) } }))
      : op.handler(input as never, c).then((data) => ({ data }));
  };
  if (cost === 0) return exec(ctx.db);
  return ctx.db.transaction(async (tx) => {
    await debitCredits(tx, ctx.orgId, cost);
    return exec(tx);
  });
}

async function debitCredits(tx: DbOrTx, orgId: string, cost: number) {
  const rows = await tx
    .update(organizations)
    .set({ credits: sql`${organizations.credits} - ${cost}` })
    .where(and(eq(organizations.id, orgId), gte(organizations.credits, cost)))
    .returning({ credits: organizations.credits });
  if (rows.length === 0) throw new AppError('INSUFFICIENT_CREDITS', `This operation costs ${cost} credit(s) and the organization's balance is too low`);
}
