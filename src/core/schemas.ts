import { z } from 'zod';
import type { ErrorTree } from './errors.js';
import { LONE_SURROGATE as STORABLE_LONE_SURROGATE } from './storable.js';

/** Building blocks shared by every module's schemas. */

const componentIds = new WeakMap<z.ZodType, string>();

/**
 * The named schemas of the OpenAPI document: each module adds its resources (`components.add(Contact, {
 * id: 'Contact' })`), and the document refers to them by `$ref` instead of repeating them. Response
 * schemas only: an id names one shape. Kept apart from Zod's global registry so that the MCP tool schemas
 * stay self-contained (no `$ref`).
 */
export const components = {
  add(schema: z.ZodType, meta: { id: string }) {
    componentIds.set(schema, meta.id);
  },
  /**
   * A request part several operations share (a channel kind's settings object): the document names it once and
   * refers to it wherever its JSON appears in a request, also where a merged document wrote it out (`routedObject`).
   * The first schema given an id keeps it.
   */
  addRequestPart(schema: z.ZodType, meta: { id: string }) {
    if (!requestParts.has(meta.id)) requestParts.set(meta.id, schema);
  },
  /** The request parts, by id. */
  requestParts: (): ReadonlyMap<string, z.ZodType> => requestParts,
};
const requestParts = new Map<string, z.ZodType>();

/**
 * The `metadata` of `z.toJSONSchema` for the OpenAPI document: each schema's own metadata (descriptions,
 * examples, from the global registry) plus the component id of a named one. `toJSONSchema` only calls
 * `get` on it, hence the cast.
 */
export const documentMetadata = {
  get(schema: z.ZodType) {
    const own = z.globalRegistry.get(schema);
    const id = componentIds.get(schema);
    return id ? { ...own, id } : own;
  },
} as unknown as typeof z.globalRegistry;

export const Uuid = z.uuid().describe('UUID');
export const IdParam = (what: string) => z.uuid().describe(`Id of the ${what}`);

/** Timestamps in responses: ISO 8601 UTC. */
export const Timestamp = z.iso.datetime().describe('ISO 8601 UTC timestamp');
export const NullableTimestamp = Timestamp.nullable();

/** Timestamps in requests: ISO 8601 with `Z` or an offset. */
export const DateTimeInput = z.iso.datetime({ offset: true }).describe('ISO 8601 date-time, with Z or an offset');

export const JsonObject = z.record(z.string(), z.unknown()).describe('Free-form JSON object');

/** Any JSON value (untyped message fields). */
export const JsonValue = z.unknown().describe('Any JSON value');

/** Text fields: bounded, so no single field can hold the whole body limit. */
export const ShortText = (max = 255) => z.string().max(max);
export const LongText = z.string().max(100_000);

/** `id`, audit timestamps and `organizationId`: on every resource. */
export const AuditFields = {
  id: Uuid.describe('Unique id (UUID v4)'),
  createdAt: Timestamp.describe('When the record was created (ISO 8601 UTC)'),
  updatedAt: Timestamp.describe('When the record was last changed (ISO 8601 UTC)'),
  deletedAt: NullableTimestamp.describe('When the record was deleted; always null in responses except a DELETE answer'),
  organizationId: Uuid.describe('Organization that owns the record'),
};

/** Converts an optional ISO string from a request into a Date, keeping null and undefined. */
export function toDate<T extends string | null | undefined>(value: T): T extends string ? Date : Exclude<T, string> {
  return (typeof value === 'string' ? new Date(value) : value) as never;
}

// A high surrogate not followed by a low one, or a low one not preceded by a high one (without `g`: `test` keeps no state).
const LONE_SURROGATE = new RegExp(STORABLE_LONE_SURROGATE.source);

function stringIssue(s: string): string | undefined {
  if (s.includes('\u0000')) return 'Must not contain NUL (\\u0000) characters';
  if (LONE_SURROGATE.test(s)) return 'Must be well-formed Unicode (no lone surrogate \\ud800-\\udfff)';
  return undefined;
}

/**
 * Keys refused at any depth of request JSON, as the unknown fields they are: they name the prototype
 * machinery of JavaScript objects, and code that merges objects with assignment would follow them.
 */
export const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

/** The forbidden keys an object (at any depth) holds as its own, or an empty list. */
export function forbiddenKeysIn(value: unknown, depth = 0): string[] {
  if (typeof value !== 'object' || value === null || depth > MAX_INPUT_DEPTH) return [];
  const own = Object.keys(value);
  return [...new Set([...own.filter((k) => FORBIDDEN_KEYS.has(k)), ...own.flatMap((k) => forbiddenKeysIn((value as Record<string, unknown>)[k], depth + 1))])];
}

/** How deep request JSON may nest (objects and arrays); deeper input is refused before it reaches the database. */
export const MAX_INPUT_DEPTH = 64;

/**
 * Issues with raw input that no schema states but the database refuses or chokes on: NUL characters
 * (PostgreSQL rejects `\u0000` in text and jsonb) and lone UTF-16 surrogates (jsonb rejects `\ud800`)
 * in any string or key, and nesting deeper than
 * MAX_INPUT_DEPTH. Answers a details tree shaped like `z.treeifyError` (arrays as `items`), or undefined.
 */
export function unsafeInputIssues(value: unknown, depth = 0): ErrorTree | undefined {
  if (typeof value === 'string') {
    const issue = stringIssue(value);
    return issue ? { errors: [issue] } : undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  if (depth >= MAX_INPUT_DEPTH) return { errors: [`Nested deeper than ${MAX_INPUT_DEPTH} levels`] };
  if (Array.isArray(value)) {
    const items = value.map((v) => unsafeInputIssues(v, depth + 1) ?? null);
    return items.some(Boolean) ? { errors: [], items } : undefined;
  }
  const errors: string[] = [];
  const properties: Record<string, ErrorTree> = {};
  for (const [key, v] of Object.entries(value)) {
    const keyIssue = stringIssue(key);
    if (keyIssue) errors.push(`Key: ${keyIssue}`);
    if (FORBIDDEN_KEYS.has(key)) errors.push(`Unrecognized key: "${key}"`);
    const issue = unsafeInputIssues(v, depth + 1);
    if (issue) properties[key] = issue;
  }
  if (!errors.length && !Object.keys(properties).length) return undefined;
  return { errors: [...new Set(errors)], ...(Object.keys(properties).length ? { properties } : {}) };
}
