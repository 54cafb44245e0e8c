import { IDEMPOTENCY_ARGUMENT_SCHEMA } from '../idempotency.js';
import { z } from 'zod';
import type { Category } from '../core/categories.js';
import { envelopeSchema, operationCategory, toolName, type HttpMethod, type Operation } from '../core/operation.js';

type JsonSchema = Record<string, unknown>;

/** MCP tool annotations: hints for clients, derived from the operation's HTTP method. */
export interface ToolAnnotations {
  title: string;
  readOnlyHint: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint: boolean;
}

/** The wire definition of a tool, as `tools/list` returns it. */
export interface ToolDefinition {
  name: string;
  title: string;
  description: string;
  inputSchema: JsonSchema & { type: 'object' };
  outputSchema: JsonSchema & { type: 'object' };
  annotations: ToolAnnotations;
}

export interface ToolEntry {
  op: Operation;
  category: Category;
  definition: ToolDefinition;
}

/** Every tool, by name, in the order of the operation table. Built once at start-up. */
export type ToolCatalog = ReadonlyMap<string, ToolEntry>;

/**
 * JSON Schema of a Zod schema, without `$schema`: the MCP revisions this server speaks default to
 * draft 2020-12, and some clients validate with a draft-07 engine that refuses an unknown `$schema`.
 */
function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): JsonSchema & { type: 'object' } {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as JsonSchema;
  return { ...(slim(rest) as JsonSchema), type: 'object' };
}

const SAFE_INTEGER_BOUNDS = new Set([Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER]);

/**
 * Drops what only adds bulk to the tool list a client (and its model) reads: the long regular
 * expressions Zod emits beside a `format` (uuid, date-time, email…) and the safe-integer bounds of
 * every integer. Inputs are still checked by the Zod schemas themselves.
 */
function slim(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(slim);
  if (!node || typeof node !== 'object') return node;
  const out: Record<string, unknown> = {};
  const hasFormat = typeof (node as { format?: unknown }).format === 'string';
  for (const [key, value] of Object.entries(node)) {
    if (key === 'pattern' && hasFormat) continue;
    if ((key === 'minimum' || key === 'maximum') && SAFE_INTEGER_BOUNDS.has(value as number)) continue;
    // `properties` maps field names to schemas: its keys are names, never keywords.
    out[key] = key === 'properties' && value && typeof value === 'object' ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, slim(v)])) : slim(value);
  }
  return out;
}

/**
 * GET reads only. DELETE removes (a soft delete, still gone for the client); PATCH and PUT overwrite
 * fields (and can clear them, or replace `data` whole): all three are destructive, and repeating them with
 * the same arguments changes nothing more (idempotent). POST adds without overwriting, and twice adds
 * twice. Every tool acts on this service's own data only.
 */
export function toolAnnotations(method: HttpMethod, title: string): ToolAnnotations {
  if (method === 'GET') return { title, readOnlyHint: true, openWorldHint: false };
  return {
    title,
    readOnlyHint: false,
    destructiveHint: method !== 'POST',
    idempotentHint: method !== 'POST',
    openWorldHint: false,
  };
}

const withIdempotencyArgument = (schema: JsonSchema & { type: 'object' }) => ({
  ...schema,
  properties: { ...((schema.properties as Record<string, unknown> | undefined) ?? {}), idempotencyKey: IDEMPOTENCY_ARGUMENT_SCHEMA },
});

export function toolDefinition(op: Operation): ToolDefinition {
  const description = op.description ? `${op.summary}.\n\n${op.description}` : `${op.summary}.`;
  return {
    name: toolName(op),
    title: op.summary,
    description,
    inputSchema: op.method === 'POST' ? withIdempotencyArgument(jsonSchema(op.input, 'input')) : jsonSchema(op.input, 'input'),
    outputSchema: jsonSchema(envelopeSchema(op), 'output'),
    annotations: toolAnnotations(op.method, op.summary),
  };
}

/** One tool per operation of the table; the JSON Schemas are computed here, never per request. */
export function buildToolCatalog(operations: readonly Operation[]): ToolCatalog {
  const catalog = new Map<string, ToolEntry>();
  for (const op of operations) {
    const definition = toolDefinition(op);
    if (catalog.has(definition.name)) throw new Error(`Two operations map to the tool name ${definition.name}`);
    catalog.set(definition.name, { op, category: operationCategory(op), definition });
  }
  return catalog;
}
