import { beforeAll, describe, expect, it } from 'vitest';
import { useTestApp, type Tenant } from '../helpers/app.js';
import { checkPagination, newestFirst } from '../helpers/pagination.js';

const { t, a, b } = useTestApp();
let bizA: { id: string };
let bizB: { id: string };
let contactA: { id: string };
let contactB: { id: string };

const UNKNOWN = '3f0c3bd2-5a3e-4b64-9d7e-2f3f7c1f0a55';

beforeAll(async () => {
  bizA = (await a.request('POST', '/v1/businesses', { name: 'Shop A' })).json.data;
  bizB = (await b.request('POST', '/v1/businesses', { name: 'Shop B' })).json.data;
  contactA = (await a.request('POST', '/v1/contacts', { name: 'Ada' })).json.data;
  contactB = (await b.request('POST', '/v1/contacts', { name: 'Bob' })).json.data;
});
async function customer(tenant: Tenant, body: Record<string, unknown> = {}) {
  const res = await tenant.request('POST', '/v1/customers', { name: 'Grace', ...body });
  expect(res.status, res.body).toBe(201);
  return res.json.data;
}

const TX = { amount: '49.90', currency: 'EUR', status: 'completed', type: 'payment' };

async function transaction(tenant: Tenant, customerId: string, body: Record<string, unknown> = {}) {
  const res = await tenant.request('POST', `/v1/customers/${customerId}/transactions`, { ...TX, ...body });
  expect(res.status, res.body).toBe(201);
  return res.json.data;
}

const fieldOf = (res: { json: { error: { details: { properties: Record<string, { errors: string[] }> } } } }, field: string) =>
  res.json.error.details.properties[field]?.errors ?? [];

