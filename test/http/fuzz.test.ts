import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_INPUT_DEPTH } from '../../src/core/schemas.js';
import { pathParams, type Operation } from '../../src/core/operation.js';
import { operations } from '../../src/operations.js';
import { createTestApp, type Tenant, type TestApp } from '../helpers/app.js';
import { bodyOf, hasBody, inputSchema, minimalInput } from './inputs.js';

/**
 * Hostile input never yields a 5xx. Bounded property-based runs (fixed seed, so a failure reproduces)
 * over every operation: random JSON bodies, valid bodies with one field replaced by something nasty,
 * huge strings, deep nesting, unicode (lone surrogates included), NUL bytes in bodies, keys, query and path.
 */

let t: TestApp;
let a: Tenant;
let contactId: string;

beforeAll(async () => {
  t = await createTestApp();
  a = await t.tenant();
  contactId = (await a.request('POST', '/v1/contacts', { name: 'Fuzz' })).json.data.id;
});
afterAll(() => t.close());

const SEED = Number(process.env.FUZZ_SEED ?? 20240501);
const RUNS = Number(process.env.FUZZ_RUNS ?? 150);

const nest = (depth: number, leaf: unknown = 'x'): unknown => {
  let v: unknown = leaf;
  // The outermost level is always an object.
  for (let i = 0; i < depth; i++) v = (depth - i) % 2 === 1 ? { k: v } : [v];
  return v;
};

const nastyString = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.constantFrom(
    '',
    ' ',
    '\u0000',
    'a\u0000b',
    '\ud800',
    '\udfff\ud800',
    '\uffff\ufffe',
    '\u202e\u200b',
    '😀'.repeat(300),
    'x'.repeat(70_000),
    'é'.repeat(300_000),
    "'; DROP TABLE contacts; --",
    '%00',
    '../../etc/passwd',
    '${jndi:ldap://x}',
    '2024-02-30T25:61:61Z',
    '-0',
    '1e309',
    'null',
    'true',
    '00000000-0000-0000-0000-000000000000',
  ),
);

const nastyNumber = fc.oneof(
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(0, -1, 2 ** 31, -(2 ** 31) - 1, 2 ** 53 + 2, 1e308, -1e308, 5e-324, 0.1),
);

const nastyValue: fc.Arbitrary<unknown> = fc.oneof(
  nastyString,
  nastyNumber,
  fc.boolean(),
  fc.constant(null),
  fc.jsonValue({ maxDepth: 4 }),
  fc.integer({ min: 1, max: 1000 }).map((d) => nest(d)),
  fc.integer({ min: 1, max: 100 }).map((d) => nest(d, '\u0000')),
  fc.dictionary(nastyString, nastyString, { maxKeys: 5 }),
  fc.array(nastyString, { maxLength: 5 }),
  fc.constant(Array.from({ length: 20_000 }, (_, i) => i)),
);

/** Percent-encodes every byte, so any string (even a lone surrogate) can stand in a path. */
const encodeAll = (s: string) => [...Buffer.from(s, 'utf8')].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');

const pathValue = fc.oneof(
  fc.uuid({ version: 4 }).map(encodeURIComponent),
  fc.constant(contactId!).map(() => contactId),
  nastyString.map(encodeAll),
  fc.constantFrom('%', '%zz', '%c3', '%ff%fe', '%2F', '..', '.', '%00', '%u0000'),
);

interface Case {
  op: Operation;
  toString(): string;
  path: Record<string, string>;
  mode: 'random' | 'mutated';
  field: string;
  value: unknown;
  extra: Record<string, unknown>;
}

const caseArb: fc.Arbitrary<Case> = fc
  .record({
    opIndex: fc.nat({ max: operations.length - 1 }),
    mode: fc.constantFrom('random' as const, 'mutated' as const),
    fieldPick: fc.nat(),
    value: nastyValue,
    extra: fc.dictionary(nastyString, nastyValue, { maxKeys: 3 }),
    pathValues: fc.array(pathValue, { minLength: 3, maxLength: 3 }),
  })
  .map(({ opIndex, mode, fieldPick, value, extra, pathValues }) => {
    const op = operations[opIndex]!;
    const params = pathParams(op);
    const fields = Object.keys(inputSchema(op).properties).filter((f) => !params.includes(f));
    return {
      op,
      path: Object.fromEntries(params.map((p, i) => [p, pathValues[i]!])),
      mode,
      field: fields.length ? fields[fieldPick % fields.length]! : 'unexpected',
      value,
      extra,
      // fast-check prints counterexamples with this: the operation by id, not its whole schema.
      toString() {
        return `${op.id} ${mode} ${JSON.stringify({ path: this.path, field: this.field, value, extra }).slice(0, 500)}`;
      },
    };
  });

