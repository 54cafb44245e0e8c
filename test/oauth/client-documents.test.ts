import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientIdUrlProblem, documentLifetimeS } from '../../src/oauth/client-documents.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { authorizeUrl, authorizeWithForms, exchangeCode, pkcePair, refreshTokens } from '../helpers/oauth-flow.js';

/** A local server of client metadata documents: each path answers what the test set, and counts its hits. */
interface Doc {
  status?: number;
  type?: string;
  headers?: Record<string, string>;
  body: string;
  delayMs?: number;
}
const docs = new Map<string, Doc>();
const hits = new Map<string, number>();
/** Requests the document server is answering now, and the most at once. */
let active = 0;
let maxActive = 0;
let docServer: Server;
let base: string;

const REDIRECT = 'http://127.0.0.1:8976/callback';
/** The app's clock: the real time moved forward by `skewMs`, so a test can let a cache lifetime pass. */
let skewMs = 0;
const clock = () => new Date(Date.now() + skewMs);
/** Each authorization request comes from its own address, so the per-IP fetch limit is not what these tests meet. */
let nextIp = 0;
const anotherIp = () => `198.51.100.${(nextIp++ % 250) + 1}`;
let t: TestApp;
let user: { id: string; email: string; password: string };

beforeAll(async () => {
  docServer = createServer((req, res) => {
    const path = req.url ?? '/';
    hits.set(path, (hits.get(path) ?? 0) + 1);
    active++;
    maxActive = Math.max(maxActive, active);
    res.on('close', () => active--);
    const doc = docs.get(path);
    const answer = () => {
      if (!doc) return res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      res.writeHead(doc.status ?? 200, { 'content-type': doc.type ?? 'application/json', ...doc.headers }).end(doc.body);
    };
    if (doc?.delayMs) setTimeout(answer, doc.delayMs);
    else answer();
  });
  await new Promise<void>((resolve) => docServer.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(docServer.address() as AddressInfo).port}`;
  t = await createTestApp({ env: { OAUTH_CLIENT_METADATA_ALLOW_INSECURE: 'true' }, clock });
  user = await (await t.tenant()).user();
});
afterAll(async () => {
  await t.close();
  docServer.closeAllConnections();
  await new Promise((resolve) => docServer.close(resolve));
});

/** Publishes a document at `path` whose client_id is its own URL (unless `fields` says otherwise); returns the URL. */
function publish(path: string, fields: Record<string, unknown> = {}, doc: Omit<Doc, 'body'> = {}): string {
  const url = `${base}${path}`;
  docs.set(path, {
    ...doc,
    body: JSON.stringify({
      client_id: url,
      client_name: 'Document client',
      redirect_uris: [REDIRECT],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      ...fields,
    }),
  });
  return url;
}

const authorizePage = (clientId: string, redirectUri = REDIRECT) =>
  t.app.inject({ method: 'GET', url: authorizeUrl({ clientId, redirectUri, challenge: pkcePair().challenge, state: 's', scope: 'mcp offline_access' }), headers: { 'x-forwarded-for': anotherIp() } });

/** The error page's text for a client_id that cannot be used. */
async function refusal(clientId: string, redirectUri = REDIRECT): Promise<string> {
  const res = await authorizePage(clientId, redirectUri);
  expect(res.statusCode, res.body.slice(0, 300)).toBe(400);
  expect(res.headers.location).toBeUndefined();
  expect(res.headers['content-type']).toMatch(/^text\/html/);
  return res.body;
}

describe('Client ID Metadata Documents', () => {
  it('are advertised in the authorization-server metadata', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/.well-known/oauth-authorization-server' });
    expect(res.json()).toMatchObject({ client_id_metadata_document_supported: true, registration_endpoint: expect.any(String) });
  });

  it('let a client use its document URL as client_id through the whole flow: consent, code, tokens, refresh, MCP', async () => {
    const clientId = publish('/clients/flow.json', {}, { headers: { 'cache-control': 'public, max-age=600' } });

    const page = await authorizePage(clientId);
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('<strong>Document client</strong>');
    expect(page.body).toContain(`published at <code>${new URL(base).host}</code>`);

    const { code, verifier } = await authorizeWithForms(t.app, { clientId, redirectUri: REDIRECT, email: user.email, password: user.password, categories: ['contacts'], scope: 'mcp offline_access' });
    const tokens = await exchangeCode(t.app, { clientId, code, verifier, redirectUri: REDIRECT });
    expect(tokens.status, JSON.stringify(tokens.json)).toBe(200);
    expect(tokens.json).toMatchObject({ token_type: 'Bearer', access_token: expect.any(String), refresh_token: expect.any(String) });

    const refreshed = await refreshTokens(t.app, { clientId, refreshToken: tokens.json.refresh_token });
    expect(refreshed.status).toBe(200);

    const list = await t.app.inject({
      method: 'POST',
      url: '/mcp',
      headers: { authorization: `Bearer ${refreshed.json.access_token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
      payload: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(list.statusCode).toBe(200);
    const names = (list.json().result.tools as Array<{ name: string }>).map((tool) => tool.name);
    expect(names).toContain('contacts_read');
    expect(names.every((n) => n.startsWith('contacts_'))).toBe(true);

    // Cached for its max-age: the page, the sign-in, the consent and the token requests fetched it once.
    expect(hits.get('/clients/flow.json')).toBe(1);

  });

  it('fetch the document again when its cache lifetime is over (no-store: after the one-minute minimum)', async () => {
    const clientId = publish('/clients/no-store.json', {}, { headers: { 'cache-control': 'no-store' } });
    for (let i = 0; i < 5; i++) expect((await authorizePage(clientId)).statusCode).toBe(200);
    expect(hits.get('/clients/no-store.json')).toBe(1);
    skewMs += 61_000;
    expect((await authorizePage(clientId)).statusCode).toBe(200);
    expect(hits.get('/clients/no-store.json')).toBe(2);

    // A changed document applies at the next fetch: the redirect URI it no longer lists is refused.
    publish('/clients/no-store.json', { redirect_uris: ['http://127.0.0.1:8976/other'] }, { headers: { 'cache-control': 'no-store' } });
    expect((await authorizePage(clientId)).statusCode).toBe(200);
    skewMs += 61_000;
    expect(await refusal(clientId)).toContain('not one this application registered');
  });

  it('refuse documents that break the rules, with an error page that says why', async () => {
    const cases: Array<[string, string]> = [
      [publish('/bad/mismatch.json', { client_id: 'https://other.example/client.json' }), 'must be exactly its own URL'],
      [publish('/bad/secret.json', { client_secret: 'shh' }), 'must not contain a client secret'],
      [publish('/bad/method.json', { token_endpoint_auth_method: 'client_secret_basic' }), 'only &quot;none&quot;'],
      [publish('/bad/redirect.json', { redirect_uris: ['javascript:alert(1)'] }), 'refused scheme'],
      [publish('/bad/no-redirects.json', { redirect_uris: [] }), 'at least one redirect URI'],
      [publish('/bad/status.json', {}, { status: 500 }), 'answered HTTP 500'],
      [publish('/bad/html.json', {}, { type: 'text/html' }), 'served as application/json'],
      [`${base}/bad/missing.json`, 'answered HTTP 404'],
    ];
    docs.set('/bad/not-json.json', { body: '{"client_id": ' });
    cases.push([`${base}/bad/not-json.json`, 'not valid JSON']);
    docs.set('/bad/array.json', { body: '[]' });
    cases.push([`${base}/bad/array.json`, 'must be a JSON object']);
    docs.set('/bad/large.json', { body: JSON.stringify({ client_id: `${base}/bad/large.json`, redirect_uris: [REDIRECT], client_name: 'x'.repeat(6000) }) });
    cases.push([`${base}/bad/large.json`, 'larger than 5120 bytes']);
    for (const [clientId, reason] of cases) expect(await refusal(clientId), clientId).toContain(reason);

    // The redirect URI of the request must be one the document lists.
    expect(await refusal(publish('/clients/exact.json'), 'http://127.0.0.1:8976/callback/extra')).toContain('not one this application registered');
  });

  it('refuse client_id URLs that are not in normal form, have no path, or carry credentials, without fetching them', async () => {
    const before = [...hits.values()].reduce((s, n) => s + n, 0);
    const port = new URL(base).port;
    for (const [clientId, reason] of [
      [`${base}/`, 'must have a path'],
      [`${base}/a/../client.json`, 'normal form'],
      [`http://user:pw@127.0.0.1:${port}/client.json`, 'credentials'],
      [`${base}/client.json#frag`, 'fragment'],
    ] as const) {
      expect(await refusal(clientId), clientId).toContain(reason);
    }
    expect([...hits.values()].reduce((s, n) => s + n, 0)).toBe(before);
  });

  it('give up on a document that does not answer within 5 seconds', async () => {
    const clientId = publish('/slow/client.json', {}, { delayMs: 6_000 });
    expect(await refusal(clientId)).toContain('No answer within 5 s');
  }, 15_000);
});