describe('customers', () => {
  it('creates, reads, updates and soft-deletes', async () => {
    const body = {
      businessId: bizA.id,
      contactId: contactA.id,
      type: 'company',
      name: 'Grace Hopper',
      email: 'grace@example.com',
      phone: '+1 555 0100 ext. 7',
      notes: 'Prefers email',
      status: 'active',
      customerSince: '2024-02-29T23:00:00-01:00',
      data: { segment: 'enterprise' },
    };
    const created = await a.request('POST', '/v1/customers', body);
    expect(created.status).toBe(201);
    const c = created.json.data;
    expect(c).toMatchObject({ ...body, customerSince: '2024-03-01T00:00:00.000Z', organizationId: a.orgId, deletedAt: null });
    expect(Object.keys(c).sort()).toEqual(
      ['id', 'createdAt', 'updatedAt', 'deletedAt', 'organizationId', 'businessId', 'contactId', 'type', 'name', 'email', 'phone', 'notes', 'status', 'customerSince', 'data'].sort(),
    );

    const got = await a.request('GET', `/v1/customers/${c.id}`);
    expect(got.status).toBe(200);
    expect(got.json.data).toEqual(c);

    const patched = await a.request('PATCH', `/v1/customers/${c.id}`, { status: 'inactive', businessId: null, notes: null });
    expect(patched.status).toBe(200);
    expect(patched.json.data).toMatchObject({ status: 'inactive', businessId: null, notes: null, contactId: contactA.id, name: 'Grace Hopper', email: 'grace@example.com' });

    const del = await a.request('DELETE', `/v1/customers/${c.id}`);
    expect(del.status).toBe(200);
    expect(del.json.data.deletedAt).not.toBeNull();
    expect((await a.request('GET', `/v1/customers/${c.id}`)).status).toBe(404);
    expect((await a.request('PATCH', `/v1/customers/${c.id}`, { name: 'X' })).status).toBe(404);
    expect((await a.request('DELETE', `/v1/customers/${c.id}`)).status).toBe(404);
    expect((await a.request('GET', '/v1/customers?limit=100')).json.data.map((x: { id: string }) => x.id)).not.toContain(c.id);
  });

  it('accepts an empty body: every field is optional', async () => {
    const res = await a.request('POST', '/v1/customers', {});
    expect(res.status).toBe(201);
    expect(res.json.data).toMatchObject({ name: null, businessId: null, contactId: null, customerSince: null, data: {} });
  });

  it('validates bodies', async () => {
    const c = await customer(a);
    const cases: [Record<string, unknown>, string][] = [
      [{ email: 'not-an-email' }, 'email'],
      [{ name: '' }, 'name'],
      [{ name: 'x'.repeat(256) }, 'name'],
      [{ type: 'x'.repeat(65) }, 'type'],
      [{ status: 7 }, 'status'],
      [{ customerSince: '2024-01-01' }, 'customerSince'],
      [{ businessId: 'abc' }, 'businessId'],
      [{ contactId: 12 }, 'contactId'],
      [{ data: [1] }, 'data'],
      [{ phone: 'x'.repeat(65) }, 'phone'],
    ];
    for (const [body, field] of cases) {
      for (const [method, url] of [
        ['POST', '/v1/customers'],
        ['PATCH', `/v1/customers/${c.id}`],
      ] as const) {
        const res = await a.request(method, url, body);
        expect(res.status, `${method} ${JSON.stringify(body)}`).toBe(400);
        expect(res.json.error.code).toBe('VALIDATION_ERROR');
        expect(fieldOf(res, field).length, field).toBeGreaterThan(0);
      }
    }
    const unknown = await a.request('POST', '/v1/customers', { name: 'A', vip: true });
    expect(unknown.status).toBe(400);
    expect(unknown.json.error.details.errors[0]).toMatch(/vip/);
    expect((await a.request('GET', `/v1/customers/${c.id}`)).json.data.name).toBe('Grace');
  });

  it('requires businessId and contactId to name live records of the organization', async () => {
    const c = await customer(a);
    const deadBiz = (await a.request('POST', '/v1/businesses', { name: 'Closed' })).json.data;
    await a.request('DELETE', `/v1/businesses/${deadBiz.id}`);
    const deadContact = (await a.request('POST', '/v1/contacts', { name: 'Gone' })).json.data;
    await a.request('DELETE', `/v1/contacts/${deadContact.id}`);

    for (const [field, id] of [
      ['businessId', bizB.id],
      ['businessId', deadBiz.id],
      ['businessId', UNKNOWN],
      ['contactId', contactB.id],
      ['contactId', deadContact.id],
      ['contactId', UNKNOWN],
    ] as const) {
      for (const [method, url] of [
        ['POST', '/v1/customers'],
        ['PATCH', `/v1/customers/${c.id}`],
      ] as const) {
        const res = await a.request(method, url, { [field]: id });
        expect(res.status, `${method} ${field}`).toBe(400);
        expect(res.json.error.code).toBe('VALIDATION_ERROR');
        expect(fieldOf(res, field)).toHaveLength(1);
      }
    }
    expect((await a.request('GET', `/v1/customers/${c.id}`)).json.data).toMatchObject({ businessId: null, contactId: null });
    // An unknown customer is a 404 even when the body is also wrong.
    expect((await a.request('PATCH', `/v1/customers/${UNKNOWN}`, { businessId: bizB.id })).status).toBe(404);
  });

  it('paginates', async () => {
    const tenant = await t.tenant();
    const made = [];
    for (let i = 0; i < 6; i++) made.push(await customer(tenant, { name: `C${i}` }));
    await checkPagination(tenant, '/v1/customers', newestFirst(made), false);
  });
});

