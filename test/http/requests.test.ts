import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { contacts } from '../../src/db/schema.js';
import { operations } from '../../src/operations.js';
import { toTestResponse, useTestApp, type Tenant, type TestResponse } from '../helpers/app.js';
import { bodyOf, fillPath, hasBody, inputSchema, minimalInput } from './inputs.js';

const { t, a } = useTestApp();

function expectError(res: TestResponse, status: number, code: string) {
  expect(res.status, res.body).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  expect(res.json?.error?.code, res.body).toBe(code);
  expect(typeof res.headers['x-request-id']).toBe('string');
}

/** A raw request with the tenant's key: `payload` as given, `content-type` only when given. */
async function raw(method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'HEAD' | 'OPTIONS', url: string, payload?: string | Buffer, contentType?: string, key: string | null = a.key) {
  const res = await t.app.inject({
    method,
    url,
    headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...(contentType ? { 'content-type': contentType } : {}) },
    ...(payload !== undefined ? { payload } : {}),
  });
  return toTestResponse(res);
}

const bodyOps = operations.filter(hasBody);

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = Record<string, any>;

describe('request bodies', () => {
  it('malformed JSON is a 400 BAD_REQUEST', async () => {
    for (const payload of ['{"firstName":', '{firstName: "x"}', "{'a':1}", '{"a":1}}', '\u0000']) {
      expectError(await raw('POST', '/v1/contacts', payload, 'application/json'), 400, 'BAD_REQUEST');
    }
  });

  it('__proto__, constructor and prototype keys are refused as unknown fields, at any depth', async () => {
    for (const [payload, where] of [
      ['{"name":"x","__proto__":{"isAdmin":true}}', (d: Json) => d.errors],
      ['{"name":"x","constructor":{"prototype":{"a":1}}}', (d: Json) => d.errors],
      ['{"name":"x","data":{"nested":{"__proto__":{"a":1}}}}', (d: Json) => d.properties.data.properties.nested.errors],
    ] as const) {
      const res = await raw('POST', '/v1/contacts', payload, 'application/json');
      expectError(res, 400, 'VALIDATION_ERROR');
      expect(JSON.stringify(where(res.json.error.details as Json))).toMatch(/Unrecognized key: \\"(__proto__|constructor)\\"/);
    }
    expect(({} as Json).isAdmin).toBeUndefined();
  });

  it('a content type other than JSON is a 400 BAD_REQUEST, on every operation with a body', async () => {
    for (const op of bodyOps) {
      for (const [type, payload] of [
        ['text/plain', '{}'],
        ['application/x-www-form-urlencoded', 'name=x&firstName=y'],
        ['multipart/form-data; boundary=x', '--x\r\nContent-Disposition: form-data; name="name"\r\n\r\nx\r\n--x--\r\n'],
        ['application/xml', '<a/>'],
      ] as const) {
        const res = await raw(op.method as 'POST', fillPath(op), payload, type);
        expectError(res, 400, 'BAD_REQUEST');
      }
    }
  });

  it('accepts application/json with a charset', async () => {
    const res = await raw('POST', '/v1/contacts', JSON.stringify({ name: 'Charset' }), 'application/json; charset=utf-8');
    expect(res.status, res.body).toBe(201);
  });

  it('a body over 1 MiB is a 413 PAYLOAD_TOO_LARGE; just under is read (and judged by the schema)', async () => {
    const big = JSON.stringify({ notes: 'x'.repeat(1024 * 1024) });
    expectError(await raw('POST', '/v1/contacts', big, 'application/json'), 413, 'PAYLOAD_TOO_LARGE');
    const under = JSON.stringify({ notes: 'x'.repeat(1024 * 1024 - 20) });
    expect(Buffer.byteLength(under)).toBeLessThanOrEqual(1024 * 1024);
    expectError(await raw('POST', '/v1/contacts', under, 'application/json'), 400, 'VALIDATION_ERROR');
    // Without a key the size still decides first: nothing that large is read.
    expectError(await raw('POST', '/v1/contacts', big, 'application/json', null), 413, 'PAYLOAD_TOO_LARGE');
  });

  it('a body that is not a JSON object (array, string, number, boolean, null) is a 400', async () => {
    for (const op of bodyOps) {
      for (const payload of ['[]', '[{}]', '"text"', '42', 'true', 'null']) {
        const res = await raw(op.method as 'POST', fillPath(op), payload, 'application/json');
        expect(res.status, `${op.id} ${payload}: ${res.body}`).toBe(400);
        expect(['VALIDATION_ERROR', 'BAD_REQUEST']).toContain(res.json.error.code);
      }
    }
  });

  it('unknown body fields are a VALIDATION_ERROR naming the key in details.errors, on every operation with a body', async () => {
    for (const op of bodyOps) {
      const input = minimalInput(op) ?? {};
      const res = await raw(op.method as 'POST', fillPath(op), JSON.stringify({ ...bodyOf(op, input), surpriseField: 1 }), 'application/json');
      expectError(res, 400, 'VALIDATION_ERROR');
      expect(res.json.error.details.errors.join(' '), `${op.id}: ${res.body}`).toContain('surpriseField');
    }
  });

  it('a path parameter repeated in the body is a VALIDATION_ERROR', async () => {
    const c = (await a.request('POST', '/v1/contacts', {})).json.data;
    const res = await a.request('PATCH', `/v1/contacts/${c.id}`, { id: randomUUID() });
    expectError(res, 400, 'VALIDATION_ERROR');
    expect(res.json.error.details.properties.id.errors.length).toBeGreaterThan(0);
  });

  it('nested bodies give the nested details tree (properties.x.properties.y.errors, arrays as items)', async () => {
    // Any operation whose body has an object field declaring an array property (e.g. automation groupMetadata.tags).
    let found = false;
    for (const op of bodyOps) {
      const { properties } = inputSchema(op);
      for (const [field, schema] of Object.entries(properties)) {
        const objectSchema = [schema, ...((schema.anyOf as Record<string, unknown>[]) ?? [])].find((s) => s.type === 'object' && s.properties);
        const inner = Object.entries((objectSchema?.properties ?? {}) as Record<string, Record<string, unknown>>).find(([, s]) => s.type === 'array');
        if (!inner) continue;
        const input = minimalInput(op);
        if (!input) continue;
        found = true;
        const [arrayField] = inner;
        const body = { ...bodyOf(op, input), [field]: { [arrayField]: ['fine', { not: 'valid' }], extraKey: true } };
        const res = await raw(op.method as 'POST', fillPath(op), JSON.stringify(body), 'application/json');
        expectError(res, 400, 'VALIDATION_ERROR');
        const node = res.json.error.details.properties[field];
        expect(node.errors.join(' '), res.body).toContain('extraKey');
        const items = node.properties[arrayField].items;
        expect(items[0] ?? null, res.body).toBeNull();
        expect(items[1].errors.length, res.body).toBeGreaterThan(0);
      }
    }
    expect(found, 'an operation with a nested object body field holding an array').toBe(true);
  });

  it('a POST without body and without content type behaves like {}', async () => {
    const res = await raw('POST', '/v1/contacts');
    expect(res.status, res.body).toBe(201);
    expect(res.json.data.firstName).toBeNull();
    for (const op of bodyOps) {
      const withEmpty = await raw(op.method as 'POST', fillPath(op), JSON.stringify({}), 'application/json');
      const withNothing = await raw(op.method as 'POST', fillPath(op));
      // Same status and code: the empty body is `{}` whatever the operation answers to `{}`.
      expect(withNothing.status, `${op.id}: ${withNothing.body}`).toBe(withEmpty.status);
      expect(withNothing.json?.error?.code).toBe(withEmpty.json?.error?.code);
    }
  });

  it('an empty body declared as JSON is also read as {} (clients that always send the header)', async () => {
    const res = await raw('POST', '/v1/contacts', '', 'application/json');
    expect(res.status, res.body).toBe(201);
    const del = await raw('DELETE', `/v1/contacts/${res.json.data.id}`, '', 'application/json');
    expect(del.status, del.body).toBe(200);
  });

  it('a body on GET or DELETE is ignored, never an error', async () => {
    const res = await raw('DELETE', `/v1/contacts/${randomUUID()}`, JSON.stringify({ x: 1 }), 'application/json');
    expectError(res, 404, 'NOT_FOUND');
  });
});

