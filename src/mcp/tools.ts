import { IDEMPOTENCY_ARGUMENT_SCHEMA } from '../idempotency.js';
import type { z } from 'zod';
import type { Category } from '../core/categories.js';
import { toJsonSchema, type JsonSchema } from '../core/json-schema.js';
import { envelopeSchema, operationCategory, toolName, type HttpMethod, type Operation } from '../core/operation.js';

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

/** The JSON Schema of a tool's input or output: always an object. */
function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): JsonSchema & { type: 'object' } {
  return { ...toJsonSchema(schema, io), type: 'object' };
}

/** Bounds that no one would come near (safe integers, PostgreSQL's int4, very long texts): noise to a model. */
const SAFE_INTEGER_BOUNDS = new Set([Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER, 2147483647]);
const NOTEWORTHY_LENGTH = 1000;

/**
 * An input schema without what only adds bulk to the tool list a client (and its model) reads on every
 * turn: regular expressions (a `format` or the field's description says what is expected), the
 * safe-integer bounds of every integer and `additionalProperties: false`. Inputs are still checked in
 * full by the operation's Zod schema, which answers a precise validation error.
 */
function slimInput(node: unknown, described = false): unknown {
  if (Array.isArray(node)) return node.map((n) => slimInput(n, described));
  if (!node || typeof node !== 'object') return node;
  const out: Record<string, unknown> = {};
  const hasDescription = typeof (node as JsonSchema).description === 'string';
  for (const [key, value] of Object.entries(node)) {
    if (key === 'pattern' || (key === 'additionalProperties' && value === false)) continue;
    if ((key === 'minimum' || key === 'maximum') && SAFE_INTEGER_BOUNDS.has(value as number)) continue;
    if (key === 'maxLength' && (value as number) >= NOTEWORTHY_LENGTH) continue;
    // A variant of a described field (`anyOf: [uuid, null]`) needs no description of its own.
    if (key === 'description' && described) continue;
    if (key === 'properties' && value && typeof value === 'object') {
      // `properties` maps field names to schemas: its keys are names, never keywords.
      out[key] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, slimInput(v)]));
    } else {
      out[key] = slimInput(value, key === 'anyOf' || key === 'oneOf' ? hasDescription || described : false);
    }
  }
  return out;
}

/** The JSON type(s) a schema node allows, e.g. `"string"` or `["string", "null"]`; undefined when any. */
function typesOf(node: JsonSchema): string | string[] | undefined {
  const variants = (node.anyOf ?? node.oneOf) as JsonSchema[] | undefined;
  const ofVariants = variants?.map(typesOf);
  // A variant that allows anything makes the whole field allow anything.
  if (ofVariants?.includes(undefined)) return undefined;
  const types = ofVariants ? ofVariants.flatMap((t) => [t!].flat()) : node.type === undefined ? (node.const === null ? ['null'] : []) : [node.type as string | string[]].flat();
  const unique = [...new Set(types.map((t) => (t === 'integer' && types.includes('number') ? 'number' : t)))];
  return unique.length === 0 ? undefined : unique.length === 1 ? unique[0] : unique;
}

/** A field of a record in an output schema: its type, and its values when they are a closed set. */
function fieldSchema(node: JsonSchema): JsonSchema {
  const type = typesOf(node);
  const values = (node.enum ?? ((node.anyOf as JsonSchema[] | undefined) ?? []).find((v) => v.enum)?.enum) as unknown[] | undefined;
  return { ...(type === undefined ? {} : { type }), ...(values ? { enum: values } : {}) };
}

/** A record as an output schema: each field with its type only. Nested records are plain objects and arrays. */
function recordSchema(node: JsonSchema): JsonSchema {
  const properties = node.properties as Record<string, JsonSchema> | undefined;
  if (!properties) return fieldSchema(node);
  return { type: 'object', properties: Object.fromEntries(Object.entries(properties).map(([k, v]) => [k, fieldSchema(v)])) };
}

/**
 * The output schema of a tool, compact: `{ data, meta? }` with the record's fields and their JSON types
 * (nullable fields allow null). Field prose, formats and nested shapes live in the OpenAPI document; a
 * model learns them from the first result, and the tool list stays small enough for every turn.
 */
function outputSchema(op: Operation): JsonSchema & { type: 'object' } {
  const envelope = jsonSchema(envelopeSchema(op), 'output');
  const props = envelope.properties as Record<string, JsonSchema>;
  const data = props.data!;
  return {
    type: 'object',
    properties: {
      data: data.type === 'array' ? { type: 'array', items: recordSchema(data.items as JsonSchema) } : recordSchema(data),
      ...(props.meta ? { meta: { type: 'object', properties: { pagination: { type: 'object' } } } } : {}),
    },
    required: ['data'],
  };
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
    inputSchema: slimInput(op.method === 'POST' ? withIdempotencyArgument(jsonSchema(op.input, 'input')) : jsonSchema(op.input, 'input')) as ToolDefinition['inputSchema'],
    outputSchema: outputSchema(op),
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