describe('customer transactions', () => {
  it('creates, lists, reads, updates and soft-deletes', async () => {
    const c = await customer(a, { businessId: bizA.id });
    const body = { amount: '-1234.500000', currency: 'USD', status: 'refunded', type: 'refund', description: 'Damaged item', transactionDate: '2025-01-31T12:00:00Z' };
    const created = await a.request('POST', `/v1/customers/${c.id}/transactions`, body);
    expect(created.status).toBe(201);
    const tx = created.json.data;
    expect(tx).toMatchObject({ ...body, transactionDate: '2025-01-31T12:00:00.000Z', customerId: c.id, businessId: bizA.id, organizationId: a.orgId, deletedAt: null });
    expect(Object.keys(tx).sort()).toEqual(
      ['id', 'createdAt', 'updatedAt', 'deletedAt', 'organizationId', 'businessId', 'customerId', 'amount', 'currency', 'status', 'type', 'description', 'transactionDate'].sort(),
    );
    expect(tx.amount).toBe('-1234.500000');

    const got = await a.request('GET', `/v1/customers/${c.id}/transactions/${tx.id}`);
    expect(got.status).toBe(200);
    expect(got.json.data).toEqual(tx);

    const list = await a.request('GET', `/v1/customers/${c.id}/transactions`);
    expect(list.json.data.map((x: { id: string }) => x.id)).toEqual([tx.id]);
    expect(list.json.meta.pagination).toEqual({ limit: 10, offset: 0, hasMore: false, total: 1 });

    const del = await a.request('DELETE', `/v1/customers/${c.id}/transactions/${tx.id}`);
    expect(del.status).toBe(200);
    expect(del.json.data.deletedAt).not.toBeNull();
    expect((await a.request('GET', `/v1/customers/${c.id}/transactions/${tx.id}`)).status).toBe(404);
    expect((await a.request('PUT', `/v1/customers/${c.id}/transactions/${tx.id}`, { status: 'x' })).status).toBe(404);
    expect((await a.request('DELETE', `/v1/customers/${c.id}/transactions/${tx.id}`)).status).toBe(404);
    expect((await a.request('GET', `/v1/customers/${c.id}/transactions`)).json.meta.pagination.total).toBe(0);
  });

  it("defaults businessId to the customer's business; null means none", async () => {
    const c = await customer(a, { businessId: bizA.id });
    expect((await transaction(a, c.id)).businessId).toBe(bizA.id);
    expect((await transaction(a, c.id, { businessId: null })).businessId).toBeNull();
    const other = (await a.request('POST', '/v1/businesses', { name: 'Other shop' })).json.data;
    expect((await transaction(a, c.id, { businessId: other.id })).businessId).toBe(other.id);
    const plain = await customer(a);
    expect(await transaction(a, plain.id)).toMatchObject({ businessId: null, description: null, transactionDate: null });
  });

  it('updates with PUT from partial bodies', async () => {
    const c = await customer(a);
    const tx = await transaction(a, c.id, { description: 'first' });
    const put = await a.request('PUT', `/v1/customers/${c.id}/transactions/${tx.id}`, { status: 'failed' });
    expect(put.status).toBe(200);
    expect(put.json.data).toMatchObject({ ...TX, status: 'failed', description: 'first' });

    const full = await a.request('PUT', `/v1/customers/${c.id}/transactions/${tx.id}`, {
      businessId: bizA.id,
      amount: '10',
      currency: 'GBP',
      status: 'pending',
      type: 'invoice',
      description: null,
      transactionDate: '2025-02-01T00:00:00+01:00',
    });
    expect(full.status).toBe(200);
    expect(full.json.data).toMatchObject({ businessId: bizA.id, amount: '10', currency: 'GBP', status: 'pending', type: 'invoice', description: null, transactionDate: '2025-01-31T23:00:00.000Z' });
    const cleared = await a.request('PUT', `/v1/customers/${c.id}/transactions/${tx.id}`, { transactionDate: null, businessId: null });
    expect(cleared.json.data).toMatchObject({ transactionDate: null, businessId: null, amount: '10' });
    expect((await a.request('PUT', `/v1/customers/${c.id}/transactions/${tx.id}`, {})).json.data.amount).toBe('10');

    expect((await a.request('PUT', `/v1/customers/${c.id}/transactions/${UNKNOWN}`, { status: 'x' })).status).toBe(404);
    // An unknown transaction is a 404 whatever the body names.
    expect((await a.request('PUT', `/v1/customers/${c.id}/transactions/${UNKNOWN}`, { businessId: UNKNOWN })).status).toBe(404);
    // A transaction addressed under another customer is not found either.
    const c2 = await customer(a);
    expect((await a.request('PUT', `/v1/customers/${c2.id}/transactions/${tx.id}`, { status: 'x' })).status).toBe(404);
    expect((await a.request('GET', `/v1/customers/${c2.id}/transactions/${tx.id}`)).status).toBe(404);
    expect((await a.request('DELETE', `/v1/customers/${c2.id}/transactions/${tx.id}`)).status).toBe(404);
    expect((await a.request('GET', `/v1/customers/${c.id}/transactions/${tx.id}`)).json.data).toMatchObject({ status: 'pending', deletedAt: null });
  });

  it('validates amounts, currencies and the other fields', async () => {
    const c = await customer(a);
    const tx = await transaction(a, c.id);
    for (const amount of ['12.5', '-0.01', '999999999999999.999999', '0']) {
      expect((await transaction(a, c.id, { amount })).amount).toBe(amount);
    }
    const cases: [Record<string, unknown>, string][] = [
      [{ amount: 12.5 }, 'amount'],
      [{ amount: '12,50' }, 'amount'],
      [{ amount: '1e5' }, 'amount'],
      [{ amount: '' }, 'amount'],
      [{ amount: '.5' }, 'amount'],
      [{ amount: '1.1234567' }, 'amount'],
      [{ amount: '1234567890123456' }, 'amount'],
      [{ amount: ' 1' }, 'amount'],
      [{ currency: 'eur' }, 'currency'],
      [{ currency: 'EURO' }, 'currency'],
      [{ currency: 'E1R' }, 'currency'],
      [{ status: '' }, 'status'],
      [{ type: 'x'.repeat(65) }, 'type'],
      [{ description: 5 }, 'description'],
      [{ transactionDate: 'today' }, 'transactionDate'],
      [{ businessId: 'nope' }, 'businessId'],
    ];
    for (const [body, field] of cases) {
      const post = await a.request('POST', `/v1/customers/${c.id}/transactions`, { ...TX, ...body });
      expect(post.status, `POST ${JSON.stringify(body)}`).toBe(400);
      expect(fieldOf(post, field).length, field).toBeGreaterThan(0);
      const put = await a.request('PUT', `/v1/customers/${c.id}/transactions/${tx.id}`, body);
      expect(put.status, `PUT ${JSON.stringify(body)}`).toBe(400);
      expect(fieldOf(put, field).length, field).toBeGreaterThan(0);
    }
    const missing = await a.request('POST', `/v1/customers/${c.id}/transactions`, {});
    expect(missing.status).toBe(400);
    for (const field of ['amount', 'currency', 'status', 'type']) expect(fieldOf(missing, field), field).toHaveLength(1);

    const before = (await a.request('GET', `/v1/customers/${c.id}/transactions`)).json.meta.pagination.total;
    const deadBiz = (await a.request('POST', '/v1/businesses', { name: 'Closed' })).json.data;
    await a.request('DELETE', `/v1/businesses/${deadBiz.id}`);
    for (const id of [bizB.id, deadBiz.id, UNKNOWN]) {
      const post = await a.request('POST', `/v1/customers/${c.id}/transactions`, { ...TX, businessId: id });
      expect(post.status).toBe(400);
      expect(fieldOf(post, 'businessId')).toEqual(['No business with this id exists in the organization']);
      const put = await a.request('PUT', `/v1/customers/${c.id}/transactions/${tx.id}`, { businessId: id, status: 'refused' });
      expect(put.status).toBe(400);
      expect(fieldOf(put, 'businessId')).toHaveLength(1);
    }
    // A refused write wrote nothing: no transaction, no change, no event.
    expect((await a.request('GET', `/v1/customers/${c.id}/transactions`)).json.meta.pagination.total).toBe(before);
    expect((await a.request('GET', `/v1/customers/${c.id}/transactions/${tx.id}`)).json.data.status).not.toBe('refused');
    const recorded = (await a.request('GET', '/v1/events?type=customer.transaction.updated&limit=100')).json.data as { resourceId: string }[];
    expect(recorded.filter((e) => e.resourceId === tx.id)).toEqual([]);
    expect((await a.request('PUT', `/v1/customers/${c.id}/transactions/${tx.id}`, { customerId: c.id })).status).toBe(400);
    expect((await a.request('GET', `/v1/customers/${c.id}/transactions/not-a-uuid`)).status).toBe(400);
    expect((await a.request('GET', `/v1/customers/${c.id}/transactions/${tx.id}`)).json.data).toMatchObject(TX);
  });

  it('answers 404 under an unknown, foreign or deleted customer', async () => {
    const c = await customer(a);
    const tx = await transaction(a, c.id);
    for (const [tenant, customerId] of [
      [a, UNKNOWN],
      [b, c.id],
    ] as const) {
      expect((await tenant.request('GET', `/v1/customers/${customerId}/transactions`)).status).toBe(404);
      expect((await tenant.request('POST', `/v1/customers/${customerId}/transactions`, TX)).status).toBe(404);
      // The customer's 404 comes before the business the body names.
      expect((await tenant.request('POST', `/v1/customers/${customerId}/transactions`, { ...TX, businessId: UNKNOWN })).status).toBe(404);
      expect((await tenant.request('GET', `/v1/customers/${customerId}/transactions/${tx.id}`)).status).toBe(404);
      expect((await tenant.request('PUT', `/v1/customers/${customerId}/transactions/${tx.id}`, { status: 'hacked' })).status).toBe(404);
      expect((await tenant.request('DELETE', `/v1/customers/${customerId}/transactions/${tx.id}`)).status).toBe(404);
    }
    expect((await a.request('GET', `/v1/customers/${c.id}/transactions/${tx.id}`)).json.data).toMatchObject({ status: 'completed', deletedAt: null });

    // Deleting the customer deletes its transactions with it.
    expect((await a.request('DELETE', `/v1/customers/${c.id}`)).status).toBe(200);
    expect((await a.request('GET', `/v1/customers/${c.id}/transactions`)).status).toBe(404);
    expect((await a.request('POST', `/v1/customers/${c.id}/transactions`, TX)).status).toBe(404);
    expect((await a.request('GET', `/v1/customers/${c.id}/transactions/${tx.id}`)).status).toBe(404);
    expect((await a.request('PUT', `/v1/customers/${c.id}/transactions/${tx.id}`, { status: 'x' })).status).toBe(404);
  });

  it('paginates with a total', async () => {
    const c = await customer(a);
    const made = [];
    for (let i = 0; i < 6; i++) made.push(await transaction(a, c.id, { amount: String(i) }));
    const other = await customer(a);
    await transaction(a, other.id);
    await checkPagination(a, `/v1/customers/${c.id}/transactions`, newestFirst(made), true);
  });
});

