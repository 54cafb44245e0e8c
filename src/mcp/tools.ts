import { IDEMPOTENCY_ARGUMENT_SCHEMA } from '../idempotency.js';
import type { z } from 'zod';
import { CATEGORIES, type Category } from '../core/categories.js';
import { toJsonSchema, type JsonSchema } from '../core/json-schema.js';
import { envelopeSchema, operationCategory, operationPermission, type Operation } from '../core/operation.js';
import type { Permission } from '../core/permissions.js';

/** MCP tool annotations: hints for clients, derived from what the tool's methods do. */
export interface ToolAnnotations {
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
  /** Read tools only: the shape of their answers. A writing tool answers the record its category's read tool describes. */
  outputSchema?: JsonSchema & { type: 'object' };
  annotations: ToolAnnotations;
}

/**
 * The tools of a category, by what their methods do: `read` (GET), `delete` (DELETE, or an operation
 * whose `effects` say it destroys: archives for good, replaces a secret) and `write` (every other change).
 * Reading and destroying stay apart from the rest so that each tool's annotations are true of all its methods.
 */
export type ToolKind = 'read' | 'write' | 'delete';
export const TOOL_KINDS: readonly ToolKind[] = ['read', 'write', 'delete'];

export interface ToolEntry {
  name: string;
  category: Category;
  kind: ToolKind;
  /** The tool's methods: the operation's id without its category (`list`, `create_email`), to the operation. */
  methods: ReadonlyMap<string, Operation>;
  /** The permissions its methods need (one: reading, or writing, in its category); a grant is offered the tool when it holds them all. */
  permissions: readonly Permission[];
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
const NOTEWORTHY_LENGTH = 255;

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
    if (key === 'pattern' || (key === 'additionalProperties' && (value === false || isEmptySchema(value)))) continue;
    if (key === 'propertyNames' && JSON.stringify(value) === '{"type":"string"}') continue;
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
  return nullableShorthand(out);
}

const isEmptySchema = (value: unknown) => !!value && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length === 0;

