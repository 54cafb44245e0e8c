import { readdirSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { CATEGORY_IDS } from '../../src/core/categories.js';
import { buildToolCatalog, toolMethodOf } from '../../src/mcp/tools.js';
import { setGrantCategories } from '../../src/oauth/grants.js';
import { operations } from '../../src/operations.js';
import { VERSION } from '../../src/version.js';
import { createTestApp, type Tenant } from '../helpers/app.js';
import { obtainTokens } from '../helpers/oauth-flow.js';
import { mintToken, rawMcp, startLiveApp, v1Client, v2Client, type LiveApp } from './helpers.js';

let t: LiveApp;
let a: Tenant;
let b: Tenant;

beforeAll(async () => {
  t = await startLiveApp();
  a = await t.tenant();
  b = await t.tenant();
});
afterAll(() => t.close());

/**
 * The tool list with every category granted for reading and changing, a read-only grant's list, and the
 * largest tool: what a client sends its model on every turn, and what clients with a tool limit accept.
 */
const TOOL_COUNT_BUDGET = 30;
const TOOL_LIST_BYTES_BUDGET = 64 * 1024;
const READ_ONLY_LIST_BYTES_BUDGET = 24 * 1024;
const TOOL_BYTES_BUDGET = 6 * 1024;
const catalog = buildToolCatalog(operations);
const INVALID = { error: 'invalid_token', error_description: 'Missing or invalid access token' };
const challenge = (path: string) =>
  `Bearer realm="OAuth", resource_metadata="${t.origin}/.well-known/oauth-protected-resource${path}", error="invalid_token", error_description="Missing or invalid access token"`;

async function expect401(res: Response, path: '/mcp' | '/sse') {
  expect(res.status).toBe(401);
  expect(res.headers.get('www-authenticate')).toBe(challenge(path));
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  expect(await res.json()).toEqual(INVALID);
}

/** Opens GET /sse with a token and returns the endpoint it names, plus a way to close the stream. */
async function openSse(token: string) {
  const controller = new AbortController();
  const res = await fetch(`${t.origin}/sse`, { headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' }, signal: controller.signal });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const reader = res.body!.getReader();
  let buffer = '';
  while (!/event: endpoint\ndata: [^\n]+\n/.test(buffer)) {
    const { value, done } = await reader.read();
    if (done) throw new Error('stream ended before the endpoint event');
    buffer += new TextDecoder().decode(value);
  }
  const endpoint = /event: endpoint\ndata: ([^\n]+)\n/.exec(buffer)![1]!;
  return { endpoint, close: () => controller.abort() };
}

const postTo = (url: string, token: string, body: unknown) =>
  fetch(url, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });

describe('bearer check', () => {
  it('answers the exact 401 on /mcp and /sse for every method without a token', async () => {
    for (const method of ['GET', 'POST', 'DELETE']) {
      await expect401(await fetch(`${t.origin}/mcp`, { method, ...(method === 'POST' ? { body: '{}', headers: { 'content-type': 'application/json' } } : {}) }), '/mcp');
      await expect401(await fetch(`${t.origin}/sse`, { method }), '/sse');
    }
    await expect401(await fetch(`${t.origin}/sse/messages?sessionId=x`, { method: 'POST', body: '{}' }), '/sse');
    // The token is checked before the body is read: an oversized or malformed body changes nothing.
    await expect401(await fetch(`${t.origin}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: 'x'.repeat(2 * 1024 * 1024) }), '/mcp');
    await expect401(await fetch(`${t.origin}/mcp`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{' }), '/mcp');
  });

  it('answers the same 401 for an unknown, malformed, expired, foreign-resource or scope-less token', async () => {
    const expired = await mintToken(t, a, { clock: () => new Date(Date.now() - 61 * 60 * 1000) });
    const foreign = await mintToken(t, a, { resource: 'https://elsewhere.example/mcp' });
    const otherPath = await mintToken(t, a, { resource: `${t.origin}/v1` });
    const noScope = await mintToken(t, a, { scopes: ['offline_access'] });
    const headers = [
      'Bearer not-a-token',
      'Bearer ',
      'Basic dXNlcjpwYXNz',
      `Bearer ${expired.token}`,
      `Bearer ${foreign.token}`,
      `Bearer ${otherPath.token}`,
      `Bearer ${noScope.token}`,
    ];
    for (const authorization of headers) {
      await expect401(await fetch(`${t.origin}/mcp`, { method: 'POST', headers: { authorization, 'content-type': 'application/json' }, body: '{}' }), '/mcp');
      await expect401(await fetch(`${t.origin}/sse`, { headers: { authorization } }), '/sse');
    }
  });

  it('accepts a token bound to the origin, /mcp or /sse (with or without a trailing slash) on both transports', async () => {
    for (const resource of [t.origin, `${t.origin}/`, `${t.origin}/mcp`, `${t.origin}/sse/`]) {
      const { token } = await mintToken(t, a, { resource });
      const ping = await rawMcp(t.origin, token, { jsonrpc: '2.0', id: 1, method: 'ping' });
      expect(ping.status).toBe(200);
      expect(ping.json).toEqual({ jsonrpc: '2.0', id: 1, result: {} });
      const sse = await openSse(token);
      sse.close();
    }
  });
});

describe('HTTP behaviour of /mcp', () => {
  it('answers GET and DELETE with 405 after authentication', async () => {
    const { token } = await mintToken(t, a);
    for (const method of ['GET', 'DELETE']) {
      const res = await fetch(`${t.origin}/mcp`, { method, headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' } });
      expect(res.status).toBe(405);
      expect(res.headers.get('allow')).toContain('POST');
      expect(((await res.json()) as { error: { code: number } }).error.code).toBe(-32000);
    }
  });

  it('refuses a foreign Origin with 403 and lets its own and loopback origins through, with CORS headers', async () => {
    const { token } = await mintToken(t, a);
    const ping = { jsonrpc: '2.0', id: 7, method: 'ping' };
    const evil = await rawMcp(t.origin, token, ping, { origin: 'http://evil.example.com' });
    expect(evil.status).toBe(403);
    expect(evil.headers.get('access-control-allow-origin')).toBeNull();
    expect((await rawMcp(t.origin, token, ping, { origin: 'null' })).status).toBe(403);
    const own = await rawMcp(t.origin, token, ping, { origin: t.origin });
    expect(own.status).toBe(200);
    expect(own.headers.get('access-control-allow-origin')).toBe(t.origin);
    const inspector = await rawMcp(t.origin, token, ping, { origin: 'http://localhost:6274' });
    expect(inspector.status).toBe(200);
    // A browser client can read the challenge of a 401.
    const anon = await rawMcp(t.origin, undefined, ping, { origin: t.origin });
    expect(anon.status).toBe(401);
    expect(anon.headers.get('access-control-expose-headers')).toMatch(/WWW-Authenticate/);
    expect(anon.headers.get('access-control-expose-headers')).toMatch(/Mcp-Session-Id/);
    expect(anon.headers.get('access-control-expose-headers')).toMatch(/Mcp-Protocol-Version/);
    expect(anon.headers.get('access-control-expose-headers')).toMatch(/Retry-After/);
  });

  it('a preflight allows the request headers it asks for, the 2026-07-28 ones included: Mcp-Method, Mcp-Name, Mcp-Param-*', async () => {
    const asked = ['authorization', 'content-type', 'mcp-protocol-version', 'mcp-session-id', 'last-event-id', 'mcp-method', 'mcp-name', 'mcp-param-query'];
    const res = await fetch(`${t.origin}/mcp`, {
      method: 'OPTIONS',
      headers: { origin: t.origin, 'access-control-request-method': 'POST', 'access-control-request-headers': asked.join(', ') },
    });
    expect(res.status).toBe(204);
    const allowed = res.headers.get('access-control-allow-headers')!.toLowerCase().split(/,\s*/);
    for (const h of asked) expect(allowed, h).toContain(h);
    expect(res.headers.get('access-control-max-age')).toBe('86400');
  });

  it('accepts /mcp/ and /sse/ (a pasted trailing slash) as the same endpoints', async () => {
    await expect401(await fetch(`${t.origin}/mcp/`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }), '/mcp');
    await expect401(await fetch(`${t.origin}/sse/`), '/sse');
    const { token } = await mintToken(t, a);
    const res = await fetch(`${t.origin}/mcp/`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { result: { tools: unknown[] } }).result.tools.length).toBeGreaterThan(0);
  });

  it('refuses a non-loopback Host (DNS rebinding) while the service runs on loopback', async () => {
    const { token } = await mintToken(t, a);
    const status = (host: string) =>
      new Promise<number>((resolve, reject) => {
        const url = new URL(t.origin);
        const req = httpRequest(
          { host: url.hostname, port: url.port, path: '/mcp', method: 'POST', headers: { host, authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' } },
          (res) => {
            res.resume();
            resolve(res.statusCode!);
          },
        );
        req.on('error', reject);
        req.end(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }));
      });
    expect(await status('evil.example.com')).toBe(403);
    expect(await status(`localhost:${new URL(t.origin).port}`)).toBe(200);
  });

  it('answers CORS preflights without a token', async () => {
    for (const path of ['/mcp', '/sse', '/sse/messages']) {
      const res = await fetch(`${t.origin}${path}`, {
        method: 'OPTIONS',
        headers: { origin: t.origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type, mcp-protocol-version' },
      });
      expect(res.status).toBe(204);
      expect(res.headers.get('access-control-allow-origin')).toBe(t.origin);
      expect(res.headers.get('access-control-allow-headers')).toMatch(/authorization/i);
      expect(res.headers.get('access-control-allow-headers')).toMatch(/mcp-protocol-version/i);
      expect(res.headers.get('access-control-allow-methods')).toMatch(/POST/);
    }
    const foreign = await fetch(`${t.origin}/mcp`, { method: 'OPTIONS', headers: { origin: 'https://evil.example.com', 'access-control-request-method': 'POST' } });
    expect(foreign.status).toBe(403);
  });

  it('answers malformed JSON with a JSON-RPC parse error, not a 5xx', async () => {
    const { token } = await mintToken(t, a);
    const res = await rawMcp(t.origin, token, '{"jsonrpc":');
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe(-32700);
  });

  it('applies Origin rules for a public PUBLIC_URL: only that origin, loopback included in the refusal', async () => {
    const pub = await createTestApp({ env: { PUBLIC_URL: 'https://switchboard.example.com' } });
    try {
      const post = (origin: string) => pub.app.inject({ method: 'POST', url: '/mcp', headers: { origin, 'content-type': 'application/json' }, payload: '{}' });
      expect((await post('http://localhost:3000')).statusCode).toBe(403);
      expect((await post('https://evil.example.com')).statusCode).toBe(403);
      const own = await post('https://switchboard.example.com');
      expect(own.statusCode).toBe(401);
      expect(own.headers['www-authenticate']).toContain('resource_metadata="https://switchboard.example.com/.well-known/oauth-protected-resource/mcp"');
    } finally {
      await pub.close();
    }
  });
});

describe('tools', () => {
  const catalogNames = (categories: readonly string[]) => [...catalog.values()].filter((entry) => categories.includes(entry.category)).map((entry) => entry.name);

  it('lists the tools of the granted categories, over every client and transport', async () => {
    const { token } = await mintToken(t, a, { categories: ['contacts'] });
    for (const [make, transport] of [
      [v1Client, 'mcp'],
      [v1Client, 'sse'],
      [v2Client, 'mcp'],
      [v2Client, 'sse'],
    ] as const) {
      const client = await make(t.origin, token, transport);
      expect(client.getServerVersion()).toMatchObject({ name: 'switchboard', version: VERSION });
      const { tools } = await client.listTools();
      expect(tools.map((x) => x.name)).toEqual(['contacts_read', 'contacts_write', 'contacts_delete']);
      await client.close();
    }
  });

  it('speaks the current revision with the v2 client and the 2025 revisions with the v1 client', async () => {
    const { token } = await mintToken(t, a);
    const v2 = await v2Client(t.origin, token, 'mcp');
    expect(v2.getNegotiatedProtocolVersion()).toBe('2026-07-28');
    expect((await v2.callTool({ name: 'contacts_read', arguments: { method: 'list' } })).isError).toBeFalsy();
    await v2.close();
    const v2legacy = await v2Client(t.origin, token, 'mcp', 'legacy');
    expect(v2legacy.getNegotiatedProtocolVersion()).toBe('2025-11-25');
    await v2legacy.close();
    const v1 = await v1Client(t.origin, token, 'mcp');
    expect(v1.getServerCapabilities()).toMatchObject({ tools: {} });
    expect((await v1.callTool({ name: 'contacts_read', arguments: { method: 'list' } })).isError).toBeFalsy();
    await v1.close();
  });

  it('re-reads the categories on every request (a category change applies to the next request, /mcp and /sse)', async () => {
    const minted = await mintToken(t, a, { categories: [...CATEGORY_IDS] });
    const http = await v1Client(t.origin, minted.token, 'mcp');
    const sse = await v1Client(t.origin, minted.token, 'sse');
    for (const client of [http, sse]) expect((await client.listTools()).tools.map((x) => x.name)).toEqual(catalogNames(CATEGORY_IDS));

    await setGrantCategories(t.database.db, minted.grant.id, ['messages'], () => new Date());
    for (const client of [http, sse]) {
      const names = (await client.listTools()).tools.map((x) => x.name);
      expect(names).toEqual(catalogNames(['messages']));
      expect(names).not.toContain('contacts_read');
      await expect(client.callTool({ name: 'contacts_read', arguments: { method: 'list' } })).rejects.toThrow(/Tool contacts_read not found/);
    }

    await setGrantCategories(t.database.db, minted.grant.id, [], () => new Date());
    for (const client of [http, sse]) expect((await client.listTools()).tools).toEqual([]);
    await setGrantCategories(t.database.db, minted.grant.id, ['contacts'], () => new Date());
    for (const client of [http, sse]) expect((await client.callTool({ name: 'contacts_read', arguments: { method: 'list' } })).isError).toBeFalsy();
    await http.close();
    await sse.close();
  });

  it('calls an operation as a method of its tool: the structured result is the REST envelope, with a text copy', async () => {
    const { token } = await mintToken(t, a, { categories: ['contacts'] });
    for (const transport of ['mcp', 'sse'] as const) {
      const client = await v1Client(t.origin, token, transport);
      const created = await client.callTool({ name: 'contacts_write', arguments: { method: 'create', firstName: 'Ada', data: { vip: true } } });
      expect(created.isError).toBeFalsy();
      const envelope = created.structuredContent as { data: { id: string; createdAt: string; organizationId: string } };
      expect(envelope.data).toMatchObject({ firstName: 'Ada', data: { vip: true }, organizationId: a.orgId, emails: [] });
      expect(envelope.data.createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(JSON.parse((created.content as { type: string; text: string }[])[0]!.text)).toEqual(envelope);

      const rest = await a.request('GET', `/v1/contacts/${envelope.data.id}`);
      const got = await client.callTool({ name: 'contacts_read', arguments: { method: 'get', id: envelope.data.id } });
      expect(got.structuredContent).toEqual(rest.json);

      const list = await client.callTool({ name: 'contacts_read', arguments: { method: 'list', limit: 1, sortOrder: 'asc' } });
      expect(list.structuredContent).toEqual((await a.request('GET', '/v1/contacts?limit=1&sortOrder=asc')).json);

      // A child resource is a method of its parent's tools.
      const email = await client.callTool({ name: 'contacts_write', arguments: { method: 'create_email', id: envelope.data.id, email: 'ada@example.com' } });
      expect(email.structuredContent).toMatchObject({ data: { email: 'ada@example.com', contactId: envelope.data.id } });
      const emails = await client.callTool({ name: 'contacts_read', arguments: { method: 'list_emails', id: envelope.data.id } });
      expect(emails.structuredContent).toEqual((await a.request('GET', `/v1/contacts/${envelope.data.id}/emails`)).json);
      await client.close();
    }
  });

  it('answers a missing method, or one the tool lacks, as a validation error naming the methods', async () => {
    const { token } = await mintToken(t, a, { categories: ['contacts'] });
    const client = await v2Client(t.origin, token, 'mcp');
    const textOf = (r: unknown) => JSON.parse((r as { content: { text: string }[] }).content[0]!.text);
    const missing = await client.callTool({ name: 'contacts_read', arguments: { id: a.orgId } });
    expect(missing.isError).toBe(true);
    expect(textOf(missing).error).toMatchObject({ code: 'VALIDATION_ERROR', details: { properties: { method: { errors: [expect.stringMatching(/^Required: one of list, get, list_emails/)] } } } });
    // Deleting is not a method of the writing tool, nor is a method of another tool.
    for (const method of ['delete', 'get', 42]) {
      const wrong = await client.callTool({ name: 'contacts_write', arguments: { method } });
      expect(textOf(wrong).error.code).toBe('VALIDATION_ERROR');
      expect(textOf(wrong).error.details.properties.method.errors[0]).toMatch(/contacts_write has no method .*; one of create, update/);
    }
    // The method's own fields are checked as REST checks them: an argument of another method is an unknown field.
    const foreignField = await client.callTool({ name: 'contacts_read', arguments: { method: 'list', emailId: a.orgId } });
    expect(textOf(foreignField).error).toMatchObject({ code: 'VALIDATION_ERROR', details: { errors: [expect.stringMatching(/emailId/)] } });
    await client.close();
  });

  it('creating methods take an idempotencyKey: a retry returns the first result and creates nothing twice', async () => {
    const { token } = await mintToken(t, a, { categories: ['contacts'] });
    const client = await v2Client(t.origin, token, 'mcp');
    const textOf = (r: unknown) => JSON.parse((r as { content: { text: string }[] }).content[0]!.text);
    const name = `Once ${Math.random()}`;
    const first = await client.callTool({ name: 'contacts_write', arguments: { method: 'create', name, idempotencyKey: 'assistant-retry-1' } });
    const again = await client.callTool({ name: 'contacts_write', arguments: { method: 'create', name, idempotencyKey: 'assistant-retry-1' } });
    expect(first.isError).toBeFalsy();
    expect(textOf(again)).toEqual(textOf(first));
    const listed = (await a.request('GET', '/v1/contacts?limit=100')).json.data.filter((c: { name: string }) => c.name === name);
    expect(listed).toHaveLength(1);
    const reused = await client.callTool({ name: 'contacts_write', arguments: { method: 'create', name: 'Other', idempotencyKey: 'assistant-retry-1' } });
    expect(reused.isError).toBe(true);
    expect(textOf(reused).error.code).toBe('IDEMPOTENCY_KEY_REUSED');
    const bad = await client.callTool({ name: 'contacts_write', arguments: { method: 'create', name, idempotencyKey: '' } });
    expect(textOf(bad).error.code).toBe('VALIDATION_ERROR');
    // Reads have no such argument: it is an unknown field there.
    const read = await client.callTool({ name: 'contacts_read', arguments: { method: 'list', idempotencyKey: 'x' } });
    expect(read.isError).toBe(true);
    await client.close();
  });

  it('refuses __proto__ and constructor in tool arguments, naming the key, and writes nothing', async () => {
    const { token } = await mintToken(t, a, { categories: ['contacts'] });
    for (const args of ['{"method":"create","name":"x","__proto__":{"isAdmin":true}}', '{"method":"create","name":"x","data":{"constructor":{}}}']) {
      const res = await rawMcp(t.origin, token, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"contacts_write","arguments":${args}}}`);
      expect(res.status, res.text).toBe(400);
      expect(res.json).toMatchObject({ jsonrpc: '2.0', id: 7, error: { code: -32602, message: expect.stringMatching(/unrecognized key "(__proto__|constructor)"/) } });
    }
    expect((await a.request('GET', '/v1/contacts?limit=100')).json.data.filter((c: { name: string }) => c.name === 'x')).toEqual([]);
  });

  it('answers errors as isError results with the REST error body: validation tree, foreign-org 404', async () => {
    const { token } = await mintToken(t, a, { categories: ['contacts'] });
    const client = await v2Client(t.origin, token, 'mcp');
    const textOf = (r: unknown) => JSON.parse((r as { content: { text: string }[] }).content[0]!.text);

    const invalid = await client.callTool({ name: 'contacts_write', arguments: { method: 'create', firstName: 42, extra: true } });
    expect(invalid.isError).toBe(true);
    const restInvalid = await a.request('POST', '/v1/contacts', { firstName: 42, extra: true });
    expect(textOf(invalid)).toEqual(restInvalid.json);
    expect(textOf(invalid).error.code).toBe('VALIDATION_ERROR');
    expect(textOf(invalid).error.details.properties.firstName.errors.length).toBeGreaterThan(0);

    const badId = await client.callTool({ name: 'contacts_read', arguments: { method: 'get', id: 'not-a-uuid' } });
    expect(badId.isError).toBe(true);
    expect(textOf(badId).error.code).toBe('VALIDATION_ERROR');

    const foreign = (await b.request('POST', '/v1/contacts', { name: 'Private' })).json.data;
    for (const [name, args] of [
      ['contacts_read', { method: 'get', id: foreign.id }],
      ['contacts_write', { method: 'update', id: foreign.id, name: 'Hacked' }],
      ['contacts_delete', { method: 'delete', id: foreign.id }],
    ] as const) {
      const res = await client.callTool({ name, arguments: args });
      expect(res.isError).toBe(true);
      expect(textOf(res)).toEqual({ error: { code: 'NOT_FOUND', message: expect.any(String) } });
    }
    expect((await b.request('GET', `/v1/contacts/${foreign.id}`)).json.data.name).toBe('Private');
    await client.close();

    // A paid operation without credits: the REST 402 body, nothing written.
    const broke = await t.tenant({ credits: 0 });
    const poor = await v1Client(t.origin, (await mintToken(t, broke, { categories: ['automations'] })).token, 'mcp');
    const denied = await poor.callTool({ name: 'automations_write', arguments: { method: 'create', name: 'Nightly', instructions: 'Every night, archive read messages' } });
    expect(denied.isError).toBe(true);
    expect(textOf(denied).error.code).toBe('INSUFFICIENT_CREDITS');
    expect((await poor.callTool({ name: 'automations_read', arguments: { method: 'list' } })).structuredContent).toMatchObject({ data: [] });
    await poor.close();
  });

  it('fails a tool outside the grant exactly like an unknown tool', async () => {
    const { token } = await mintToken(t, a, { categories: ['messages'] });
    const call = (name: string) => rawMcp(t.origin, token, { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name, arguments: { method: 'list' } } });
    const unknown = await call('no_such_tool');
    const forbidden = await call('contacts_read');
    expect(unknown.status).toBe(200);
    expect(unknown.json.error).toEqual({ code: -32602, message: 'Tool no_such_tool not found' });
    expect(forbidden.json.error).toEqual({ code: -32602, message: 'Tool contacts_read not found' });
  });

  it('annotates each tool from what its methods do', async () => {
    const { token } = await mintToken(t, a);
    const { tools } = (await rawMcp(t.origin, token, { jsonrpc: '2.0', id: 1, method: 'tools/list' })).json.result;
    const byName = new Map<string, { annotations: Record<string, unknown>; title: string; description: string }>(tools.map((x: { name: string }) => [x.name, x]));
    // Every method is named, with its summary, in its tool's description.
    for (const op of operations) {
      const { tool, method } = toolMethodOf(op);
      expect(byName.get(tool)!.description).toContain(`\`${method}\``);
      expect(byName.get(tool)!.description).toContain(op.summary);
    }
    const expected: [string, Record<string, boolean>][] = [
      ['contacts_read', { readOnlyHint: true, openWorldHint: false }],
      ['events_read', { readOnlyHint: true, openWorldHint: false }],
      // Marking a message read, creating: not destructive.
      ['messages_write', { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true }],
      ['contacts_write', { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false }],
      ['contacts_delete', { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false }],
      // Archiving for good and rotating a secret are destructive; so is their tool.
      ['automations_delete', { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false }],
      ['webhooks_delete', { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false }],
      // Sending a test event reaches outside the service.
      ['webhooks_write', { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true }],
    ];
    for (const [name, hints] of expected) expect(byName.get(name)!.annotations, name).toEqual(hints);
  });

  it('keeps every tool (name, annotations, schemas) in a snapshot of its own', async () => {
    const { token } = await mintToken(t, a);
    const { tools } = (await rawMcp(t.origin, token, { jsonrpc: '2.0', id: 1, method: 'tools/list' })).json.result as { tools: { name: string }[] };
    expect(tools).toHaveLength(catalog.size);
    for (const tool of tools) await expect(`${JSON.stringify(tool, null, 2)}\n`).toMatchFileSnapshot(`__toolsnaps__/${tool.name}.json`);
    // A tool that is gone leaves no snapshot behind (delete its file).
    const names = new Set(tools.map((tool) => `${tool.name}.json`));
    const orphans = readdirSync(new URL('./__toolsnaps__/', import.meta.url)).filter((f) => f !== 'sizes.json' && !names.has(f));
    expect(orphans).toEqual([]);
  });

  it('answers tools/list and tools/call on its JSON fast path exactly as the SDK path does', async () => {
    const { token } = await mintToken(t, a, { categories: ['contacts'] });
    const created = await a.request('POST', '/v1/contacts', { firstName: 'Fast', lastName: 'Path' });
    const id = (created.json.data as { id: string }).id;
    // Without MCP-Protocol-Version the request is not taken by the fast path: the SDK answers (as 2025-03-26).
    const viaSdk = async (body: unknown) => {
      const res = await fetch(`${t.origin}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${token}` },
        body: JSON.stringify(body),
      });
      return { status: res.status, type: res.headers.get('content-type'), json: (await res.json()) as unknown };
    };
    const viaFast = async (body: unknown) => {
      const res = await rawMcp(t.origin, token, body);
      return { status: res.status, type: res.headers.get('content-type'), json: res.json as unknown };
    };
    for (const body of [
      { jsonrpc: '2.0', id: 1, method: 'tools/list' },
      { jsonrpc: '2.0', id: 'two', method: 'tools/list', params: { _meta: { progressToken: 7 } } },
      { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'contacts_read', arguments: { method: 'get', id } } },
      { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'contacts_read', arguments: { method: 'get', id: 'not-a-uuid' } } },
      { jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'contacts_read', arguments: { method: 'list', limit: 1 } } },
      { jsonrpc: '2.0', id: 6, method: 'tools/call', params: { name: 'messages_read', arguments: { method: 'list' } } },
      { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'contacts_read' } },
      { jsonrpc: '2.0', id: 8, method: 'tools/call', params: { name: 'contacts_write', arguments: { method: 'nope' } } },
    ]) {
      const [fast, sdk] = [await viaFast(body), await viaSdk(body)];
      expect(fast, JSON.stringify(body)).toEqual(sdk);
    }
  });

  it('keeps every tool small: bytes per tool in a snapshot, the whole list within its budget', async () => {
    const { token } = await mintToken(t, a);
    const res = await rawMcp(t.origin, token, { jsonrpc: '2.0', id: 1, method: 'tools/list' });
    const tools = res.json.result.tools as Array<{ name: string }>;
    const sizes = Object.fromEntries(tools.map((tool) => [tool.name, Buffer.byteLength(JSON.stringify(tool))]));
    // Growth shows in review as a changed number here.
    await expect(`${JSON.stringify(sizes, null, 2)}\n`).toMatchFileSnapshot('__toolsnaps__/sizes.json');
    for (const [name, bytes] of Object.entries(sizes)) expect(bytes, name).toBeLessThanOrEqual(TOOL_BYTES_BUDGET);
    expect(tools.length).toBeLessThanOrEqual(TOOL_COUNT_BUDGET);
    expect(Buffer.byteLength(res.text)).toBeLessThanOrEqual(TOOL_LIST_BYTES_BUDGET);
  });

  it('fits a read-only grant of every category in 24 KB, read tools only', async () => {
    const { token } = await mintToken(t, a, { readOnly: true });
    const res = await rawMcp(t.origin, token, { jsonrpc: '2.0', id: 1, method: 'tools/list' });
    const tools = res.json.result.tools as Array<{ name: string; annotations: { readOnlyHint: boolean } }>;
    expect(tools.map((tool) => tool.name)).toEqual(CATEGORY_IDS.map((c) => `${c}_read`));
    expect(tools.every((tool) => tool.annotations.readOnlyHint)).toBe(true);
    expect(Buffer.byteLength(res.text)).toBeLessThanOrEqual(READ_ONLY_LIST_BYTES_BUDGET);
  });
});

