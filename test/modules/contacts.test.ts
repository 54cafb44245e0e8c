import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';

const { t, a, b } = useTestApp();

describe('contacts', () => {
  it('creates, reads, embeds children, updates and soft-deletes', async () => {
    const created = await a.request('POST', '/v1/contacts', { firstName: 'Ada', lastName: 'Lovelace', data: { vip: true } });
    expect(created.status).toBe(201);
    const c = created.json.data;
    expect(c).toMatchObject({ firstName: 'Ada', lastName: 'Lovelace', data: { vip: true }, emails: [], phoneNumbers: [], addresses: [], deletedAt: null, organizationId: a.orgId });
    expect(c.createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

    const phone = await a.request('POST', `/v1/contacts/${c.id}/phone-numbers`, { phoneNumber: '+44 20 7946 0000', label: 'work' });
    expect(phone.status).toBe(201);
    expect(phone.json.data).toMatchObject({ phoneNumber: '+442079460000', countryCode: '44', nationalNumber: '2079460000', label: 'work', contactId: c.id });

    const email = await a.request('POST', `/v1/contacts/${c.id}/emails`, { email: 'ada@example.com', label: 'work' });
    expect(email.status).toBe(201);
    const address = await a.request('POST', `/v1/contacts/${c.id}/addresses`, { address1: '12 St James Sq', city: 'London', country: 'GB' });
    expect(address.status).toBe(201);
    expect(address.json.data).toMatchObject({ address2: '', label: 'other', city: 'London' });

    const got = await a.request('GET', `/v1/contacts/${c.id}`);
    expect(got.status).toBe(200);
    expect(got.json.data.emails).toHaveLength(1);
    expect(got.json.data.phoneNumbers).toHaveLength(1);
    expect(got.json.data.addresses).toHaveLength(1);
    expect(got.json.data.emails[0].createdAt).toMatch(/Z$/);

    const addr = await a.request('GET', `/v1/contacts/${c.id}/addresses/${address.json.data.id}`);
    expect(addr.json.data.id).toBe(address.json.data.id);

    const patched = await a.request('PATCH', `/v1/contacts/${c.id}`, { company: 'Analytical Engines', lastName: null });
    expect(patched.status).toBe(200);
    expect(patched.json.data).toMatchObject({ firstName: 'Ada', lastName: null, company: 'Analytical Engines' });

    const del = await a.request('DELETE', `/v1/contacts/${c.id}`);
    expect(del.status).toBe(200);
    expect(del.json.data.deletedAt).not.toBeNull();
    expect((await a.request('GET', `/v1/contacts/${c.id}`)).status).toBe(404);
    expect((await a.request('GET', `/v1/contacts/${c.id}/addresses/${address.json.data.id}`)).status).toBe(404);
    const list = await a.request('GET', '/v1/contacts?limit=100');
    expect(list.json.data.map((x: { id: string }) => x.id)).not.toContain(c.id);
  });

  it.each([
    { segment: 'emails', create: { email: 'ada@example.com' }, update: { label: 'home' }, updated: { email: 'ada@example.com', label: 'home' } },
    {
      segment: 'phone-numbers',
      create: { phoneNumber: '+44 20 7946 0000' },
      // A new number is stored as E.164 again, its country code and national number derived anew.
      update: { phoneNumber: '+1 212 555 0123' },
      updated: { phoneNumber: '+12125550123', countryCode: '1', nationalNumber: '2125550123', label: 'other' },
    },
    { segment: 'addresses', create: { city: 'London' }, update: { city: 'Paris', country: 'FR' }, updated: { city: 'Paris', country: 'FR', address1: '' } },
  ])("lists, gets, updates and deletes a contact's $segment", async ({ segment, create, update, updated }) => {
    const contact = (await a.request('POST', '/v1/contacts', { firstName: 'Grace' })).json.data;
    const base = `/v1/contacts/${contact.id}/${segment}`;
    const child = (await a.request('POST', base, create)).json.data;
    expect(child).toMatchObject({ contactId: contact.id, deletedAt: null });

    const list = await a.request('GET', base);
    expect(list.status).toBe(200);
    expect(list.json.data.map((x: { id: string }) => x.id)).toEqual([child.id]);
    expect(list.json.meta.pagination.total).toBe(1);
    expect((await a.request('GET', `${base}/${child.id}`)).json.data).toEqual(child);

    const patched = await a.request('PATCH', `${base}/${child.id}`, update);
    expect(patched.status, JSON.stringify(patched.json)).toBe(200);
    expect(patched.json.data).toMatchObject({ id: child.id, ...updated });
    expect((await a.request('GET', `/v1/contacts/${contact.id}`)).json.data).toMatchObject({ [segment === 'phone-numbers' ? 'phoneNumbers' : segment]: [expect.objectContaining(updated)] });

    const deleted = await a.request('DELETE', `${base}/${child.id}`);
    expect(deleted.status).toBe(200);
    expect(deleted.json.data.deletedAt).not.toBeNull();
    expect((await a.request('GET', `${base}/${child.id}`)).status).toBe(404);
    expect((await a.request('PATCH', `${base}/${child.id}`, update)).status).toBe(404);
    expect((await a.request('GET', base)).json.data).toEqual([]);

    // Under a contact that is not there: list and create are a 404 naming the contact.
    const missing = `/v1/contacts/9b2f6c1e-3f1a-4c59-8d1e-2f1b7e0c4a11/${segment}`;
    for (const res of [await a.request('GET', missing), await a.request('POST', missing, create)]) {
      expect(res.status).toBe(404);
      expect(res.json.error.message).toBe('Contact not found');
    }
  });

  it('keeps organizations apart: a foreign contact is a 404 and stays unchanged', async () => {
    const c = (await a.request('POST', '/v1/contacts', { name: 'Private' })).json.data;
    expect((await b.request('GET', `/v1/contacts/${c.id}`)).status).toBe(404);
    expect((await b.request('PATCH', `/v1/contacts/${c.id}`, { name: 'Hacked' })).status).toBe(404);
    expect((await b.request('POST', `/v1/contacts/${c.id}/emails`, { email: 'x@example.com' })).status).toBe(404);
    expect((await b.request('DELETE', `/v1/contacts/${c.id}`)).status).toBe(404);
    expect((await a.request('GET', `/v1/contacts/${c.id}`)).json.data.name).toBe('Private');
  });

  it('answers 401 without a key and 403 without the permission', async () => {
    const none = await t.app.inject({ method: 'GET', url: '/v1/contacts' });
    expect(none.statusCode).toBe(401);
    expect(JSON.parse(none.body).error.code).toBe('UNAUTHORIZED');
    const reader = await a.keyWith(['contacts:read']);
    expect((await reader.request('GET', '/v1/contacts')).status).toBe(200);
    const denied = await reader.request('POST', '/v1/contacts', {});
    expect(denied.status).toBe(403);
    expect(denied.json.error.code).toBe('FORBIDDEN');
  });

  it('validates bodies into the details tree', async () => {
    const c = (await a.request('POST', '/v1/contacts', {})).json.data;
    const bad = await a.request('POST', `/v1/contacts/${c.id}/phone-numbers`, { phoneNumber: '12', extra: 1 });
    expect(bad.status).toBe(400);
    expect(bad.json.error.code).toBe('VALIDATION_ERROR');
    expect(bad.json.error.details.errors[0]).toMatch(/extra/);
    expect(bad.json.error.details.properties.phoneNumber.errors[0]).toMatch(/phone number/);
    const badEmail = await a.request('POST', `/v1/contacts/${c.id}/emails`, { label: 'x' });
    expect(badEmail.json.error.details.properties.email.errors).toHaveLength(1);
    expect((await a.request('GET', '/v1/contacts/not-a-uuid')).status).toBe(400);
  });
});

describe('finding contacts', () => {
  it('filters by name words, email and phone digits, and combines them', async () => {
    const make = async (body: Record<string, unknown>, email?: string, phone?: string) => {
      const c = (await a.request('POST', '/v1/contacts', body)).json.data as { id: string };
      if (email) expect((await a.request('POST', `/v1/contacts/${c.id}/emails`, { email })).status).toBe(201);
      if (phone) expect((await a.request('POST', `/v1/contacts/${c.id}/phone-numbers`, { phoneNumber: phone })).status).toBe(201);
      return c.id;
    };
    const ada = await make({ firstName: 'Ada', lastName: 'Lovelace', company: 'Analytical Engines' }, 'Ada@Example.com', '+44 20 7946 0958');
    const grace = await make({ name: 'Grace Hopper', company: 'Navy' }, 'grace@example.com', '+1 415 555 0123');
    const ids = async (query: string) => ((await a.request('GET', `/v1/contacts?limit=100&${query}`)).json.data as { id: string }[]).map((c) => c.id);
    expect(await ids('name=lovelace')).toEqual([ada]);
    expect(await ids('name=grace%20navy')).toEqual([grace]);
    expect(await ids('name=ada%20navy')).toEqual([]);
    expect(await ids('email=ada%40example.COM')).toEqual([ada]);
    expect(await ids('phone=(415)%20555-0123')).toEqual([grace]);
    expect(await ids('name=grace&email=ada%40example.com')).toEqual([]);
    expect(await ids('name=100%25')).toEqual([]); // LIKE wildcards are literal
    // Another organization finds nothing of these.
    expect(((await b.request('GET', '/v1/contacts?name=lovelace')).json.data as unknown[]).length).toBe(0);
  });
});