async function send(c: Case) {
  const url = `/v1${c.op.path.replace(/\{(\w+)\}/g, (_m, name: string) => c.path[name] ?? '')}`;
  const base = c.mode === 'mutated' ? bodyOf(c.op, minimalInput(c.op) ?? {}) : {};
  const input = c.mode === 'mutated' ? { ...base, [c.field]: c.value } : { ...c.extra, [c.field]: c.value };
  if (hasBody(c.op)) {
    // Random mode sends any JSON value as the whole body sometimes, not only objects.
    const body = c.mode === 'random' && typeof c.value !== 'object' ? c.value : input;
    return t.app.inject({ method: c.op.method, url, headers: { authorization: `Bearer ${a.key}`, 'content-type': 'application/json' }, payload: JSON.stringify(body) ?? 'null' });
  }
  const query = Object.entries(input)
    .map(([k, v]) => `${encodeAll(k)}=${encodeAll(typeof v === 'string' ? v : (JSON.stringify(v) ?? ''))}`)
    .join('&');
  return t.app.inject({ method: c.op.method, url: `${url}${query ? `?${query}` : ''}`, headers: { authorization: `Bearer ${a.key}` } });
}

describe('hostile input', () => {
  it(`never yields a 5xx (${RUNS} random requests over every operation, seed ${SEED})`, async () => {
    await fc.assert(
      fc.asyncProperty(caseArb, async (c) => {
        const res = await send(c);
        if (res.statusCode >= 500) throw new Error(`${c.op.method} ${c.op.path} answered ${res.statusCode}: ${res.body.slice(0, 300)}`);
        const body = JSON.parse(res.body) as { data?: unknown; error?: { code: string; message: string } };
        if (res.statusCode >= 400) expect(typeof body.error?.code, `${res.statusCode} ${res.body.slice(0, 300)}`).toBe('string');
        expect(res.headers['x-request-id']).toBeTruthy();
      }),
      { seed: SEED, numRuns: RUNS, endOnFailure: true },
    );
  }, 60_000 + RUNS * 500);

  it('NUL bytes anywhere (values, keys, query, path) are a 400, never a database error', async () => {
    const create = await a.request('POST', '/v1/contacts', { name: 'a\u0000b' });
    expect(create.status, create.body).toBe(400);
    expect(create.json.error.details.properties.name.errors.join(' ')).toMatch(/NUL/);

    const inData = await a.request('POST', '/v1/contacts', { data: { list: ['ok', 'x\u0000'], ['k\u0000']: 1 } });
    expect(inData.status, inData.body).toBe(400);
    const tree = inData.json.error.details.properties.data;
    expect(tree.errors.join(' ')).toMatch(/NUL/);
    expect(tree.properties.list.items[0]).toBeNull();
    expect(tree.properties.list.items[1].errors.join(' ')).toMatch(/NUL/);

    const patch = await a.request('PATCH', `/v1/contacts/${contactId}`, { notes: '\u0000' });
    expect(patch.status, patch.body).toBe(400);
    const query = await a.request('GET', '/v1/contacts?sortOrder=%00');
    expect(query.status, query.body).toBe(400);
    const path = await a.request('GET', `/v1/contacts/${contactId.slice(0, -1)}%00`);
    expect(path.status, path.body).toBe(400);
    // The contact is unchanged.
    expect((await a.request('GET', `/v1/contacts/${contactId}`)).json.data.notes).toBeNull();
  });

  it(`nesting deeper than ${MAX_INPUT_DEPTH} levels is a 400; just under is stored`, async () => {
    const ok = await a.request('POST', '/v1/contacts', { data: nest(MAX_INPUT_DEPTH - 2) as Record<string, unknown> });
    expect(ok.status, ok.body).toBe(201);
    const tooDeep = await a.request('POST', '/v1/contacts', { data: { deep: nest(MAX_INPUT_DEPTH) } });
    expect(tooDeep.status, tooDeep.body.slice(0, 200)).toBe(400);
    expect(JSON.stringify(tooDeep.json.error.details)).toContain('Nested deeper');
    // Far deeper, as raw text (JSON.stringify itself would overflow the stack building it).
    for (const depth of [5000, 400_000]) {
      const payload = `{"data":{"deep":${'['.repeat(depth)}${']'.repeat(depth)}}}`;
      const raw = await t.app.inject({ method: 'POST', url: '/v1/contacts', headers: { authorization: `Bearer ${a.key}`, 'content-type': 'application/json' }, payload });
      expect(raw.statusCode, raw.body.slice(0, 200)).toBe(400);
    }
  });

  it('lone surrogates and other odd unicode are stored or refused, never a 5xx', async () => {
    for (const name of ['\ud800', 'x\udfffy', '\u202e', '😀'.repeat(60), '\uffff']) {
      const res = await a.request('POST', '/v1/contacts', { name, data: { [name]: name } });
      expect(res.status, res.body).toBeLessThan(500);
    }
  });
});