describe('narrowing a connection to some categories (/mcp/x/…, /sse/x/…)', () => {
  it('lists and calls only the tools of the named categories the grant holds, on both transports', async () => {
    const { token } = await mintToken(t, a, { categories: ['contacts', 'messages', 'events'] });
    for (const transport of ['mcp', 'sse'] as const) {
      for (const make of [v1Client, v2Client]) {
        const client = await make(t.origin, token, `${transport}/x/contacts,folders`);
        // folders is not granted: narrowing never widens.
        expect((await client.listTools()).tools.map((x) => x.name), transport).toEqual(['contacts_read', 'contacts_write', 'contacts_delete']);
        expect((await client.callTool({ name: 'contacts_read', arguments: { method: 'list' } })).isError).toBeFalsy();
        await expect(client.callTool({ name: 'messages_read', arguments: { method: 'list' } })).rejects.toThrow(/Tool messages_read not found/);
        await client.close();
      }
    }
    const raw = await fetch(`${t.origin}/mcp/x/events/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18', authorization: `Bearer ${token}` },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(((await raw.json()) as { result: { tools: { name: string }[] } }).result.tools.map((x) => x.name)).toEqual(['events_read']);
  });

  it('answers an unknown category with a 404 naming it, and still asks for a token first', async () => {
    const { token } = await mintToken(t, a);
    const res = await rawMcp(t.origin, token, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, {}, '/mcp/x/contacts,nonsense');
    expect(res.status).toBe(404);
    expect(res.json.error.message).toMatch(/Unknown category "nonsense"/);
    await expect401(await fetch(`${t.origin}/mcp/x/contacts`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }), '/mcp');
  });
});

describe('/sse sessions', () => {
  it('re-authenticates every POST and refuses another (user, client) on the session', async () => {
    const owner = await mintToken(t, a);
    const sameUserOtherClient = await mintToken(t, a, { userId: owner.userId });
    const otherUserSameClient = await mintToken(t, a, { clientId: owner.clientId });
    const otherOrg = await mintToken(t, b);
    const secondTokenSameGrantPair = await mintToken(t, a, { userId: owner.userId, clientId: owner.clientId });
    const { endpoint, close } = await openSse(owner.token);
    expect(endpoint).toMatch(/^\/sse\/messages\?sessionId=[0-9a-f-]{36}$/);
    const url = `${t.origin}${endpoint}`;
    const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };

    const anon = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(init) });
    await expect401(anon, '/sse');
    for (const intruder of [sameUserOtherClient, otherUserSameClient, otherOrg]) {
      const res = await postTo(url, intruder.token, init);
      expect(res.status).toBe(403);
    }
    expect((await postTo(url, owner.token, init)).status).toBe(202);
    expect((await postTo(url, secondTokenSameGrantPair.token, { jsonrpc: '2.0', method: 'notifications/initialized' })).status).toBe(202);
    expect((await postTo(`${t.origin}/sse/messages?sessionId=00000000-0000-4000-8000-000000000000`, owner.token, init)).status).toBe(404);
    expect((await postTo(`${t.origin}/sse/messages`, owner.token, init)).status).toBe(400);
    expect((await postTo(url, owner.token, { not: 'json-rpc' })).status).toBe(400);
    close();
  });

  it('answers POST /sse with 405 (the stream is opened with GET)', async () => {
    const { token } = await mintToken(t, a);
    const res = await postTo(`${t.origin}/sse`, token, { jsonrpc: '2.0', id: 1, method: 'ping' });
    expect(res.status).toBe(405);
  });
});

describe('rate limit', () => {
  it('answers the 101st request of a (user, client) in 60 s with 429, -32004 and Retry-After, then recovers', async () => {
    const limited = await mintToken(t, a);
    const bystander = await mintToken(t, a, { userId: limited.userId });
    const ping = (token: string, id: number | string) => rawMcp(t.origin, token, { jsonrpc: '2.0', id, method: 'ping' });
    for (let i = 0; i < 100; i += 10) {
      const batch = await Promise.all(Array.from({ length: 10 }, (_, k) => ping(limited.token, i + k)));
      expect(batch.map((r) => r.status)).toEqual(Array(10).fill(200));
    }
    const over = await ping(limited.token, 'one-too-many');
    expect(over.status).toBe(429);
    expect(over.json).toEqual({ jsonrpc: '2.0', id: 'one-too-many', error: { code: -32004, message: 'Rate limit exceeded' } });
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(Number(over.headers.get('retry-after'))).toBeLessThanOrEqual(60);
    expect([...over.headers.keys()].filter((h) => h.startsWith('x-ratelimit'))).toEqual([]);

    // Both transports share the count; a notification (no id) gets null.
    const sse = await fetch(`${t.origin}/sse`, { headers: { authorization: `Bearer ${limited.token}` } });
    expect(sse.status).toBe(429);
    expect(await sse.json()).toEqual({ jsonrpc: '2.0', id: null, error: { code: -32004, message: 'Rate limit exceeded' } });
    expect((await rawMcp(t.origin, limited.token, { jsonrpc: '2.0', method: 'notifications/initialized' })).json.id).toBeNull();

    // Another client of the same user has its own count.
    expect((await ping(bystander.token, 1)).status).toBe(200);

    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      vi.setSystemTime(Date.now() + 61_000);
      expect((await ping(limited.token, 'again')).status).toBe(200);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('end to end through the OAuth flow', () => {
  it('discovers the metadata from the 401, obtains a token with the consent page and uses it on both transports', async () => {
    const user = await a.user();
    const first = await fetch(`${t.origin}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    const metadataUrl = /resource_metadata="([^"]+)"/.exec(first.headers.get('www-authenticate')!)![1]!;
    const metadata = (await (await fetch(metadataUrl)).json()) as { resource: string };
    expect(metadata.resource).toBe(`${t.origin}/mcp`);

    const { tokens } = await obtainTokens(t.app, { email: user.email, password: user.password, categories: ['contacts'], resource: metadata.resource });
    for (const transport of ['mcp', 'sse'] as const) {
      const client = await v1Client(t.origin, tokens.access_token, transport);
      expect((await client.listTools()).tools.map((x) => x.name)).toEqual(catalogNamesFor('contacts'));
      await client.close();
    }
  });
});

const catalogNamesFor = (category: string) => [...catalog.values()].filter((entry) => entry.category === category).map((entry) => entry.name);