/** `anyOf: [{ type: "string", … }, { type: "null" }]` as `{ type: ["string", "null"], … }`: the same rule in a third of the text. */
function nullableShorthand(node: Record<string, unknown>): Record<string, unknown> {
  const variants = node.anyOf as JsonSchema[] | undefined;
  if (!Array.isArray(variants) || variants.length !== 2) return node;
  const nullIndex = variants.findIndex((v) => v.type === 'null' && Object.keys(v).length === 1);
  const other = variants[1 - nullIndex];
  if (nullIndex < 0 || !other || typeof other.type !== 'string' || other.type === 'object' || other.type === 'array' || other.enum) return node;
  const { anyOf: _variants, ...rest } = node;
  return { ...rest, ...other, type: [other.type, 'null'] };
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

/** The fields of a record schema, each with its JSON type(s) only; undefined when the node is no record. */
function recordFields(node: JsonSchema): Record<string, JsonSchema> | undefined {
  const properties = node.properties as Record<string, JsonSchema> | undefined;
  return properties && Object.fromEntries(Object.entries(properties).map(([k, v]) => [k, fieldSchema(v)]));
}

/** Two typings of one field name (from two records) as one: any of their types; the values only when both list the same. */
function mergeField(a: JsonSchema, b: JsonSchema): JsonSchema {
  if (JSON.stringify(a) === JSON.stringify(b)) return a;
  if (a.type === undefined || b.type === undefined) return {};
  const types = [...new Set([a.type as string | string[], b.type as string | string[]].flat())];
  return { type: types.length === 1 ? types[0]! : types };
}

/**
 * The output schema of a tool, compact: `{ data, meta? }` where `data` is a record (or, for list methods,
 * an array of records) whose fields are those of the records the tool's methods answer, each with its JSON
 * type (nullable fields allow null). A field two records share with other types allows either. Field
 * prose, formats and nested shapes live in the OpenAPI document; a model learns them from the first
 * result, and the tool list stays small enough for every turn.
 */
function outputSchema(ops: readonly Operation[]): JsonSchema & { type: 'object' } {
  const fields: Record<string, JsonSchema> = {};
  let records = { items: false, lists: false };
  // Answers that are no record (a count): their types, as they are.
  const others = new Map<string, JsonSchema>();
  for (const op of ops) {
    const data = (jsonSchema(envelopeSchema(op), 'output').properties as Record<string, JsonSchema>).data!;
    const node = op.kind === 'list' ? (data.items as JsonSchema) : data;
    const record = recordFields(node);
    if (!record) {
      const other = op.kind === 'list' ? { type: 'array', items: fieldSchema(node) } : fieldSchema(node);
      others.set(JSON.stringify(other), other);
      continue;
    }
    for (const [name, field] of Object.entries(record)) fields[name] = name in fields ? mergeField(fields[name]!, field) : field;
    records = op.kind === 'list' ? { ...records, lists: true } : { ...records, items: true };
  }
  const record = { type: 'object', properties: fields };
  // A record both single and listed is named once, in `$defs`.
  const shared = records.items && records.lists;
  const ref = shared ? { $ref: '#/$defs/record' } : record;
  const variants = [...(records.items ? [ref] : []), ...(records.lists ? [{ type: 'array', items: ref }] : []), ...others.values()];
  return {
    type: 'object',
    ...(shared ? { $defs: { record } } : {}),
    properties: {
      data: variants.length === 1 ? variants[0]! : { anyOf: variants },
      // A list's `meta.pagination` (`limit`, `offset`, `hasMore`, `total`?), the same for every list.
      ...(ops.some((op) => op.kind === 'list') ? { meta: { type: 'object' } } : {}),
    },
    required: ['data'],
  };
}

/** Which tool of its category an operation belongs to. */
export function toolKind(op: Pick<Operation, 'method' | 'effects' | 'tool'>): ToolKind {
  if (op.method === 'GET') return 'read';
  if (op.tool) return op.tool;
  return destroys(op) ? 'delete' : 'write';
}

/** Whether an operation deletes or destroys (a soft delete is still gone for the client). */
const destroys = (op: Pick<Operation, 'method' | 'effects'>) => op.method === 'DELETE' || op.effects?.destructive === true;

/** The (tool, method) an operation is reached through on MCP: `contacts.create_email` is `contacts_write` with method `create_email`. */
export function toolMethodOf(op: Pick<Operation, 'id' | 'method' | 'effects' | 'tool'>): { tool: string; method: string } {
  const category = operationCategory(op);
  return { tool: `${category}_${toolKind(op)}`, method: op.id.slice(category.length + 1) };
}

/**
 * The hints of a tool, true of every one of its methods: read-only when none writes; destructive when one
 * deletes or destroys (a soft delete is still gone for the client); idempotent when repeating any method
 * with the same arguments changes nothing more (GET, PUT, PATCH, DELETE; not POST, where twice adds twice);
 * open-world when one reaches outside this service (sends an email, calls a URL).
 */
export function toolAnnotations(ops: readonly Pick<Operation, 'method' | 'effects'>[]): ToolAnnotations {
  const openWorldHint = ops.some((op) => op.effects?.openWorld === true);
  if (ops.every((op) => op.method === 'GET')) return { readOnlyHint: true, openWorldHint };
  return {
    readOnlyHint: false,
    destructiveHint: ops.some(destroys),
    idempotentHint: ops.every((op) => op.method !== 'POST'),
    openWorldHint,
  };
}

const TITLES: Record<ToolKind, (category: string) => string> = {
  read: (c) => `Read ${c}`,
  write: (c) => `Create and change ${c}`,
  delete: (c) => `Delete ${c}`,
};

const INTROS: Record<ToolKind, (category: string) => string> = {
  read: (c) => `Reads ${c}.`,
  write: (c) => `Creates and changes ${c} (deletes nothing); answers \`{ data }\` as \`${c}_read\` does.`,
  delete: (c) => `Deletes ${c} or changes them for good; answers \`{ data }\` as \`${c}_read\` does.`,
};

/** Said of every method that sends: an OAuth grant needs the person's consent to it (the server's instructions say which). */
const SENDS = ' Needs the send consent.';

/** The method's arguments as the tool description names them: required ones marked with `*`. */
function argumentList(op: Operation, withIdempotency: boolean): string {
  const schema = slimInput(jsonSchema(op.input, 'input')) as JsonSchema;
  const required = new Set((schema.required as string[] | undefined) ?? []);
  const names = Object.keys((schema.properties as Record<string, unknown> | undefined) ?? {}).map((n) => (required.has(n) ? `${n}*` : n));
  if (withIdempotency) names.push('idempotencyKey');
  return names.length ? names.join(', ') : 'none';
}

/**
 * The page arguments of list methods: their keywords say what they take (bounds, default, values) and the
 * method's summary says its order, so their prose is left out, once per read tool.
 */
const PAGE_ARGUMENTS = new Set(['limit', 'offset', 'sortOrder']);
const withoutDescription = ({ description: _d, ...rest }: JsonSchema): JsonSchema => rest;
/** A record's id described as only that ("Id of the message"): its name, its format and its method's summary say it already. */
const namesItself = (schema: JsonSchema) => schema.format === 'uuid' && typeof schema.description === 'string' && /^Id of the [a-z ]+$/.test(schema.description);

/**
 * The input schema of a tool: `method` (required, one of the tool's methods) and every argument of its
 * methods, once each. Which arguments a method takes, and which it requires, is in the tool description;
 * the method's own Zod schema checks the call and names any field it does not take.
 */
function inputSchema(methods: ReadonlyMap<string, Operation>): ToolDefinition['inputSchema'] {
  const properties: Record<string, JsonSchema> = {
    method: { type: 'string', enum: [...methods.keys()] },
  };
  const variants = new Map<string, Map<string, JsonSchema>>();
  for (const op of methods.values()) {
    const own = (slimInput(jsonSchema(op.input, 'input')) as JsonSchema).properties as Record<string, JsonSchema> | undefined;
    for (const [name, given] of Object.entries(own ?? {})) {
      const schema = PAGE_ARGUMENTS.has(name) || namesItself(given) ? withoutDescription(given) : given;
      const seen = variants.get(name) ?? new Map<string, JsonSchema>();
      seen.set(JSON.stringify(schema), schema);
      variants.set(name, seen);
    }
  }
  for (const [name, seen] of variants) {
    const distinct = [...seen.values()];
    if (distinct.length === 1) {
      properties[name] = distinct[0]!;
      continue;
    }
    // The same name with other rules in another method: any of them, described once (the first description).
    const description = distinct.map((s) => s.description).find((d) => typeof d === 'string');
    // A default (of a creating method) does not make another rule: the first variant with it stands for
    // both. Rules that differ only in their types (nullable in an update, not in a create) become one.
    const bare = new Map<string, JsonSchema>();
    for (const { description: _d, ...rest } of distinct) {
      const { default: _default, type, ...rule } = rest;
      const key = JSON.stringify(rule);
      const seen = bare.get(key);
      const types = [...new Set([seen?.type as string | string[] | undefined, type as string | string[] | undefined].flat())];
      if (!seen) bare.set(key, rest);
      else if (seen.type !== undefined && type !== undefined) bare.set(key, { ...seen, type: types.length === 1 ? types[0] : types });
      else if (JSON.stringify(seen.type) !== JSON.stringify(type)) bare.set(JSON.stringify(rest), rest);
    }
    properties[name] = bare.size === 1 ? { ...[...bare.values()][0], ...(description ? { description } : {}) } : { anyOf: [...bare.values()], ...(description ? { description } : {}) };
  }
  if ([...methods.values()].some((op) => op.method === 'POST')) properties.idempotencyKey = IDEMPOTENCY_ARGUMENT_SCHEMA;
  return { type: 'object', properties, required: ['method'] };
}

function toolDefinition(name: string, category: Category, kind: ToolKind, methods: ReadonlyMap<string, Operation>): ToolDefinition {
  const ops = [...methods.values()];
  const { title: categoryTitle } = CATEGORIES.find((c) => c.id === category)!;
  const lines = [...methods].map(([method, op]) => `- \`${method}\` (${argumentList(op, op.method === 'POST')}): ${op.summary}.${op.effects?.sends ? SENDS : ''}`);
  const description = [`${INTROS[kind](category)} Methods, with their arguments (* = required):`, ...lines].join('\n');
  const title = TITLES[kind](categoryTitle.toLowerCase());
  // Output schemas on the read tools only: a writing tool answers the same records, and the tool list a
  // client sends with every turn stays within its budget (see docs/tools.md).
  return { name, title, description, inputSchema: inputSchema(methods), ...(kind === 'read' ? { outputSchema: outputSchema(ops) } : {}), annotations: toolAnnotations(ops) };
}

/**
 * The tools of the operation table, made by rule: per category a read, a write and a delete tool (each
 * only when the category has such operations), every operation a method of exactly one of them. A new
 * operation therefore lands in a tool without a line here. The JSON Schemas are computed here, never per request.
 */
export function buildToolCatalog(operations: readonly Operation[]): ToolCatalog {
  const grouped = new Map<string, { category: Category; kind: ToolKind; methods: Map<string, Operation> }>();
  for (const category of CATEGORIES) {
    for (const kind of TOOL_KINDS) {
      for (const op of operations) {
        if (operationCategory(op) !== category.id || toolKind(op) !== kind) continue;
        const { tool, method } = toolMethodOf(op);
        const group = grouped.get(tool) ?? { category: category.id, kind, methods: new Map<string, Operation>() };
        if (group.methods.has(method)) throw new Error(`Two operations map to the method ${method} of ${tool}`);
        group.methods.set(method, op);
        grouped.set(tool, group);
      }
    }
  }
  const placed = [...grouped.values()].reduce((n, group) => n + group.methods.size, 0);
  if (placed !== operations.length) throw new Error('An operation belongs to no category of CATEGORIES: it would have no tool');
  const catalog = new Map<string, ToolEntry>();
  for (const [name, { category, kind, methods }] of grouped) {
    const permissions = [...new Set([...methods.values()].map(operationPermission))];
    catalog.set(name, { name, category, kind, methods, permissions, definition: toolDefinition(name, category, kind, methods) });
  }
  return catalog;
}
