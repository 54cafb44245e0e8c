import { describe, expect, it } from 'vitest';
import { useTestApp, type Tenant } from '../helpers/app.js';
import { checkPagination, newestFirst } from '../helpers/pagination.js';

const { t, a, b } = useTestApp();

async function create(tenant: Tenant, body: Record<string, unknown> = {}) {
  const res = await tenant.request('POST', '/v1/businesses', { name: 'Acme', ...body });
  expect(res.status, res.body).toBe(201);
  return res.json.data;
}

describe('businesses', () => {
  it('creates, reads, updates and soft-deletes', async () => {
    const created = await a.request('POST', '/v1/businesses', { name: '  Acme Ltd ', data: { vat: 'GB123' } });
    expect(created.status).toBe(201);
    const biz = created.json.data;
    expect(biz).toMatchObject({ name: 'Acme Ltd', data: { vat: 'GB123' }, organizationId: a.orgId, createdBy: a.keyId, deletedAt: null });
    expect(Object.keys(biz).sort()).toEqual(['createdAt', 'createdBy', 'data', 'deletedAt', 'id', 'name', 'organizationId', 'updatedAt']);
    expect((await create(a, { data: undefined })).data).toEqual({});

    const got = await a.request('GET', `/v1/businesses/${biz.id}`);
    expect(got.status).toBe(200);
    expect(got.json.data).toEqual(biz);

    const renamed = await a.request('PATCH', `/v1/businesses/${biz.id}`, { name: 'Acme Group' });
    expect(renamed.status).toBe(200);
    expect(renamed.json.data).toMatchObject({ name: 'Acme Group', data: { vat: 'GB123' }, createdBy: a.keyId });
    const redata = await a.request('PATCH', `/v1/businesses/${biz.id}`, { data: { tier: 'gold' } });
    expect(redata.json.data).toMatchObject({ name: 'Acme Group', data: { tier: 'gold' } });
    expect(Date.parse(redata.json.data.updatedAt)).toBeGreaterThanOrEqual(Date.parse(biz.updatedAt));

    const del = await a.request('DELETE', `/v1/businesses/${biz.id}`);
    expect(del.status).toBe(200);
    expect(del.json.data.deletedAt).not.toBeNull();
    expect((await a.request('GET', `/v1/businesses/${biz.id}`)).status).toBe(404);
    expect((await a.request('PATCH', `/v1/businesses/${biz.id}`, { name: 'Zombie' })).status).toBe(404);
    expect((await a.request('DELETE', `/v1/businesses/${biz.id}`)).status).toBe(404);
    const list = await a.request('GET', '/v1/businesses?limit=100');
    expect(list.json.data.map((x: { id: string }) => x.id)).not.toContain(biz.id);
  });

  it('validates bodies', async () => {
    const biz = await create(a);
    const cases: [string, string, Record<string, unknown>, string][] = [
      ['POST', '/v1/businesses', {}, 'name'],
      ['POST', '/v1/businesses', { name: '' }, 'name'],
      ['POST', '/v1/businesses', { name: '   ' }, 'name'],
      ['POST', '/v1/businesses', { name: 'x'.repeat(256) }, 'name'],
      ['POST', '/v1/businesses', { name: 'A', data: [] }, 'data'],
      ['POST', '/v1/businesses', { name: 'A', data: 'text' }, 'data'],
      ['PATCH', `/v1/businesses/${biz.id}`, { name: null }, 'name'],
      ['PATCH', `/v1/businesses/${biz.id}`, { data: null }, 'data'],
    ];
    for (const [method, url, body, field] of cases) {
      const res = await a.request(method as 'POST', url, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json.error.code).toBe('VALIDATION_ERROR');
      expect(res.json.error.details.properties[field].errors.length).toBeGreaterThan(0);
    }
    for (const body of [{ name: 'A', createdBy: a.keyId }, { name: 'A', organizationId: b.orgId }]) {
      const res = await a.request('POST', '/v1/businesses', body);
      expect(res.status).toBe(400);
      expect(res.json.error.details.errors[0]).toMatch(/createdBy|organizationId/);
    }
    expect((await a.request('PATCH', `/v1/businesses/${biz.id}`, { id: biz.id })).status).toBe(400);
    expect((await a.request('GET', '/v1/businesses/123')).status).toBe(400);
    expect((await a.request('GET', `/v1/businesses/${biz.id}`)).json.data.name).toBe('Acme');
  });

  it('paginates', async () => {
    const tenant = await t.tenant();
    const made = [];
    for (let i = 0; i < 7; i++) made.push(await create(tenant, { name: `B${i}` }));
    await checkPagination(tenant, '/v1/businesses', newestFirst(made), false);
  });

  it('answers 401 without a key and 403 without the permission', async () => {
    const biz = await create(a);
    expect((await t.app.inject({ method: 'GET', url: '/v1/businesses' })).statusCode).toBe(401);
    expect((await t.app.inject({ method: 'GET', url: `/v1/businesses/${biz.id}`, headers: { authorization: 'Bearer nope' } })).statusCode).toBe(401);
    const reader = await a.keyWith(['businesses:read']);
    expect((await reader.request('GET', `/v1/businesses/${biz.id}`)).status).toBe(200);
    for (const [method, url, body] of [
      ['POST', '/v1/businesses', { name: 'X' }],
      ['PATCH', `/v1/businesses/${biz.id}`, { name: 'X' }],
      ['DELETE', `/v1/businesses/${biz.id}`, undefined],
    ] as const) {
      const res = await reader.request(method, url, body);
      expect(res.status).toBe(403);
      expect(res.json.error.code).toBe('FORBIDDEN');
    }
    const customersOnly = await a.keyWith(['customers:read']);
    expect((await customersOnly.request('GET', '/v1/businesses')).status).toBe(403);
    const writer = await a.keyWith(['businesses:write']);
    const made = await writer.request('POST', '/v1/businesses', { name: 'By writer' });
    expect(made.json.data.createdBy).toBe(writer.keyId);
    expect((await a.request('GET', `/v1/businesses/${biz.id}`)).json.data.name).toBe('Acme');
  });

  it("treats another organization's business as a 404 and leaves it unchanged", async () => {
    const biz = await create(a, { name: 'Private' });
    expect((await b.request('GET', `/v1/businesses/${biz.id}`)).status).toBe(404);
    expect((await b.request('PATCH', `/v1/businesses/${biz.id}`, { name: 'Hacked' })).status).toBe(404);
    expect((await b.request('DELETE', `/v1/businesses/${biz.id}`)).status).toBe(404);
    expect((await b.request('GET', '/v1/businesses?limit=100')).json.data.map((x: { id: string }) => x.id)).not.toContain(biz.id);
    expect((await a.request('GET', `/v1/businesses/${biz.id}`)).json.data).toMatchObject({ name: 'Private', deletedAt: null });
  });
});
