import { z } from 'zod';
import type { Category } from './categories.js';
import { AppError, validationError, type ErrorCode } from './errors.js';
import { PaginationMetaSchema, type Page, type PageInput, type paginationMeta } from './pagination.js';
import { requiredPermission, type Permission } from './permissions.js';
import { unsafeInputIssues } from './schemas.js';
import type { JsonText } from './json-text.js';

/** What a handler may return for a schema: the same shape, with a Date wherever a string (timestamp) is expected. */
export type Wire<T> = T extends string ? string | Date : T extends (infer U)[] ? Wire<U>[] : T extends object ? { [K in keyof T]: Wire<T[K]> } : T;

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export type ActorType = 'api_key' | 'user' | 'automation' | 'system';

/** Who causes a write: a person's API key or OAuth user, an automation run, or the service itself. */
export interface Actor {
  type: ActorType;
  id: string | null;
  /** 0 for a person or key; the run's depth for an automation (the loop guard stops chains at 3). */
  depth: number;
  /** The OAuth grant a person called through (MCP); automations they set up record it and stop when it is revoked. */
  grantId?: string | undefined;
  /**
   * The person acts on the service's own signed-in pages (the approval page), not through a token: only
   * they, API keys and the service itself make an automation active (CONTRACT §8, "Approval by a person").
   */
  signedIn?: boolean;
}

/**
 * The types `core/` needs from the layers above it, filled in where they are defined (declaration merging,
 * as Fastify's own types are extended), so that `core/` imports nothing from them: `src/db/client.ts` adds
 * `db`, the handle repositories take (the database or a transaction).
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface CoreTypes {}
type DbHandle = CoreTypes extends { db: infer D } ? D : never;

/** Who is calling, in which organization. Built by the REST adapter (API key), the MCP adapter (OAuth grant) or the automation engine. */
export interface OperationContext {
  orgId: string;
  /** The API key's, the signed-in user's or the automation's id; recorded as `createdBy`. */
  actorId: string;
  actor: Actor;
  /** What the caller may do (`*`, `<area>:read|write`); checked by the adapters, available to rules that depend on it. */
  permissions: readonly string[];
  /** The database, or the transaction the operation runs in. */
  db: DbHandle;
  /** `PUBLIC_URL`, when the adapter knows it: links in answers (an automation's `approvalUrl`) are absolute then. */
  publicUrl?: string | undefined;
  /**
   * Told of each message a sending operation queues besides the one it answers (a text to several numbers
   * is one message per number), when the caller counts them: the automation engine, for the rules of
   * automatic messages.
   */
  alsoQueued?: ((message: unknown) => void) | undefined;
}

/** The event type(s) a successful write records, from the record it answers with. */
export type EventSpec = string | ((data: Record<string, unknown>) => string[]);

interface OperationBase<I extends z.ZodObject> {
  /** `<category>.<action>`, e.g. `contacts.create`; on MCP the action is a `method` of one of the category's tools (`src/mcp/tools.ts`). */
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
  /** Credits the operation costs, debited in the same transaction as its write (402 and nothing written when too few). */
  cost?: number;
  /** The event type recorded (in the write's transaction) when the operation succeeds; writes only. */
  event?: EventSpec;
  /** The record the event carries when it is not the answer as it stands (e.g. the answer less a secret shown only once). */
  eventData?: (data: Record<string, unknown>) => unknown;
  /** The success status when it is not the method's default (201 for POST, 200 otherwise): e.g. 200 for an action POST that creates nothing. */
  status?: 200 | 201;
  /**
   * What the operation does beyond its method's default, for clients deciding whether to ask the user
   * (MCP tool annotations): `destructive` when it archives for good or replaces a secret (a DELETE always
   * is), which also puts it in its category's `_delete` tool; `openWorld` when it reaches outside the
   * service (sends an email, calls a URL); `sends` when it sends email or text messages for the caller, which
   * then needs the sending consent (`messages:send`, checked by `runOperation`). Unset: derived from the method.
   */
  effects?: { destructive?: boolean; openWorld?: boolean; sends?: boolean };
  /**
   * The MCP tool of its category that reaches it, when not the one its method implies: a category kept to a
   * read and a write tool puts its delete in `_write` (whose hints then say destructive).
   */
  tool?: 'write';
}

export interface ItemOperation<I extends z.ZodObject = z.ZodObject, O extends z.ZodType = z.ZodType> extends OperationBase<I> {
  kind: 'item';
  /** The schema of `data`. */
  output: O;
  /** May answer the record as the database's JSON text (`JsonText`), built by `jsonRow` to the output schema. */
  handler: (input: z.output<I>, ctx: OperationContext) => Promise<Wire<z.input<O>> | JsonText>;
}

export interface ListOperation<I extends z.ZodObject = z.ZodObject, O extends z.ZodType = z.ZodType> extends OperationBase<I> {
  kind: 'list';
  /** The schema of one element of `data`. */
  output: O;
  handler: (input: z.output<I> & PageInput, ctx: OperationContext) => Promise<Page<Wire<z.input<O>> | JsonText>>;
}

export type Operation = ItemOperation<z.ZodObject, z.ZodType> | ListOperation<z.ZodObject, z.ZodType>;

export function defineOperation<I extends z.ZodObject, O extends z.ZodType>(op: Omit<ItemOperation<I, O>, 'kind'> & { kind?: 'item' }): Operation;
export function defineOperation<I extends z.ZodObject, O extends z.ZodType>(op: Omit<ListOperation<I, O>, 'kind'> & { kind: 'list' }): Operation;
export function defineOperation(op: Omit<Operation, 'kind'> & { kind?: 'item' | 'list' }): Operation {
  if (op.effects?.sends) SENDING.add(op.id);
  return { ...op, kind: op.kind ?? 'item' } as Operation;
}

/** The ids of the operations that send (`effects.sends`), as they are defined: plans name operations by id. */
const SENDING = new Set<string>();

/** Whether the operation with this id sends email or text messages (then it needs `messages:send`). */
export const sendsMessages = (id: string) => SENDING.has(id);

export const operationCategory = (op: Pick<Operation, 'id'>) => op.id.slice(0, op.id.indexOf('.')) as Category;
export const operationPermission = (op: Operation): Permission => requiredPermission(operationCategory(op), op.method);
export const successStatus = (op: Pick<Operation, 'method' | 'status'>) => op.status ?? (op.method === 'POST' ? 201 : 200);
export const pathParams = (op: Pick<Operation, 'path'>) => [...op.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);

/** Where the input beside the path parameters travels: the query string (GET, DELETE) or the JSON body (POST, PUT, PATCH). */
export const inputLocation = (op: Pick<Operation, 'method'>): 'query' | 'body' => (op.method === 'GET' || op.method === 'DELETE' ? 'query' : 'body');

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

/** Whether an operation only reads (a GET): bound by the read timeout, offered to read-only grants. */
export const readsOnly = (op: Pick<Operation, 'method'>) => op.method === 'GET';

/** The event types an operation records for the record it answered with. */
export function eventTypesOf(op: Operation, data: unknown): string[] {
  if (!op.event || !data || typeof data !== 'object') return [];
  return typeof op.event === 'string' ? [op.event] : op.event(data as Record<string, unknown>);
}