describe('routes', () => {
  it('unknown routes are a 404 NOT_FOUND JSON, with or without a key, also under /.well-known', async () => {
    for (const url of ['/v1/nope', '/nope', '/v1', '/v2/contacts', '/v1/contacts/', '/v1/contacts/x/y/z', '/%F0%9F%92%A9']) {
      for (const key of [a.key, null]) {
        const res = await raw('GET', url, undefined, undefined, key);
        expectError(res, 404, 'NOT_FOUND');
      }
    }
    // /.well-known belongs to the OAuth side, which may answer in the OAuth error shape: still a JSON 404, never HTML.
    for (const url of ['/.well-known/nope', '/.well-known/openid-configuration', '/.well-known/oauth-protected-resource/nope/x']) {
      const res = await raw('GET', url, undefined, undefined, null);
      expect(res.status, url).toBe(404);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.json?.error?.code ?? res.json?.error, res.body).toMatch(/^(NOT_FOUND|not_found)$/);
      expect(res.headers['x-request-id']).toBeTruthy();
    }
    expectError(await raw('PUT', '/v1/contacts'), 404, 'NOT_FOUND');
  });

  it('HEAD answers like GET without a body; OPTIONS is a sane 4xx with the error shape', async () => {
    const head = await raw('HEAD', '/v1/contacts');
    expect(head.status).toBe(200);
    expect(head.body).toBe('');
    expect(head.headers['x-request-id']).toBeTruthy();
    expect((await raw('HEAD', '/v1/contacts', undefined, undefined, null)).status).toBe(401);
    expect((await raw('HEAD', `/v1/contacts/${randomUUID()}`)).status).toBe(404);
    expect((await raw('HEAD', '/v1/contacts/nope')).status).toBe(400);
    for (const url of ['/v1/contacts', `/v1/contacts/${randomUUID()}`, '/v1/nope']) {
      const res = await raw('OPTIONS', url);
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(res.status).toBeLessThan(500);
      expect(res.json.error.code).toBeTruthy();
      expect(res.headers['x-request-id']).toBeTruthy();
    }
  });

  it('sends no CORS headers: the API is called by servers with keys, a browser preflight is not answered', async () => {
    const origin = { origin: 'https://app.example' };
    const get = await t.app.inject({ method: 'GET', url: '/v1/contacts', headers: { ...origin, authorization: `Bearer ${a.key}` } });
    expect(get.statusCode).toBe(200);
    const preflight = await t.app.inject({ method: 'OPTIONS', url: '/v1/contacts', headers: { ...origin, 'access-control-request-method': 'GET' } });
    expect(preflight.statusCode).toBe(404);
    for (const res of [get, preflight]) {
      expect(Object.keys(res.headers).filter((h) => h.startsWith('access-control-'))).toEqual([]);
      expect(res.headers.vary ?? '').not.toMatch(/origin/i);
    }
  });
});