describe('Client ID Metadata Documents: fetching is bounded', () => {
  const hitsUnder = (prefix: string) => [...hits].filter(([p]) => p.startsWith(prefix)).reduce((s, [, n]) => s + n, 0);
  const from = (ip: string, clientId: string) =>
    t.app.inject({ method: 'GET', url: authorizeUrl({ clientId, redirectUri: REDIRECT, challenge: pkcePair().challenge, state: 's' }), headers: { 'x-forwarded-for': ip } });

  it('one address makes at most 10 fetches a minute: 40 requests for 40 documents fetch 10, the rest are 429', async () => {
    const statuses: number[] = [];
    let last;
    for (let i = 0; i < 40; i++) {
      last = await from('203.0.113.7', publish(`/per-ip/${i}.json`));
      statuses.push(last.statusCode);
    }
    expect(hitsUnder('/per-ip/')).toBe(10);
    expect(statuses.filter((s) => s === 200)).toHaveLength(10);
    expect(statuses.filter((s) => s === 429)).toHaveLength(30);
    expect(Number(last!.headers['retry-after'])).toBeGreaterThan(0);
    expect(last!.body).toContain('Too many client metadata documents were fetched for your address');
    // A document already fetched is still served from the table, and another address is not limited.
    expect((await from('203.0.113.7', `${base}/per-ip/0.json`)).statusCode).toBe(200);
    expect((await from('203.0.113.8', `${base}/per-ip/39.json`)).statusCode).toBe(200);
    expect(hitsUnder('/per-ip/')).toBe(11);
  });

  it('remember a failed fetch for a minute: the same error without fetching again', async () => {
    const clientId = publish('/failing/client.json', {}, { status: 500 });
    for (let i = 0; i < 5; i++) expect(await refusal(clientId)).toContain('answered HTTP 500');
    expect(hits.get('/failing/client.json')).toBe(1);
    skewMs += 61_000;
    expect(await refusal(clientId)).toContain('answered HTTP 500');
    expect(hits.get('/failing/client.json')).toBe(2);
  });

  it('run at most 4 fetches at once; requests for a document being fetched wait for that one fetch', async () => {
    maxActive = 0;
    const distinct = await Promise.all(Array.from({ length: 8 }, (_, i) => authorizePage(publish(`/concurrent/${i}.json`, {}, { delayMs: 400 }))));
    expect(maxActive).toBeLessThanOrEqual(4);
    expect(hitsUnder('/concurrent/')).toBe(4);
    expect(distinct.filter((r) => r.statusCode === 200)).toHaveLength(4);
    const busy = distinct.filter((r) => r.statusCode === 503);
    expect(busy).toHaveLength(4);
    expect(busy[0]!.headers['retry-after']).toBe('1');
    expect(busy[0]!.body).toContain('fetching other client metadata documents right now');

    const same = publish('/concurrent/same.json', {}, { delayMs: 400 });
    const answers = await Promise.all(Array.from({ length: 6 }, () => authorizePage(same)));
    expect(answers.map((r) => r.statusCode)).toEqual([200, 200, 200, 200, 200, 200]);
    expect(hits.get('/concurrent/same.json')).toBe(1);
  });
});

