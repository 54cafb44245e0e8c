import { randomUUID } from 'node:crypto';
import type { z } from 'zod';
import fc from 'fast-check';
import { toJsonSchema, type JsonSchema } from '../../src/core/json-schema.js';
import { inputLocation, pathParams, type Operation } from '../../src/core/operation.js';

/** The input JSON Schema of an operation (the same one the OpenAPI document and the MCP tools use). */
export function inputSchema(op: Operation): { properties: Record<string, JsonSchema>; required: string[] } {
  const json = toJsonSchema(op.input, 'input') as { properties?: Record<string, JsonSchema>; required?: string[] };
  return { properties: json.properties ?? {}, required: json.required ?? [] };
}

/** Path parameters that the schema declares as UUIDs (the spec: every path parameter is one). */
export function uuidParams(op: Operation): string[] {
  const { properties } = inputSchema(op);
  return pathParams(op).filter((p) => properties[p]?.format === 'uuid');
}

/** A path with every placeholder replaced by the given values (random UUIDs by default). */
export function fillPath(op: Operation, values: Record<string, string> = {}): string {
  return `/v1${op.path.replace(/\{(\w+)\}/g, (_m, name: string) => encodeURIComponent(values[name] ?? randomUUID()))}`;
}

// Values that plain JSON Schema cannot describe (refinements such as "a valid phone number"): tried by field name.
const BY_NAME: [RegExp, unknown[]][] = [
  [/phone/i, ['+14155550123']],
  [/email/i, ['someone@example.com']],
  [/currency/i, ['USD']],
  [/amount/i, ['10.00']],
  [/cron/i, ['0 9 * * 1']],
  [/country/i, ['US']],
  [/domain|host/i, ['example.com']],
  [/url|picture|website/i, ['https://example.com/']],
  [/event/i, ['contacts.created']],
];

const BY_FORMAT: Record<string, () => unknown> = {
  uuid: () => randomUUID(),
  email: () => 'someone@example.com',
  'idn-email': () => 'someone@example.com',
  'date-time': () => new Date().toISOString(),
  date: () => '2024-01-31',
  uri: () => 'https://example.com/',
  url: () => 'https://example.com/',
  hostname: () => 'example.com',
};

/**
 * Strings matching a pattern, sampled with a fixed seed: the same five every time, so each pattern is
 * sampled once (sampling takes a quarter of a second; every request of the operation tables builds an input).
 */
const patternSamples = new Map<string, string[]>();
function matching(pattern: string): string[] {
  let samples = patternSamples.get(pattern);
  if (!samples) {
    try {
      samples = fc.sample(fc.stringMatching(new RegExp(pattern)), { numRuns: 5, seed: 1 });
    } catch {
      samples = []; // a pattern JavaScript cannot compile: other candidates remain
    }
    patternSamples.set(pattern, samples);
  }
  return samples;
}

function candidates(name: string, schema: JsonSchema): unknown[] {
  const out: unknown[] = [];
  if (Array.isArray(schema.examples)) out.push(...(schema.examples as unknown[]));
  if ('const' in schema) out.push(schema.const);
  if (Array.isArray(schema.enum)) out.push(...(schema.enum as unknown[]));
  if ('default' in schema) out.push(schema.default);
  for (const variant of [...((schema.anyOf as JsonSchema[]) ?? []), ...((schema.oneOf as JsonSchema[]) ?? [])]) {
    if (variant.type !== 'null') out.push(...candidates(name, variant));
  }
  for (const [re, values] of BY_NAME) if (re.test(name)) out.push(...values);
  if (typeof schema.format === 'string' && BY_FORMAT[schema.format]) out.push(BY_FORMAT[schema.format]!());
  if (typeof schema.pattern === 'string') out.push(...matching(schema.pattern));
  switch (schema.type) {
    case 'string': {
      const min = (schema.minLength as number | undefined) ?? 1;
      out.push('Example text', 'example.com', 'x'.repeat(Math.max(min, 1)));
      break;
    }
    case 'integer':
    case 'number': {
      const min = schema.minimum as number | undefined;
      const max = schema.maximum as number | undefined;
      out.push(min ?? (max !== undefined ? Math.min(1, max) : 1), 0);
      break;
    }
    case 'boolean':
      out.push(true);
      break;
    case 'object': {
      const props = (schema.properties as Record<string, JsonSchema> | undefined) ?? {};
      const required = (schema.required as string[] | undefined) ?? [];
      out.push(Object.fromEntries(required.map((k) => [k, candidates(k, props[k] ?? {})[0]])));
      break;
    }
    case 'array': {
      const min = (schema.minItems as number | undefined) ?? 0;
      const item = candidates(name, (schema.items as JsonSchema | undefined) ?? {})[0];
      out.push(Array.from({ length: min }, () => item));
      break;
    }
  }
  return out;
}

/**
 * A valid input for the operation with only the required fields (besides the given ones), built from
 * its JSON Schema and checked against the Zod schema field by field. `undefined` when no candidate
 * satisfies some field (the caller says why it skips).
 */
export function minimalInput(op: Operation, given: Record<string, unknown> = {}): Record<string, unknown> | undefined {
  const { properties, required } = inputSchema(op);
  const shape = op.input.shape as Record<string, z.ZodType>;
  const input: Record<string, unknown> = { ...given };
  for (const name of required) {
    if (name in input) continue;
    const field = shape[name];
    const value = candidates(name, properties[name] ?? {}).find((v) => v !== undefined && field?.safeParse(v).success);
    if (value === undefined) return undefined;
    input[name] = value;
  }
  if (op.input.safeParse(input).success) return input;
  // Cross-field rules (e.g. "q or its alias query") may need an optional field too: add them one at a time.
  for (const [name, schema] of Object.entries(properties)) {
    if (name in input) continue;
    const value = candidates(name, schema).find((v) => v !== undefined && shape[name]?.safeParse(v).success);
    if (value === undefined) continue;
    input[name] = value;
    if (op.input.safeParse(input).success) return input;
  }
  return undefined;
}

/** The body part of an input: everything that is not a path parameter. */
export function bodyOf(op: Operation, input: Record<string, unknown>): Record<string, unknown> {
  const params = new Set(pathParams(op));
  return Object.fromEntries(Object.entries(input).filter(([k]) => !params.has(k)));
}

export const hasBody = (op: Operation) => inputLocation(op) === 'body';

/** The query string of an input for GET/DELETE operations (path parameters left out). */
export function queryOf(op: Operation, input: Record<string, unknown>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(bodyOf(op, input))) q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}