describe('list query strings', () => {
  let ids: string[] = [];
  let org: Tenant;

  beforeAll(async () => {
    // Five contacts with the same creation time (tie-break by id) and three older ones.
    org = await t.tenant();
    const same = new Date('2024-05-01T10:00:00.000Z');
    const rows = [
      ...Array.from({ length: 5 }, () => ({ organizationId: org.orgId, createdAt: same, updatedAt: same })),
      ...Array.from({ length: 3 }, (_, i) => ({ organizationId: org.orgId, createdAt: new Date(same.getTime() - (i + 1) * 1000), updatedAt: same })),
    ];
    const inserted = await t.database.db.insert(contacts).values(rows).returning({ id: contacts.id, createdAt: contacts.createdAt });
    ids = inserted
      .sort((x, y) => (x.createdAt.getTime() === y.createdAt.getTime() ? (x.id < y.id ? 1 : -1) : y.createdAt.getTime() - x.createdAt.getTime()))
      .map((r) => r.id);
  });

  const list = async (query: string) => org.request('GET', `/v1/contacts?${query}`);
  const idsOf = (res: TestResponse) => (res.json.data as { id: string }[]).map((r) => r.id);

  it('limit: 1 and 100 are accepted; 0, 101, "abc", "1.5", "", -1 and repeated values are a VALIDATION_ERROR on limit', async () => {
    expect(idsOf(await list('limit=1'))).toEqual([ids[0]]);
    expect(idsOf(await list('limit=100'))).toEqual(ids);
    expect((await list('limit=100')).json.meta.pagination).toEqual({ limit: 100, offset: 0, hasMore: false });
    expect((await list('')).json.meta.pagination.limit).toBe(10);
    for (const bad of ['0', '101', 'abc', '1.5', '', '-1', '1e2', '0x10', '99999999999999999999']) {
      const res = await list(`limit=${encodeURIComponent(bad)}`);
      expectError(res, 400, 'VALIDATION_ERROR');
      expect(res.json.error.details.properties.limit.errors.length, `limit=${bad}`).toBeGreaterThan(0);
    }
    expectError(await list('limit=1&limit=2'), 400, 'VALIDATION_ERROR');
  });

  it('offset: -1 and "abc" are errors; "null" and "" mean 0; beyond the end is an empty page', async () => {
    for (const bad of ['-1', 'abc', '1.5']) {
      const res = await list(`offset=${bad}`);
      expectError(res, 400, 'VALIDATION_ERROR');
      expect(res.json.error.details.properties.offset.errors.length).toBeGreaterThan(0);
    }
    for (const zero of ['null', '']) {
      const res = await list(`offset=${zero}&limit=2`);
      expect(res.status, res.body).toBe(200);
      expect(idsOf(res)).toEqual(ids.slice(0, 2));
      expect(res.json.meta.pagination.offset).toBe(0);
    }
    const beyond = await list('offset=1000');
    expect(beyond.json.data).toEqual([]);
    expect(beyond.json.meta.pagination).toEqual({ limit: 10, offset: 1000, hasMore: false });
  });

  it('sortOrder: asc, desc (default) and anything else a VALIDATION_ERROR', async () => {
    expect(idsOf(await list('limit=100&sortOrder=asc'))).toEqual([...ids].reverse());
    expect(idsOf(await list('limit=100&sortOrder=desc'))).toEqual(ids);
    for (const bad of ['ASC', 'up', '', '1']) {
      const res = await list(`sortOrder=${bad}`);
      expectError(res, 400, 'VALIDATION_ERROR');
      expect(res.json.error.details.properties.sortOrder.errors.length).toBeGreaterThan(0);
    }
  });

  it('hasMore: a full last page says true and the next page is empty; a short page says false', async () => {
    const full = await list('limit=4&offset=4');
    expect(idsOf(full)).toEqual(ids.slice(4));
    expect(full.json.meta.pagination).toEqual({ limit: 4, offset: 4, hasMore: true });
    const next = await list('limit=4&offset=8');
    expect(next.json.data).toEqual([]);
    expect(next.json.meta.pagination.hasMore).toBe(false);
    const short = await list('limit=5&offset=4');
    expect(short.json.meta.pagination.hasMore).toBe(false);
  });

  it('equal creation dates keep a stable order (by id): walking one item at a time visits each once', async () => {
    for (const sortOrder of ['desc', 'asc']) {
      const seen: string[] = [];
      for (let offset = 0; ; offset++) {
        const res = await list(`limit=1&offset=${offset}&sortOrder=${sortOrder}`);
        if (res.json.data.length === 0) break;
        seen.push(...idsOf(res));
      }
      expect(seen).toEqual(sortOrder === 'desc' ? ids : [...ids].reverse());
    }
  });

  it('unknown query parameters are a VALIDATION_ERROR naming them', async () => {
    const res = await list('limit=1&bogus=1');
    expectError(res, 400, 'VALIDATION_ERROR');
    expect(res.json.error.details.errors.join(' ')).toContain('bogus');
  });
});
