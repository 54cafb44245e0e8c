import { beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'drizzle-orm';
import { useTestApp, type Tenant } from '../helpers/app.js';
import { checkPagination, newestFirst } from '../helpers/pagination.js';
import { testDbKind } from '../helpers/database.js';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import * as schema from '../../src/db/schema.js';
import { searchMessages } from '../../src/modules/messages/messages.repository.js';

const { t, a, b } = useTestApp();

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

async function record(tenant: Tenant, body: Record<string, unknown>) {
  const res = await tenant.request('POST', '/v1/messages', { direction: 'incoming', type: 'email', ...body });
  expect(res.status, res.body).toBe(201);
  return res.json.data;
}

describe('messages: create, get, list, delete', () => {
  it('records a message with every field and reads it back', async () => {
    const body = {
      direction: 'outgoing',
      type: 'sms',
      timestamp: '2025-03-01T10:00:00+02:00',
      readAt: '2025-03-01T09:00:00Z',
      archivedAt: null,
      phoneNumberId: '7b0f2a4e-6b7a-4d8e-9a43-2d1f0b9c8e11',
      emailAddressId: null,
      providerMessageId: 'SM123',
      providerName: 'twilio',
      threadId: 'thread-1',
      text: 'Your order has shipped',
      action: 'none',
      importance: 'normal',
      status: 'delivered',
      summary: 'Shipping notice',
      urgency: 'low',
      sender: { name: 'Shop', phone: '+15550001' },
      recipient: '+15550002',
      category: ['orders', 'shipping'],
      metadata: { campaign: 'spring' },
    };
    const res = await a.request('POST', '/v1/messages', body);
    expect(res.status).toBe(201);
    const m = res.json.data;
    expect(m).toMatchObject({
      ...body,
      timestamp: '2025-03-01T08:00:00.000Z',
      readAt: '2025-03-01T09:00:00.000Z',
      snoozedUntil: null,
      organizationId: a.orgId,
      deletedAt: null,
    });
    expect(m).not.toHaveProperty('searchVector');
    expect(m.createdAt).toMatch(ISO);
    expect(Object.keys(m).sort()).toEqual(
      [
        'id', 'createdAt', 'updatedAt', 'deletedAt', 'organizationId', 'timestamp', 'readAt', 'archivedAt', 'snoozedUntil', 'phoneNumberId',
        'emailAddressId', 'type', 'direction', 'providerMessageId', 'providerName', 'threadId', 'text', 'action', 'importance', 'status', 'statusReason',
        'summary', 'urgency', 'sender', 'recipient', 'category', 'metadata', 'channelId',
      ].sort(),
    );

    const got = await a.request('GET', `/v1/messages/${m.id}`);
    expect(got.status).toBe(200);
    expect(got.json.data).toEqual(m);
  });

  it('needs only direction and type; the timestamp defaults to now', async () => {
    const before = Date.now();
    const m = await record(a, {});
    expect(m).toMatchObject({ direction: 'incoming', type: 'email', text: null, sender: null, readAt: null, providerName: null });
    expect(Date.parse(m.timestamp)).toBeGreaterThanOrEqual(before - 5000);
  });

  it('validates the create body', async () => {
    const missing = await a.request('POST', '/v1/messages', { text: 'hello' });
    expect(missing.status).toBe(400);
    expect(missing.json.error.code).toBe('VALIDATION_ERROR');
    expect(missing.json.error.details.properties.direction.errors).toHaveLength(1);
    expect(missing.json.error.details.properties.type.errors).toHaveLength(1);

    const cases: [Record<string, unknown>, string][] = [
      [{ direction: 'sideways' }, 'direction'],
      [{ type: '' }, 'type'],
      [{ type: 'x'.repeat(65) }, 'type'],
      [{ timestamp: 'yesterday' }, 'timestamp'],
      [{ timestamp: null }, 'timestamp'],
      [{ readAt: '2025-13-01T00:00:00Z' }, 'readAt'],
      [{ phoneNumberId: 'not-a-uuid' }, 'phoneNumberId'],
      [{ text: 42 }, 'text'],
      [{ text: 'x'.repeat(100_001) }, 'text'],
      [{ providerName: 'x'.repeat(256) }, 'providerName'],
      [{ status: '' }, 'status'],
    ];
    for (const [extra, field] of cases) {
      const res = await a.request('POST', '/v1/messages', { direction: 'incoming', type: 'email', ...extra });
      expect(res.status, field).toBe(400);
      expect(res.json.error.details.properties[field].errors.length, field).toBeGreaterThan(0);
    }
    const unknown = await a.request('POST', '/v1/messages', { direction: 'incoming', type: 'email', id: 'x', deletedAt: null });
    expect(unknown.status).toBe(400);
    expect(unknown.json.error.details.errors[0]).toMatch(/id|deletedAt/);
    expect((await a.request('POST', '/v1/messages', [])).status).toBe(400);
  });

  it('soft-deletes: the message is then a 404 and absent from lists', async () => {
    const m = await record(a, { text: 'to be removed', snoozedUntil: '2030-01-01T00:00:00Z' });
    const del = await a.request('DELETE', `/v1/messages/${m.id}`);
    expect(del.status).toBe(200);
    expect(del.json.data.id).toBe(m.id);
    expect(del.json.data.deletedAt).toMatch(ISO);
    expect((await a.request('GET', `/v1/messages/${m.id}`)).status).toBe(404);
    expect((await a.request('PATCH', `/v1/messages/${m.id}`, { readAt: null })).status).toBe(404);
    expect((await a.request('DELETE', `/v1/messages/${m.id}`)).status).toBe(404);
    for (const url of ['/v1/messages?limit=100', '/v1/messages/incoming?limit=100', '/v1/messages/search?q=removed']) {
      expect((await a.request('GET', url)).json.data.map((x: { id: string }) => x.id), url).not.toContain(m.id);
    }
  });

  it('answers 400 for a malformed id and 404 for an unknown one', async () => {
    const bad = await a.request('GET', '/v1/messages/not-a-uuid');
    expect(bad.status).toBe(400);
    expect(bad.json.error.code).toBe('VALIDATION_ERROR');
    const unknown = await a.request('GET', '/v1/messages/3f0c3bd2-5a3e-4b64-9d7e-2f3f7c1f0a55');
    expect(unknown.status).toBe(404);
    expect(unknown.json.error.code).toBe('NOT_FOUND');
  });
});

describe('messages: flags', () => {
  it('sets, keeps and clears readAt, archivedAt and snoozedUntil', async () => {
    const m = await record(a, {});
    const set = await a.request('PATCH', `/v1/messages/${m.id}`, {
      readAt: '2025-05-01T12:00:00Z',
      archivedAt: '2025-05-02T12:00:00+01:00',
      snoozedUntil: '2025-06-01T00:00:00.5Z',
    });
    expect(set.status).toBe(200);
    expect(set.json.data).toMatchObject({ readAt: '2025-05-01T12:00:00.000Z', archivedAt: '2025-05-02T11:00:00.000Z', snoozedUntil: '2025-06-01T00:00:00.500Z' });
    expect(Date.parse(set.json.data.updatedAt)).toBeGreaterThanOrEqual(Date.parse(m.updatedAt));

    // Absent fields stay as they are.
    const one = await a.request('PATCH', `/v1/messages/${m.id}`, { readAt: null });
    expect(one.json.data).toMatchObject({ readAt: null, archivedAt: '2025-05-02T11:00:00.000Z', snoozedUntil: '2025-06-01T00:00:00.500Z' });

    const none = await a.request('PATCH', `/v1/messages/${m.id}`, {});
    expect(none.status).toBe(200);
    expect(none.json.data).toMatchObject({ readAt: null, archivedAt: '2025-05-02T11:00:00.000Z' });

    const cleared = await a.request('PATCH', `/v1/messages/${m.id}`, { archivedAt: null, snoozedUntil: null });
    expect(cleared.json.data).toMatchObject({ readAt: null, archivedAt: null, snoozedUntil: null });
    expect((await a.request('GET', `/v1/messages/${m.id}`)).json.data).toMatchObject({ readAt: null, archivedAt: null, snoozedUntil: null });
  });

  it('accepts only the three flags, as date-times or null', async () => {
    const m = await record(a, { text: 'original' });
    for (const body of [{ text: 'changed' }, { readAt: 'now' }, { readAt: 1714567890 }, { direction: 'outgoing' }, { snoozedUntil: '' }]) {
      const res = await a.request('PATCH', `/v1/messages/${m.id}`, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json.error.code).toBe('VALIDATION_ERROR');
    }
    expect((await a.request('GET', `/v1/messages/${m.id}`)).json.data).toMatchObject({ text: 'original', direction: 'incoming', readAt: null });
  });

  it('counts live snoozed messages of the organization only', async () => {
    const tenant = await t.tenant();
    const count = async () => {
      const res = await tenant.request('GET', '/v1/messages/snoozed/count');
      expect(res.status).toBe(200);
      expect(res.json.meta).toBeUndefined();
      return res.json.data;
    };
    expect(await count()).toBe(0);
    const m1 = await record(tenant, { snoozedUntil: '2030-01-01T00:00:00Z' });
    const m2 = await record(tenant, {});
    await record(tenant, { snoozedUntil: '2020-01-01T00:00:00Z' }); // a past time still counts: the field is set
    await record(b, { snoozedUntil: '2030-01-01T00:00:00Z' });
    expect(await count()).toBe(2);
    await tenant.request('PATCH', `/v1/messages/${m2.id}`, { snoozedUntil: '2031-01-01T00:00:00Z' });
    expect(await count()).toBe(3);
    await tenant.request('PATCH', `/v1/messages/${m1.id}`, { snoozedUntil: null });
    expect(await count()).toBe(2);
    await tenant.request('DELETE', `/v1/messages/${m2.id}`);
    expect(await count()).toBe(1);
    expect((await tenant.request('GET', '/v1/messages/snoozed/count?x=1')).status).toBe(400);
  });
});

describe('messages: lists', () => {
  it('filters by direction and paginates', async () => {
    const tenant = await t.tenant();
    const made = [];
    for (let i = 0; i < 12; i++) made.push(await record(tenant, { direction: i % 3 === 0 ? 'outgoing' : 'incoming', text: `message ${i}` }));
    await record(b, { direction: 'incoming' });

    const all = newestFirst(made);
    const incoming = newestFirst(made.filter((m) => m.direction === 'incoming'));
    const outgoing = newestFirst(made.filter((m) => m.direction === 'outgoing'));
    expect(outgoing).toHaveLength(4);

    await checkPagination(tenant, '/v1/messages', all, false);
    await checkPagination(tenant, '/v1/messages/incoming', incoming, false);
    await checkPagination(tenant, '/v1/messages/outgoing', outgoing, false);
    const out = await tenant.request('GET', '/v1/messages/outgoing?limit=100');
    expect(out.json.data.every((m: { direction: string }) => m.direction === 'outgoing')).toBe(true);
  });

  it('serves /messages/search, /incoming and /snoozed/count before /messages/{id}', async () => {
    // Were these taken as `{id}`, they would be 400s for a malformed UUID.
    for (const url of ['/v1/messages/incoming', '/v1/messages/outgoing', '/v1/messages/search?q=x', '/v1/messages/snoozed/count']) {
      const res = await a.request('GET', url);
      expect(res.status, url).toBe(200);
    }
    expect((await a.request('GET', '/v1/messages/search')).json.error.details.properties.q).toBeDefined();
    expect((await a.request('GET', '/v1/messages/snoozed')).status).toBe(400);
  });
});

describe('messages: search', () => {
  let s: Tenant;
  const m: Record<string, { id: string }> = {};

  beforeAll(async () => {
    s = await t.tenant();
    m.text = await record(s, { text: 'The Quarterly INVOICE is attached', summary: 'finance' });
    m.summary = await record(s, { text: 'see below', summary: 'Lunch meeting with Marguerite' });
    m.sender = await record(s, { sender: { name: 'Bartholomew Quill', email: 'bart@quill.example' }, direction: 'incoming' });
    m.recipient = await record(s, { recipient: 'Zebulon Crane', direction: 'outgoing', type: 'phone' });
    m.both = await record(s, { text: 'invoice overdue', summary: 'reminder' });
    m.gone = await record(s, { text: 'invoice cancelled' });
    await s.request('DELETE', `/v1/messages/${m.gone!.id}`);
    await record(b, { text: 'invoice from another organization Marguerite' });
  });

  const search = async (query: string, tenant: Tenant = s) => {
    const res = await tenant.request('GET', `/v1/messages/search?${query}`);
    expect(res.status, res.body).toBe(200);
    return res.json.data.map((x: { id: string }) => x.id) as string[];
  };

  it('finds words in text, summary, sender and recipient', async () => {
    expect(await search('q=quarterly')).toEqual([m.text!.id]);
    expect(await search('q=marguerite')).toEqual([m.summary!.id]);
    expect(await search('q=bartholomew')).toEqual([m.sender!.id]);
    expect(await search('q=zebulon')).toEqual([m.recipient!.id]);
  });

  it('is case-insensitive, newest first, and follows the query syntax', async () => {
    expect(await search('q=INVOICE')).toEqual([m.both!.id, m.text!.id]);
    expect(await search('q=Invoice&sortOrder=asc')).toEqual([m.text!.id, m.both!.id]);
    expect(await search(`q=${encodeURIComponent('invoice overdue')}`)).toEqual([m.both!.id]);
    expect(await search(`q=${encodeURIComponent('invoice -overdue')}`)).toEqual([m.text!.id]);
    expect(await search(`q=${encodeURIComponent('zebulon or bartholomew')}`)).toEqual([m.recipient!.id, m.sender!.id]);
    expect(await search(`q=${encodeURIComponent('"quarterly invoice"')}`)).toEqual([m.text!.id]);
    expect(await search('q=nonexistentword')).toEqual([]);
    expect(await search(`q=${encodeURIComponent('!!! (( ')}`)).toEqual([]);
  });

  it('accepts `query` as an alias and paginates', async () => {
    expect(await search('query=quarterly')).toEqual([m.text!.id]);
    const page = await s.request('GET', '/v1/messages/search?q=invoice&limit=1');
    expect(page.json.data.map((x: { id: string }) => x.id)).toEqual([m.both!.id]);
    expect(page.json.meta.pagination).toEqual({ limit: 1, offset: 0, hasMore: true });
    const next = await s.request('GET', '/v1/messages/search?q=invoice&limit=1&offset=1');
    expect(next.json.data.map((x: { id: string }) => x.id)).toEqual([m.text!.id]);
    expect(await search('q=invoice&offset=5')).toEqual([]);
  });

  it("never returns another organization's or deleted messages", async () => {
    expect(await search('q=cancelled')).toEqual([]);
    expect(await search('q=another')).toEqual([]);
    expect(await search('q=marguerite', b)).toHaveLength(1);
    expect(await search('q=quarterly', b)).toEqual([]);
  });

  it('rejects a missing or empty search text', async () => {
    for (const query of ['', 'q=', 'q=%20%20', 'query=', 'q=&query=', 'limit=5', `q=${'x'.repeat(501)}`, 'q=a&q=b', 'q=x&foo=1']) {
      const res = await s.request('GET', `/v1/messages/search?${query}`);
      expect(res.status, query).toBe(400);
      expect(res.json.error.code).toBe('VALIDATION_ERROR');
    }
    const res = await s.request('GET', '/v1/messages/search');
    expect(res.json.error.details.properties.q.errors).toEqual(['The search text must not be empty']);
  });
});

describe('messages: hostile input', () => {
  it('answers 4xx, never 5xx, to text the database cannot store or parse', async () => {
    const bodies = [{ text: 'nul \u0000 byte' }, { sender: { name: 'nul \u0000' } }, { summary: '\ud800 lone surrogate' }, { metadata: { deep: [[[[{ a: null }]]]] } }];
    for (const body of bodies) {
      const res = await a.request('POST', '/v1/messages', { direction: 'incoming', type: 'email', ...body });
      expect(res.status, JSON.stringify(body)).toBeLessThan(500);
    }
    for (const q of ['"unclosed', '-', 'or', '& | ! : * ( )', "'; DROP TABLE messages; --", '\u0000', 'a'.repeat(500), 'é ü ß 東京']) {
      const res = await a.request('GET', `/v1/messages/search?q=${encodeURIComponent(q)}`);
      expect(res.status, q).toBeLessThan(500);
    }
    expect((await a.request('GET', '/v1/messages?limit=1')).status).toBe(200);
  });
});

describe('messages: security', () => {
  it('answers 401 without a key or with a wrong one', async () => {
    for (const [method, url] of [
      ['GET', '/v1/messages'],
      ['GET', '/v1/messages/search?q=x'],
      ['GET', '/v1/messages/snoozed/count'],
      ['POST', '/v1/messages'],
    ] as const) {
      expect((await t.app.inject({ method, url })).statusCode).toBe(401);
      const wrong = await t.app.inject({ method, url, headers: { authorization: 'Bearer sk_wrong' } });
      expect(wrong.statusCode).toBe(401);
      expect(JSON.parse(wrong.body).error.code).toBe('UNAUTHORIZED');
    }
  });

  it('answers 403 to a key without the permission', async () => {
    const m = await record(a, {});
    const reader = await a.keyWith(['messages:read']);
    expect((await reader.request('GET', `/v1/messages/${m.id}`)).status).toBe(200);
    expect((await reader.request('GET', '/v1/messages/search?q=x')).status).toBe(200);
    for (const [method, url, body] of [
      ['POST', '/v1/messages', { direction: 'incoming', type: 'email' }],
      ['PATCH', `/v1/messages/${m.id}`, { readAt: null }],
      ['DELETE', `/v1/messages/${m.id}`, undefined],
    ] as const) {
      const res = await reader.request(method, url, body);
      expect(res.status, `${method} ${url}`).toBe(403);
      expect(res.json.error.code).toBe('FORBIDDEN');
    }
    const other = await a.keyWith(['contacts:read', 'contacts:write']);
    for (const url of ['/v1/messages', '/v1/messages/incoming', '/v1/messages/outgoing', '/v1/messages/search?q=x', '/v1/messages/snoozed/count', `/v1/messages/${m.id}`]) {
      expect((await other.request('GET', url)).status, url).toBe(403);
    }
    const writer = await a.keyWith(['messages:write']);
    expect((await writer.request('PATCH', `/v1/messages/${m.id}`, { readAt: '2025-01-01T00:00:00Z' })).status).toBe(200);
    expect((await a.request('GET', `/v1/messages/${m.id}`)).json.data.readAt).toBe('2025-01-01T00:00:00.000Z');
  });

  it("treats another organization's message as a 404 and leaves it unchanged", async () => {
    const m = await record(a, { text: 'private' });
    expect((await b.request('GET', `/v1/messages/${m.id}`)).status).toBe(404);
    expect((await b.request('PATCH', `/v1/messages/${m.id}`, { readAt: '2025-01-01T00:00:00Z' })).status).toBe(404);
    expect((await b.request('DELETE', `/v1/messages/${m.id}`)).status).toBe(404);
    const list = await b.request('GET', '/v1/messages?limit=100');
    expect(list.json.data.map((x: { id: string }) => x.id)).not.toContain(m.id);
    const after = await a.request('GET', `/v1/messages/${m.id}`);
    expect(after.json.data).toMatchObject({ readAt: null, deletedAt: null, text: 'private' });
  });
});

describe('search plans', () => {
  // Each plan of searchMessages must give the same answer as a plain sort of all matches.
  it('finds the newest matches whether they are recent, rare, or many but old', async () => {
    const owner = await t.tenant();
    // 2,100 old messages with "archaic" (more than the sort-all limit), then 400 newer ones with "fresh"
    // (more than the recent window), and 3 in the middle with "scarce".
    await t.database.db.execute(sql`
      INSERT INTO messages (organization_id, type, direction, text, created_at)
      SELECT ${owner.orgId}::uuid, 'email', 'incoming',
             CASE WHEN g <= 2100 THEN 'archaic note ' || g WHEN g IN (2200, 2250, 2300) THEN 'scarce note ' || g ELSE 'fresh note ' || g END,
             timestamp '2026-01-01' + g * interval '1 minute'
      FROM generate_series(1, 2500) g`);
    const search = async (q: string, query = '') => (await owner.request('GET', `/v1/messages/search?q=${q}${query}`)).json as { data: { text: string }[] };

    expect((await search('fresh')).data.map((m) => m.text)).toEqual([2500, 2499, 2498, 2497, 2496, 2495, 2494, 2493, 2492, 2491].map((g) => `fresh note ${g}`));
    expect((await search('scarce')).data.map((m) => m.text)).toEqual(['scarce note 2300', 'scarce note 2250', 'scarce note 2200']);
    expect((await search('archaic')).data.map((m) => m.text)).toEqual([2100, 2099, 2098, 2097, 2096, 2095, 2094, 2093, 2092, 2091].map((g) => `archaic note ${g}`));
    expect((await search('archaic', '&sortOrder=asc&limit=3&offset=2')).data.map((m) => m.text)).toEqual(['archaic note 3', 'archaic note 4', 'archaic note 5']);
    expect((await search('absentword')).data).toEqual([]);
    expect((await a.request('GET', '/v1/messages/search?q=archaic')).json.data).toEqual([]);

    // The same searches again start with the plan that answered them: the same answers.
    expect((await search('fresh')).data.map((m) => m.text)[0]).toBe('fresh note 2500');
    expect((await search('scarce')).data.map((m) => m.text)).toEqual(['scarce note 2300', 'scarce note 2250', 'scarce note 2200']);
    expect((await search('archaic', '&limit=2&offset=1')).data.map((m) => m.text)).toEqual(['archaic note 2099', 'archaic note 2098']);

    // A remembered plan that no longer fits (a rare word became common) hands over: still the right page.
    await t.database.db.execute(sql`
      INSERT INTO messages (organization_id, type, direction, text, created_at)
      SELECT ${owner.orgId}::uuid, 'email', 'incoming', 'scarce old ' || g, timestamp '2025-01-01' + g * interval '1 minute'
      FROM generate_series(1, 2100) g`);
    expect((await search('scarce', '&limit=5')).data.map((m) => m.text)).toEqual(['scarce note 2300', 'scarce note 2250', 'scarce note 2200', 'scarce old 2100', 'scarce old 2099']);
    expect((await search('scarce', '&limit=2&sortOrder=asc')).data.map((m) => m.text)).toEqual(['scarce old 1', 'scarce old 2']);

    // The full-text index merges the rows waiting in its pending list at 128 kB (every search through the
    // index reads the whole list): after these 4,600 new rows it holds at most 16 pages, where PostgreSQL's
    // default (4 MB) would hold them all (about 35).
    const [index] = (await t.database.db.execute<{ options: string[] }>(sql`SELECT reloptions AS options FROM pg_class WHERE relname = 'messages_search'`)).rows;
    expect(index!.options).toContain('gin_pending_list_limit=128');
    if (testDbKind === 'postgres') {
      await t.database.db.execute(sql`CREATE EXTENSION IF NOT EXISTS pgstattuple`);
      const [gin] = (await t.database.db.execute<{ pending: number }>(sql`SELECT pending_pages AS pending FROM pgstatginindex('messages_search')`)).rows;
      expect(gin!.pending).toBeLessThanOrEqual(17);
    }
  });
});

describe('search statements', () => {
  // PostgreSQL only: the embedded database keeps no prepared statements.
  it.runIf(testDbKind === 'postgres')('the window and rare-word steps keep one plan whatever the words, instead of being planned at every call', async () => {
    const owner = await t.tenant();
    await t.database.db.execute(sql`
      INSERT INTO messages (organization_id, type, direction, text, created_at)
      SELECT ${owner.orgId}::uuid, 'email', 'incoming', 'Order ' || g || ' invoice ' || (g * 7 % 1000) || ' word' || (g % 5000) || ' meeting shipped regards',
             timestamp '2026-01-01' + g * interval '1 second'
      FROM generate_series(1, 20000) g`);
    await t.database.db.execute(sql`ANALYZE messages`);
    // One connection of its own, so that the statements' plan counts are read where they ran.
    const client = new pg.Client({ connectionString: (t.database as unknown as { url: string }).url });
    await client.connect();
    try {
      const db = drizzle(client, { schema });
      const page = { limit: 10, offset: 0, sortOrder: 'desc' } as const;
      for (let i = 0; i < 8; i++) {
        expect((await searchMessages(db, owner.orgId, 'xylophone', page)).items).toEqual([]);
        expect((await searchMessages(db, owner.orgId, 'regards', page)).items).toHaveLength(10);
      }
      const plans = async (name: string) =>
        (await client.query<{ generic: number; custom: number }>(`SELECT generic_plans::int AS generic, custom_plans::int AS custom FROM pg_prepared_statements WHERE name = $1`, [name])).rows[0]!;
      // With its values in the planner's sight, the window step was planned again at every call (0 generic, 9 custom).
      const window = await plans('messages_search_window_desc');
      expect(window.generic).toBeGreaterThan(0);
      expect(window.custom).toBeLessThanOrEqual(5);
      // The absent word had no match in the window: the rare-word step answered it, with one plan, after the
      // first five calls (its values in sight, 8 custom plans), a scan of the full-text index keyed by organization.
      const rare = await plans('messages_search_rare_desc');
      expect(rare.generic).toBeGreaterThan(0);
      expect(rare.custom).toBeLessThanOrEqual(5);
      // Its parameters: the organization, the words, the cap on matches, the page's limit and offset.
      const { rows: plan } = await client.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (FORMAT JSON) EXECUTE messages_search_rare_desc('${owner.orgId}', 'xylophone', 2000, 10, 0)`);
      const scans: { 'Node Type': string; 'Index Name'?: string; 'Index Cond'?: string }[] = [];
      const visit = (node: { Plans?: unknown[] } & (typeof scans)[number]) => {
        if (node['Node Type'].includes('Scan') && node['Node Type'] !== 'CTE Scan' && node['Node Type'] !== 'Result') scans.push(node);
        for (const child of node.Plans ?? []) visit(child as never);
      };
      visit((plan[0]!['QUERY PLAN'] as { Plan: never }[])[0]!.Plan);
      // The matches come from one index scan that takes both conditions: no scan of the organization's
      // rows (with the previous index: a bitmap of the organization's index ANDed with the words', or none).
      const ofMessages = scans.filter((scan) => scan['Index Name'] !== 'messages_pkey');
      expect(ofMessages.map((scan) => scan['Node Type'])).toEqual(['Bitmap Heap Scan', 'Bitmap Index Scan']);
      expect(ofMessages[1]!['Index Name']).toBe('messages_search');
      expect(ofMessages[1]!['Index Cond']).toMatch(/organization_id = .*search_vector @@/);
    } finally {
      await client.end();
    }
  });
});

describe('unread and direction filters', () => {
  it('lists only unread messages, in each list, and filters GET /messages by direction', async () => {
    const make = async (direction: string, read: boolean) =>
      ((await a.request('POST', '/v1/messages', { direction, type: 'email', text: 'filter me', ...(read ? { readAt: '2026-01-01T00:00:00Z' } : {}) })).json.data as { id: string }).id;
    const unreadIn = await make('incoming', false);
    const readIn = await make('incoming', true);
    const unreadOut = await make('outgoing', false);
    const ids = async (path: string) => ((await a.request('GET', path)).json.data as { id: string }[]).map((m) => m.id);
    const unread = await ids('/v1/messages?unread=true&limit=100');
    expect(unread).toEqual(expect.arrayContaining([unreadIn, unreadOut]));
    expect(unread).not.toContain(readIn);
    const unreadIncoming = await ids('/v1/messages/incoming?unread=true&limit=100');
    expect(unreadIncoming).toContain(unreadIn);
    expect(unreadIncoming).not.toContain(readIn);
    expect(unreadIncoming).not.toContain(unreadOut);
    const outgoing = await ids('/v1/messages?direction=outgoing&limit=100');
    expect(outgoing).toContain(unreadOut);
    expect(outgoing).not.toContain(unreadIn);
    expect((await a.request('GET', '/v1/messages?direction=sideways')).status).toBe(400);
  });
});