describe('Client ID Metadata Documents, default settings', () => {
  let plain: TestApp;
  let disabled: TestApp;
  beforeAll(async () => {
    plain = await createTestApp();
    disabled = await createTestApp({ env: { OAUTH_CLIENT_METADATA_DOCUMENTS: 'false' } });
  });
  afterAll(async () => {
    await plain.close();
    await disabled.close();
  });

  it('take https documents on public addresses only: http, loopback and private addresses are refused before any fetch', async () => {
    const clientId = publish('/clients/insecure.json');
    const hitsBefore = hits.get('/clients/insecure.json') ?? 0;
    for (const [id, reason] of [
      [clientId, 'Must use https'.toLowerCase()],
      ['https://127.0.0.1/client.json', 'private, loopback'],
      ['https://10.1.2.3/client.json', 'private, loopback'],
      ['https://[::1]/client.json', 'private, loopback'],
      ['https://169.254.169.254/latest/meta-data/client.json', 'private, loopback'],
    ] as const) {
      const res = await plain.app.inject({ method: 'GET', url: authorizeUrl({ clientId: id, redirectUri: REDIRECT, challenge: pkcePair().challenge, state: 's' }) });
      expect(res.statusCode, id).toBe(400);
      expect(res.body, id).toContain(reason);
    }
    expect(hits.get('/clients/insecure.json') ?? 0).toBe(hitsBefore);
  });

  it('can be turned off: not advertised, and a URL client_id is an unknown client', async () => {
    const meta = await disabled.app.inject({ method: 'GET', url: '/.well-known/oauth-authorization-server' });
    expect(meta.json().client_id_metadata_document_supported).toBe(false);
    const clientId = publish('/clients/off.json');
    const res = await disabled.app.inject({ method: 'GET', url: authorizeUrl({ clientId, redirectUri: REDIRECT, challenge: pkcePair().challenge, state: 's' }) });
    expect(res.statusCode).toBe(400);
    expect(res.body).toContain('unknown client_id');
    expect(hits.get('/clients/off.json') ?? 0).toBe(0);
  });
});