describe('customers: security', () => {
  it('answers 401 without a key and 403 without the permission', async () => {
    const c = await customer(a);
    const tx = await transaction(a, c.id);
    for (const url of ['/v1/customers', `/v1/customers/${c.id}`, `/v1/customers/${c.id}/transactions`]) {
      const res = await t.app.inject({ method: 'GET', url });
      expect(res.statusCode).toBe(401);
      expect(JSON.parse(res.body).error.code).toBe('UNAUTHORIZED');
    }
    const reader = await a.keyWith(['customers:read']);
    expect((await reader.request('GET', `/v1/customers/${c.id}/transactions/${tx.id}`)).status).toBe(200);
    for (const [method, url, body] of [
      ['POST', '/v1/customers', {}],
      ['PATCH', `/v1/customers/${c.id}`, { name: 'X' }],
      ['DELETE', `/v1/customers/${c.id}`, undefined],
      ['POST', `/v1/customers/${c.id}/transactions`, TX],
      ['PUT', `/v1/customers/${c.id}/transactions/${tx.id}`, { status: 'x' }],
      ['DELETE', `/v1/customers/${c.id}/transactions/${tx.id}`, undefined],
    ] as const) {
      const res = await reader.request(method, url, body);
      expect(res.status, `${method} ${url}`).toBe(403);
      expect(res.json.error.code).toBe('FORBIDDEN');
    }
    const businessesOnly = await a.keyWith(['businesses:read', 'businesses:write']);
    for (const url of ['/v1/customers', `/v1/customers/${c.id}`, `/v1/customers/${c.id}/transactions`, `/v1/customers/${c.id}/transactions/${tx.id}`]) {
      expect((await businessesOnly.request('GET', url)).status, url).toBe(403);
    }
    expect((await a.request('GET', `/v1/customers/${c.id}`)).json.data).toMatchObject({ name: 'Grace', deletedAt: null });
  });

  it("treats another organization's customer as a 404 and leaves it unchanged", async () => {
    const c = await customer(a, { name: 'Private' });
    expect((await b.request('GET', `/v1/customers/${c.id}`)).status).toBe(404);
    expect((await b.request('PATCH', `/v1/customers/${c.id}`, { name: 'Hacked' })).status).toBe(404);
    expect((await b.request('DELETE', `/v1/customers/${c.id}`)).status).toBe(404);
    expect((await b.request('GET', '/v1/customers?limit=100')).json.data.map((x: { id: string }) => x.id)).not.toContain(c.id);
    expect((await a.request('GET', `/v1/customers/${c.id}`)).json.data).toMatchObject({ name: 'Private', deletedAt: null });
  });
});
