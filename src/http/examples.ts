import type { JsonSchema } from '../core/json-schema.js';

/**
 * Example values for the OpenAPI document, made from the JSON Schemas themselves, so that every operation
 * has an example request and response that cannot drift from its schema (a test parses every example
 * request with the operation's own input schema). Field names pick realistic values where the schema alone
 * says only "a string". Written by hand: the generators of this kind make random data, not stable
 * documentation.
 */

const BY_NAME: Record<string, unknown> = {
  email: 'ada@example.com',
  phoneNumber: '+14155550123',
  url: 'https://hooks.example.com/switchboard',
  domain: 'example.com',
  country: 'US',
  currency: 'USD',
  name: 'Ada Lovelace',
  firstName: 'Ada',
  lastName: 'Lovelace',
  instructions: 'When a new email arrives from billing@acme.example, mark it as read',
  cronExpression: '0 9 * * 1',
  timezone: 'Europe/Berlin',
  type: 'email',
  text: 'Thanks for the quote, see you Monday.',
  q: 'quote',
  threadId: '9b2f4e1c-6d3a-4f8b-a1c2-7e5d4c3b2a10',
  label: 'work',
  city: 'London',
  amount: '19.99',
};

const BY_FORMAT: Record<string, string> = {
  uuid: '3f0e5c1a-8b7d-4c2e-9f10-5a6b7c8d9e0f',
  'date-time': '2026-01-15T09:30:00.000Z',
  date: '2026-01-15',
  email: 'ada@example.com',
  'idn-email': 'ada@example.com',
  uri: 'https://example.com',
};

function resolve(schema: JsonSchema, named: Record<string, JsonSchema>): JsonSchema {
  const ref = schema.$ref;
  return typeof ref === 'string' ? (named[ref.replace('#/components/schemas/', '')] ?? {}) : schema;
}

/** An example of `schema`; `full` fills every property (answers), otherwise the required ones (requests). */
export function exampleOf(schema: JsonSchema, named: Record<string, JsonSchema>, opts: { full: boolean; key?: string; depth?: number }): unknown {
  const s = resolve(schema, named);
  const depth = opts.depth ?? 0;
  if (depth > 8) return null;
  if (Array.isArray(s.examples) && s.examples.length) return s.examples[0];
  if ('const' in s) return s.const;
  if (Array.isArray(s.enum)) return s.enum.find((v) => v !== null) ?? null;
  const variants = (s.anyOf ?? s.oneOf) as JsonSchema[] | undefined;
  if (variants) {
    const chosen = variants.find((v) => resolve(v, named).type !== 'null') ?? variants[0]!;
    return exampleOf(chosen, named, { ...opts, depth: depth + 1 });
  }
  const types = Array.isArray(s.type) ? (s.type as string[]) : [s.type as string | undefined];
  const type = types.find((t) => t !== 'null') ?? types[0];
  const byName = opts.key !== undefined ? BY_NAME[opts.key] : undefined;
  switch (type) {
    case 'string': {
      if (typeof s.format === 'string' && BY_FORMAT[s.format]) return BY_FORMAT[s.format];
      if (/domain name/i.test(String(s.description ?? ''))) return 'example.com';
      if (typeof byName === 'string') return byName;
      return typeof s.minLength === 'number' && s.minLength > 7 ? 'x'.repeat(s.minLength) : 'example';
    }
    case 'integer':
    case 'number':
      return typeof s.minimum === 'number' ? s.minimum : typeof byName === 'number' ? byName : 1;
    case 'boolean':
      return true;
    case 'null':
      return null;
    case 'array': {
      const items = (s.items as JsonSchema | undefined) ?? {};
      const min = Math.max(1, Number(s.minItems ?? 1));
      return Array.from({ length: min }, () => exampleOf(items, named, { full: opts.full, depth: depth + 1 }));
    }
    case 'object':
    case undefined: {
      const props = (s.properties as Record<string, JsonSchema> | undefined) ?? {};
      const required = new Set((s.required as string[] | undefined) ?? []);
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(props)) {
        // A request example shows the required fields, and at the top the usual ones a person would send.
        if (opts.full || required.has(k) || (depth === 0 && k in BY_NAME)) out[k] = exampleOf(v, named, { full: opts.full, key: k, depth: depth + 1 });
      }
      return out;
    }
    default:
      return null;
  }
}