describe('client metadata document rules', () => {
  const now = new Date('2026-01-01T00:00:00Z');
  it('reads the cache lifetime from Cache-Control or Expires, at most a day, an hour when unsaid', () => {
    expect(documentLifetimeS({ 'cache-control': 'public, max-age=600' }, now)).toBe(600);
    expect(documentLifetimeS({ 'cache-control': 'max-age=999999' }, now)).toBe(86_400);
    // At least a minute, whatever the document says.
    expect(documentLifetimeS({ 'cache-control': 'no-store' }, now)).toBe(60);
    expect(documentLifetimeS({ 'cache-control': 'no-cache, max-age=600' }, now)).toBe(60);
    expect(documentLifetimeS({ 'cache-control': 'max-age=5' }, now)).toBe(60);
    expect(documentLifetimeS({ expires: 'Thu, 01 Jan 2026 00:10:00 GMT' }, now)).toBe(600);
    expect(documentLifetimeS({ expires: 'Wed, 31 Dec 2025 00:00:00 GMT' }, now)).toBe(60);
    expect(documentLifetimeS({}, now)).toBe(3600);
  });

  it('accepts https URLs with a path in normal form', () => {
    expect(clientIdUrlProblem('https://app.example.com/oauth/client.json', false)).toBeUndefined();
    expect(clientIdUrlProblem('https://APP.example.com/client.json', false)).toMatch(/normal form/);
    expect(clientIdUrlProblem('https://app.example.com:443/client.json', false)).toMatch(/normal form/);
    expect(clientIdUrlProblem('https://app.example.com', false)).toMatch(/normal form|path/);
    expect(clientIdUrlProblem(`https://app.example.com/${'a'.repeat(1000)}`, false)).toMatch(/longer than/);
  });
});
