import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envelopeSchema, type Envelope } from '../../src/core/operation.js';
import { carriesJsonText } from '../../src/core/json-text.js';
import { operations } from '../../src/operations.js';
import { runOperation } from '../../src/run-operation.js';
import type { Tenant } from '../helpers/app.js';
import { mintToken, rawMcp, startLiveApp, type LiveApp } from '../mcp/helpers.js';

/**
 * The contact reads and the page of threads answer the JSON text PostgreSQL built, spliced into the body without a parse and a
 * second serialization. These tests hold that path to the other one (the records read into values and
 * serialized by JavaScript, as automations and the MCP SDK path get them) for the same records: the same
 * values, in the same key order, and nothing the response schema does not describe.
 */

let t: LiveApp;
let a: Tenant;
beforeAll(async () => {
  t = await startLiveApp();
  a = await t.tenant();
});
afterAll(() => t?.close());

const op = (id: string) => operations.find((o) => o.id === id)!;

/** Text that JSON escapes (quotes, backslashes, control characters) and text it does not (non-ASCII, U+2028). */
const TRICKY = 'Zoë "the \\ quoted" <b>&</b>\nline\ttab\r\u0007 😀 \u2028 日本';

async function seedContacts() {
  const ids: string[] = [];
  for (const [i, name] of [TRICKY, 'Plain', ''].entries()) {
    const created = await a.request('POST', '/v1/contacts', {
      name,
      firstName: i === 0 ? TRICKY : null,
      notes: i === 1 ? '</script>' : null,
      data: { nested: { n: 1.5, big: 9007199254740991, neg: -0.25, list: [1, 'x', null, true, { k: TRICKY }] }, empty: {}, [TRICKY]: 'key' },
    });
    expect(created.status).toBe(201);
    ids.push(created.json.data.id);
  }
  const [first] = ids;
  expect((await a.request('POST', `/v1/contacts/${first}/emails`, { email: 'zoe@example.com', label: TRICKY })).status).toBe(201);
  expect((await a.request('POST', `/v1/contacts/${first}/phone-numbers`, { phoneNumber: '+44 20 7946 0000' })).status).toBe(201);
  expect((await a.request('POST', `/v1/contacts/${first}/addresses`, { city: 'Zürich', address1: TRICKY, country: 'CH' })).status).toBe(201);
  return ids;
}

/** The envelope through the path that reads the records into values (a caller without `jsonText`), serialized by JavaScript. */
async function valuesPath(id: string, input: Record<string, unknown>): Promise<string> {
  const caller = { orgId: a.orgId, actor: { type: 'api_key' as const, id: a.keyId, depth: 0 }, permissions: ['*'], db: t.database.db };
  const envelope = await runOperation(op(id), input, caller);
  expect(carriesJsonText(envelope)).toBe(false);
  return JSON.stringify(envelope);
}

/** Both bodies hold the same values in the same key order, and the schema keeps every field of them (nothing unknown). */
function expectSameAnswer(operationId: string, rawBody: string, reference: string) {
  const parsed = JSON.parse(rawBody) as Envelope;
  expect(JSON.stringify(parsed)).toBe(reference);
  const checked = envelopeSchema(op(operationId)).strict().parse(parsed);
  expect(JSON.stringify(checked)).toBe(reference);
}

/** The tool call's structuredContent and its text copy are the body REST answers at `path`. */
async function expectMcpAnswersRestBody(token: string, name: string, args: Record<string, unknown>, path: string) {
  const rest = await a.request('GET', path);
  const call = await rawMcp(t.origin, token, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } });
  expect(call.status).toBe(200);
  const result = call.json.result as { structuredContent: unknown; content: { type: string; text: string }[] };
  expect(JSON.stringify(result.structuredContent)).toBe(JSON.stringify(rest.json));
  expect(result.content[0]!.text).toBe(rest.body);
}

describe('reads answered as the database JSON text', () => {
  let ids: string[];
  beforeAll(async () => {
    ids = await seedContacts();
  });

  it('GET /v1/contacts/{id}: the same body as the values path, for every record', async () => {
    for (const id of ids) {
      const res = await a.request('GET', `/v1/contacts/${id}`);
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
      expectSameAnswer('contacts.get', res.body, await valuesPath('contacts.get', { id }));
    }
  });

  it('GET /v1/contacts: the same page as the values path, both orders, filtered or not, empty included', async () => {
    for (const query of ['limit=10', 'limit=2&sortOrder=asc', 'limit=2&offset=2', 'limit=10&offset=50', 'name=Plain', 'email=zoe@example.com']) {
      const res = await a.request('GET', `/v1/contacts?${query}`);
      expect(res.status).toBe(200);
      const input: Record<string, unknown> = Object.fromEntries(new URLSearchParams(query));
      for (const k of ['limit', 'offset']) if (k in input) input[k] = Number(input[k]);
      expectSameAnswer('contacts.list', res.body, await valuesPath('contacts.list', input));
    }
  });

  it("is PostgreSQL's text as it is: not parsed and serialized again on the way out", async () => {
    const res = await a.request('GET', `/v1/contacts/${ids[0]}`);
    // json_build_object writes "key" : value; JavaScript would write "key":value.
    expect(res.body).toContain('"id" : ');
    expect(res.body).not.toBe(JSON.stringify(JSON.parse(res.body)));
  });

  it('MCP contacts_read get: structuredContent and its text copy are the REST body', async () => {
    const { token } = await mintToken(t, a);
    for (const id of ids) {
      await expectMcpAnswersRestBody(token, 'contacts_read', { method: 'get', id }, `/v1/contacts/${id}`);
    }
  });

  it('inside a transaction (the automation engine, the idempotency store) the same statement answers values', async () => {
    const caller = { orgId: a.orgId, actor: { type: 'api_key' as const, id: a.keyId, depth: 0 }, permissions: ['*'], db: t.database.db };
    const envelope = await t.database.db.transaction((tx) => runOperation(op('contacts.get'), { id: ids[0] }, caller, tx));
    expect(JSON.stringify(envelope)).toBe(await valuesPath('contacts.get', { id: ids[0]! }));
  });

  it('a contact of another organization, or none, is still a 404', async () => {
    const other = await t.tenant();
    expect((await other.request('GET', `/v1/contacts/${ids[0]}`)).status).toBe(404);
    expect((await a.request('GET', '/v1/contacts/00000000-0000-4000-8000-000000000000')).status).toBe(404);
  });
});

