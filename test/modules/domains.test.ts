import { describe, expect, it } from 'vitest';
import { useTestApp, type Tenant } from '../helpers/app.js';

const { t, a, b } = useTestApp();

let n = 0;
const uniqueName = () => `example-${++n}-${Math.random().toString(36).slice(2, 8)}.com`;

const addDomain = async (who: Tenant, name = uniqueName()) => {
  const res = await who.request('POST', '/v1/domains', { name });
  expect(res.status, res.body).toBe(201);
  return res.json.data as { id: string; name: string };
};

const addRegistration = async (who: Tenant, domainId: string, body: Record<string, unknown> = {}) => {
  const res = await who.request('POST', `/v1/domains/${domainId}/registrations`, body);
  expect(res.status, res.body).toBe(201);
  return res.json.data as { id: string; [k: string]: unknown };
};

describe('domains', () => {
  it('adds, reads, lists and soft-deletes a domain; the name is normalised to lowercase', async () => {
    const res = await a.request('POST', '/v1/domains', { name: 'Shop.Example.COM' });
    expect(res.status).toBe(201);
    const d = res.json.data;
    expect(d).toMatchObject({ name: 'shop.example.com', organizationId: a.orgId, createdBy: a.keyId, deletedAt: null });
    expect(d.createdAt).toMatch(/Z$/);

    expect((await a.request('GET', `/v1/domains/${d.id}`)).json.data).toEqual(d);
    const list = await a.request('GET', '/v1/domains?limit=100');
    expect(list.status).toBe(200);
    expect(list.json.data.map((x: { id: string }) => x.id)).toContain(d.id);

    const del = await a.request('DELETE', `/v1/domains/${d.id}`);
    expect(del.status).toBe(200);
    expect(del.json.data.deletedAt).not.toBeNull();
    expect((await a.request('GET', `/v1/domains/${d.id}`)).status).toBe(404);
    expect((await a.request('DELETE', `/v1/domains/${d.id}`)).status).toBe(404);
    expect((await a.request('GET', '/v1/domains?limit=100')).json.data.map((x: { id: string }) => x.id)).not.toContain(d.id);
    // Once deleted, the name can be added again.
    expect((await a.request('POST', '/v1/domains', { name: 'shop.example.com' })).status).toBe(201);
  });

  it('stores internationalised names in punycode and drops a trailing dot', async () => {
    expect((await addDomain(a, 'Bücher.example')).name).toBe('xn--bcher-kva.example');
    expect((await addDomain(a, 'trailing-dot.org.')).name).toBe('trailing-dot.org');
  });

  it('validates the name and refuses a live duplicate in the same organization', async () => {
    for (const name of ['', 'localhost', 'no spaces.com', 'a..b.com', '-lead.com', 'trail-.com', 'under_score.com', '1.2.3.4', 'http://x.com', `${'a'.repeat(64)}.com`, 42, null]) {
      const res = await a.request('POST', '/v1/domains', { name });
      expect(res.status, JSON.stringify(name)).toBe(400);
      expect(res.json.error.code).toBe('VALIDATION_ERROR');
      expect(res.json.error.details.properties.name.errors).toHaveLength(1);
    }
    expect((await a.request('POST', '/v1/domains', {})).json.error.details.properties.name.errors).toHaveLength(1);
    expect((await a.request('POST', '/v1/domains', { name: 'x.com', extra: 1 })).status).toBe(400);

    const name = uniqueName();
    await addDomain(a, name);
    const dup = await a.request('POST', '/v1/domains', { name: name.toUpperCase() });
    expect(dup.status).toBe(400);
    expect(dup.json.error.code).toBe('VALIDATION_ERROR');
    expect(dup.json.error.details.properties.name.errors[0]).toMatch(/already exists/);
    // Another organization may hold the same name.
    expect((await b.request('POST', '/v1/domains', { name })).status).toBe(201);
  });

  it('refuses one of two concurrent creates of the same name with 400, never 500', async () => {
    const name = uniqueName();
    const results = await Promise.all([1, 2, 3].map(() => a.request('POST', '/v1/domains', { name })));
    expect(results.map((r) => r.status).sort()).toEqual([201, 400, 400]);
  });

  it('manages registrations: create with defaults, list with total, get, update (PUT, partial), delete', async () => {
    const d = await addDomain(a);
    const r = await addRegistration(a, d.id);
    expect(r).toMatchObject({
      domainId: d.id,
      state: 'pending',
      externalDomainId: null,
      externalId: null,
      autoRenew: true,
      whoisPrivacy: true,
      transferLock: true,
      period: 1,
      organizationId: a.orgId,
      createdBy: a.keyId,
      deletedAt: null,
    });
    const r2 = await addRegistration(a, d.id, {
      state: 'active',
      externalDomainId: 'dom-123',
      externalId: 'reg-456',
      autoRenew: false,
      whoisPrivacy: false,
      transferLock: false,
      period: 10,
    });
    expect(r2).toMatchObject({ state: 'active', externalDomainId: 'dom-123', externalId: 'reg-456', autoRenew: false, whoisPrivacy: false, transferLock: false, period: 10 });

    const list = await a.request('GET', `/v1/domains/${d.id}/registrations?sortOrder=asc`);
    expect(list.status).toBe(200);
    expect(list.json.data.map((x: { id: string }) => x.id)).toEqual([r.id, r2.id]);
    expect(list.json.meta.pagination).toMatchObject({ total: 2, hasMore: false });
    const page = await a.request('GET', `/v1/domains/${d.id}/registrations?limit=1`);
    expect(page.json.meta.pagination).toMatchObject({ limit: 1, total: 2, hasMore: true });

    expect((await a.request('GET', `/v1/domains/${d.id}/registrations/${r.id}`)).json.data).toEqual(r);

    const put = await a.request('PUT', `/v1/domains/${d.id}/registrations/${r.id}`, { state: 'active', period: 2 });
    expect(put.status).toBe(200);
    expect(put.json.data).toMatchObject({ state: 'active', period: 2, autoRenew: true, whoisPrivacy: true, externalId: null });
    const put2 = await a.request('PUT', `/v1/domains/${d.id}/registrations/${r2.id}`, { externalId: null, autoRenew: true });
    expect(put2.json.data).toMatchObject({ externalId: null, autoRenew: true, externalDomainId: 'dom-123', period: 10 });
    expect((await a.request('PUT', `/v1/domains/${d.id}/registrations/${r2.id}`, {})).status).toBe(200);

    const del = await a.request('DELETE', `/v1/domains/${d.id}/registrations/${r.id}`);
    expect(del.status).toBe(200);
    expect(del.json.data.deletedAt).not.toBeNull();
    expect((await a.request('GET', `/v1/domains/${d.id}/registrations/${r.id}`)).status).toBe(404);
    expect((await a.request('PUT', `/v1/domains/${d.id}/registrations/${r.id}`, { state: 'x' })).status).toBe(404);
    expect((await a.request('DELETE', `/v1/domains/${d.id}/registrations/${r.id}`)).status).toBe(404);
    const after = await a.request('GET', `/v1/domains/${d.id}/registrations`);
    expect(after.json.data.map((x: { id: string }) => x.id)).toEqual([r2.id]);
    expect(after.json.meta.pagination.total).toBe(1);
  });

  it('validates registration bodies', async () => {
    const d = await addDomain(a);
    const r = await addRegistration(a, d.id);
    const cases: [Record<string, unknown>, string][] = [
      [{ period: 0 }, 'period'],
      [{ period: 11 }, 'period'],
      [{ period: 1.5 }, 'period'],
      [{ autoRenew: 'yes' }, 'autoRenew'],
      [{ whoisPrivacy: 1 }, 'whoisPrivacy'],
      [{ transferLock: null }, 'transferLock'],
      [{ state: '' }, 'state'],
      [{ state: 'x'.repeat(65) }, 'state'],
      [{ externalId: 5 }, 'externalId'],
      [{ externalDomainId: 'x'.repeat(256) }, 'externalDomainId'],
    ];
    for (const [body, field] of cases) {
      for (const [method, url] of [
        ['POST', `/v1/domains/${d.id}/registrations`],
        ['PUT', `/v1/domains/${d.id}/registrations/${r.id}`],
      ] as const) {
        const res = await a.request(method, url, body);
        expect(res.status, `${method} ${JSON.stringify(body)}`).toBe(400);
        expect(res.json.error.details.properties[field].errors).toHaveLength(1);
      }
    }
    expect((await a.request('POST', `/v1/domains/${d.id}/registrations`, { domainId: d.id })).status).toBe(400);
    expect((await a.request('GET', `/v1/domains/${d.id}/registrations/not-a-uuid`)).status).toBe(400);
    expect((await a.request('GET', `/v1/domains/${d.id}/registrations`)).json.meta.pagination.total).toBe(1);
  });

  it('hides registrations of a deleted domain and of another domain', async () => {
    const d = await addDomain(a);
    const other = await addDomain(a);
    const r = await addRegistration(a, d.id);
    // The registration is reachable only under its own domain.
    expect((await a.request('GET', `/v1/domains/${other.id}/registrations/${r.id}`)).status).toBe(404);
    expect((await a.request('PUT', `/v1/domains/${other.id}/registrations/${r.id}`, { state: 'x' })).status).toBe(404);

    expect((await a.request('DELETE', `/v1/domains/${d.id}`)).status).toBe(200);
    expect((await a.request('GET', `/v1/domains/${d.id}/registrations`)).status).toBe(404);
    expect((await a.request('GET', `/v1/domains/${d.id}/registrations/${r.id}`)).status).toBe(404);
    expect((await a.request('POST', `/v1/domains/${d.id}/registrations`, {})).status).toBe(404);
    expect((await a.request('PUT', `/v1/domains/${d.id}/registrations/${r.id}`, { state: 'x' })).status).toBe(404);
  });

  it('keeps organizations apart: foreign domains and registrations are 404 and stay unchanged', async () => {
    const d = await addDomain(a);
    const r = await addRegistration(a, d.id, { state: 'active' });
    expect((await b.request('GET', `/v1/domains/${d.id}`)).status).toBe(404);
    expect((await b.request('DELETE', `/v1/domains/${d.id}`)).status).toBe(404);
    expect((await b.request('GET', `/v1/domains/${d.id}/registrations`)).status).toBe(404);
    expect((await b.request('POST', `/v1/domains/${d.id}/registrations`, {})).status).toBe(404);
    expect((await b.request('GET', `/v1/domains/${d.id}/registrations/${r.id}`)).status).toBe(404);
    expect((await b.request('PUT', `/v1/domains/${d.id}/registrations/${r.id}`, { state: 'hacked' })).status).toBe(404);
    expect((await b.request('DELETE', `/v1/domains/${d.id}/registrations/${r.id}`)).status).toBe(404);
    expect((await b.request('GET', '/v1/domains?limit=100')).json.data.map((x: { id: string }) => x.id)).not.toContain(d.id);
    expect((await a.request('GET', `/v1/domains/${d.id}/registrations/${r.id}`)).json.data.state).toBe('active');
    expect((await a.request('GET', `/v1/domains/${d.id}`)).status).toBe(200);
  });

  it('answers 401 without a key and 403 without the permission', async () => {
    const none = await t.app.inject({ method: 'GET', url: '/v1/domains' });
    expect(none.statusCode).toBe(401);
    expect(JSON.parse(none.body).error.code).toBe('UNAUTHORIZED');
    const d = await addDomain(a);
    const r = await addRegistration(a, d.id);
    const reader = await a.keyWith(['domains:read']);
    for (const url of ['/v1/domains', `/v1/domains/${d.id}`, `/v1/domains/${d.id}/registrations`, `/v1/domains/${d.id}/registrations/${r.id}`]) {
      expect((await reader.request('GET', url)).status, url).toBe(200);
    }
    for (const [method, url, body] of [
      ['POST', '/v1/domains', { name: uniqueName() }],
      ['DELETE', `/v1/domains/${d.id}`, undefined],
      ['POST', `/v1/domains/${d.id}/registrations`, {}],
      ['PUT', `/v1/domains/${d.id}/registrations/${r.id}`, { state: 'x' }],
      ['DELETE', `/v1/domains/${d.id}/registrations/${r.id}`, undefined],
    ] as const) {
      const denied = await reader.request(method, url, body);
      expect(denied.status, `${method} ${url}`).toBe(403);
      expect(denied.json.error.code).toBe('FORBIDDEN');
    }
    expect((await (await a.keyWith(['folders:write'])).request('GET', '/v1/domains')).status).toBe(403);
    expect((await a.request('GET', `/v1/domains/${d.id}/registrations/${r.id}`)).json.data.state).toBe('pending');
  });
});