describe('a page of threads answered as the database JSON text', () => {
  let member: string;
  let ids: string[];
  beforeAll(async () => {
    member = (await a.user('thread-lead@example.test')).id;
    ids = [];
    const threads: [string, Record<string, unknown>][] = [
      [`${TRICKY} thread`, { status: 'pending', assigneeId: member, tags: ['vip', TRICKY.slice(0, 20)] }],
      ['plain-thread', { assigneeId: member, snoozedUntil: new Date(Date.now() + 86_400_000).toISOString() }],
      ['open-mine', { assigneeId: member }],
      ['unassigned', {}],
    ];
    for (const [i, [id, patch]] of threads.entries()) {
      const timestamp = new Date(Date.UTC(2026, 10, 1, 10, i, 0, 7)).toISOString();
      const body = { direction: 'incoming', type: 'sms', text: 'hi', threadId: id, timestamp };
      const created = await a.request('POST', '/v1/messages', body);
      expect(created.status, created.body).toBe(201);
      if (Object.keys(patch).length) expect((await a.request('PATCH', `/v1/threads/${encodeURIComponent(id)}`, patch)).status).toBe(200);
      ids.push(id);
    }
  });

  it('GET /v1/threads: the same page as the values path and as each thread read alone, for every filter and order', async () => {
    const queries = [
      'limit=10',
      'limit=2&sortOrder=asc',
      'limit=2&offset=2',
      'limit=10&offset=50',
      `status=open&assigneeId=${member}`,
      `status=open&assigneeId=${member}&sortOrder=asc&limit=1&offset=1`,
      'assigneeId=none',
      'status=snoozed',
      'tag=vip',
      `status=pending&tag=vip&assigneeId=${member}`,
      `contactId=00000000-0000-4000-8000-000000000000`,
    ];
    let seen = 0;
    for (const query of queries) {
      const res = await a.request('GET', `/v1/threads?${query}`);
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
      const input: Record<string, unknown> = Object.fromEntries(new URLSearchParams(query));
      for (const k of ['limit', 'offset']) if (k in input) input[k] = Number(input[k]);
      expectSameAnswer('threads.list', res.body, await valuesPath('threads.list', input));
      // Each item is the thread as GET /v1/threads/{id} answers it (Drizzle's row serialized by JavaScript).
      for (const item of (JSON.parse(res.body) as { data: { id: string }[] }).data) {
        expect(JSON.stringify(item)).toBe(JSON.stringify((await a.request('GET', `/v1/threads/${encodeURIComponent(item.id)}`)).json.data));
        seen++;
      }
    }
    expect(seen).toBeGreaterThan(10);
    const mine = (await a.request('GET', `/v1/threads?status=open&assigneeId=${member}`)).json.data as { id: string }[];
    expect(mine.map((x) => x.id)).toEqual(['open-mine']);
    // json_build_object writes "key" : value: the text as PostgreSQL wrote it.
    expect((await a.request('GET', '/v1/threads?limit=1')).body).toContain('"id" : ');
  });

  it('MCP threads_read list: structuredContent and its text copy are the REST body', async () => {
    const { token } = await mintToken(t, a);
    await expectMcpAnswersRestBody(token, 'threads_read', { method: 'list', status: 'open', assigneeId: member }, `/v1/threads?status=open&assigneeId=${member}`);
  });

  it('inside a transaction the same statement answers values; another organization sees none of them', async () => {
    const caller = { orgId: a.orgId, actor: { type: 'api_key' as const, id: a.keyId, depth: 0 }, permissions: ['*'], db: t.database.db };
    const envelope = await t.database.db.transaction((tx) => runOperation(op('threads.list'), { limit: 10 }, caller, tx));
    expect(JSON.stringify(envelope)).toBe(await valuesPath('threads.list', { limit: 10 }));
    const other = await t.tenant();
    expect((await other.request('GET', '/v1/threads?limit=100')).json.data).toEqual([]);
  });
});
