import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CATEGORY_IDS } from '../../src/core/categories.js';
import { oauthSessions } from '../../src/db/schema.js';
import { verifyAccessToken } from '../../src/oauth/grants.js';
import { createTestApp, TEST_ORIGIN, type TestApp } from '../helpers/app.js';
import { authorizeUrl, authorizeWithForms, CookieJar, exchangeCode, formBody, hiddenFields, pkcePair, registerClient, type RegisteredClient } from '../helpers/oauth-flow.js';

let t: TestApp;
let user: { id: string; email: string; password: string };
let client: RegisteredClient;
const REDIRECT = 'http://127.0.0.1:8976/callback';

beforeAll(async () => {
  t = await createTestApp();
  user = await (await t.tenant()).user();
  client = await registerClient(t.app, { redirect_uris: [REDIRECT, 'https://app.example.com/cb'] });
});
afterAll(() => t.close());

const get = (url: string, cookie?: string) => t.app.inject({ method: 'GET', url, headers: cookie ? { cookie } : {} });
const url = (o: Partial<{ clientId: string; redirectUri: string; challenge: string; state: string; scope: string; resource: string; extra: Record<string, string> }> = {}) =>
  authorizeUrl({ clientId: client.client_id, redirectUri: REDIRECT, challenge: pkcePair().challenge, state: 'st-123', ...o });
const post = (path: string, fields: Record<string, string | string[]>, cookie: string) =>
  t.app.inject({ method: 'POST', url: path, headers: { 'content-type': 'application/x-www-form-urlencoded', cookie }, payload: formBody(fields) });

/** Opens the page and signs in: the consent page, its hidden fields and the browser's cookies. */
async function signedIn(u = url(), credentials = user) {
  const jar = new CookieJar();
  const page = await get(u);
  expect(page.statusCode).toBe(200);
  jar.store(page);
  const res = await post('/oauth/authorize/sign-in', { ...hiddenFields(page.body, '/oauth/authorize/sign-in'), email: credentials.email, password: credentials.password }, jar.header());
  jar.store(res);
  return { res, jar, fields: res.body.includes('action="/oauth/authorize/consent"') ? hiddenFields(res.body, '/oauth/authorize/consent') : {} };
}

/** Errors before any user interaction are an error page naming the error, never a redirect (no open redirector). */
const expectErrorPage = (res: { statusCode: number; headers: Record<string, unknown>; body: string }, error: string) => {
  expect(res.statusCode).toBe(400);
  expect(res.headers.location).toBeUndefined();
  expect(res.headers['content-type']).toMatch(/^text\/html/);
  expect(res.body).toContain(`${error}:`);
  return res.body;
};

describe('GET /oauth/authorize: requests that are refused', () => {
  it('shows an HTML error page, never a redirect, for an unknown client or redirect_uri', async () => {
    for (const u of [
      url({ clientId: 'unknown-client' }),
      url({ redirectUri: 'https://evil.example/cb' }),
      url({ redirectUri: 'http://127.0.0.1:8976/other-path' }),
      url({ redirectUri: 'http://localhost:8976/callback' }),
      url({ clientId: '' }),
    ]) {
      const res = await get(u);
      expect(res.statusCode, u).toBe(400);
      expect(res.headers.location).toBeUndefined();
      expect(res.headers['content-type']).toMatch(/^text\/html/);
      expect(res.body).toContain('<h1>');
    }
  });

  it('requires PKCE with S256: plain, absent method and absent challenge fail with an error page', async () => {
    const plain = await get(url({ extra: { code_challenge_method: 'plain' } }));
    expect(expectErrorPage(plain, 'invalid_request')).toMatch(/S256/);
    const q = new URLSearchParams({ response_type: 'code', client_id: client.client_id, redirect_uri: REDIRECT, state: 'st-123' });
    expectErrorPage(await get(`/oauth/authorize?${q}`), 'invalid_request');
    expectErrorPage(await get(`/oauth/authorize?${q}&code_challenge=${pkcePair().challenge}`), 'invalid_request');
    expectErrorPage(await get(`/oauth/authorize?${q}&code_challenge=short&code_challenge_method=S256`), 'invalid_request');
  });

  it('refuses other response types and foreign resources', async () => {
    expectErrorPage(await get(url({ extra: { response_type: 'token' } })), 'unsupported_response_type');
    for (const resource of ['https://evil.example/mcp', `${TEST_ORIGIN}/v1`, `${TEST_ORIGIN}/mcp#x`, 'not-a-url']) {
      expectErrorPage(await get(url({ resource })), 'invalid_target');
    }
  });

  it('accepts our resources with or without a trailing slash, unknown parameters and another loopback port', async () => {
    for (const u of [
      url({ resource: `${TEST_ORIGIN}/mcp/` }),
      url({ resource: `${TEST_ORIGIN}/` }),
      url({ resource: `${TEST_ORIGIN}/sse` }),
      url({ extra: { prompt: 'consent', foo: 'bar' } }),
      url({ redirectUri: 'http://127.0.0.1:51234/callback' }),
      url({ scope: 'mcp unknown:scope' }),
    ]) {
      const res = await get(u);
      expect(res.statusCode, u).toBe(200);
      expect(res.body).toContain('<label for="email">Email</label>');
    }
  });
});

describe('the page', () => {
  it('is framing-proof, uncached and has a labelled sign-in form', async () => {
    const res = await get(url());
    expect(res.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(res.headers['content-security-policy']).toContain("default-src 'none'");
    expect(res.headers['x-frame-options']).toBe('DENY');
    expect(res.headers['cache-control']).toBe('no-store');
    // Its forms post here, or send the browser back to the client's redirect URI, nowhere else.
    expect(res.headers['content-security-policy']).toContain(`form-action 'self' ${new URL(REDIRECT).origin}`);
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['referrer-policy']).toBe('no-referrer');
    // HSTS is the TLS terminator's; an opener-policy would cut a client's popup off from it.
    expect(res.headers['strict-transport-security']).toBeUndefined();
    expect(res.headers['cross-origin-opener-policy']).toBeUndefined();
    expect(res.body).toContain('<html lang="en">');
    expect(res.body).toContain('<label for="password">Password</label>');
    expect(res.body).not.toContain('<script');
    expect(res.body).toContain('Test client');
  });

  it('sets HttpOnly SameSite=Lax cookies with plain names on http', async () => {
    const { res } = await signedIn();
    const cookies = ([] as string[]).concat(res.headers['set-cookie'] ?? []);
    const session = cookies.find((c) => c.startsWith('sb_session='));
    expect(session).toMatch(/HttpOnly/);
    expect(session).toMatch(/SameSite=Lax/);
    expect(session).not.toMatch(/Secure/);
  });

  it('uses __Host- cookies with Secure when PUBLIC_URL is https', async () => {
    const https = await createTestApp({ env: { PUBLIC_URL: 'https://switchboard.example.com' } });
    try {
      const c = await registerClient(https.app);
      const res = await https.app.inject({ method: 'GET', url: authorizeUrl({ clientId: c.client_id, redirectUri: c.redirect_uris[0]!, challenge: pkcePair().challenge, state: 's' }) });
      const cookie = ([] as string[]).concat(res.headers['set-cookie'] ?? []).find((x) => x.startsWith('__Host-sb_csrf='));
      expect(cookie).toMatch(/; Secure/);
      expect(cookie).toMatch(/Path=\//);
      expect(cookie).not.toMatch(/Domain=/i);
    } finally {
      await https.close();
    }
  });

  it('gives the same message for an unknown email and a wrong password', async () => {
    const message = (body: string) => body.match(/role="alert"[^>]*>([^<]*)</)?.[1];
    const unknown = await signedIn(url(), { ...user, email: 'nobody@example.test' });
    const wrong = await signedIn(url(), { ...user, password: 'wrong password' });
    expect(message(unknown.res.body)).toBe('Incorrect email or password.');
    expect(message(wrong.res.body)).toBe(message(unknown.res.body));
    expect(unknown.res.statusCode).toBe(wrong.res.statusCode);
    expect(unknown.res.body).not.toContain('action="/oauth/authorize/consent"');
    expect(unknown.res.headers['set-cookie']?.toString() ?? '').not.toContain('sb_session=');
  });

  it('shows the client, its redirect host and one unchecked, labelled checkbox per category', async () => {
    const { res } = await signedIn();
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain('Test client');
    expect(res.body).toContain('127.0.0.1:8976');
    for (const id of CATEGORY_IDS) {
      expect(res.body).toContain(`<label for="category-${id}">${id}</label>`);
      expect(res.body).toMatch(new RegExp(`<input type="checkbox" id="category-${id}" name="categories" value="${id}" aria-describedby="category-${id}-description">`));
    }
    expect(res.body).not.toMatch(/type="checkbox"[^>]*checked/);
    // Read and change, or read only: radio buttons, read and change chosen.
    expect(res.body).toMatch(/<input type="radio" id="access-write" name="access" value="write" checked>/);
    expect(res.body).toMatch(/<input type="radio" id="access-read" name="access" value="read">/);
    expect(res.body).toMatch(/<button[^>]*value="approve">Approve<\/button>/);
    expect(res.body).toMatch(/<button[^>]*value="deny">Deny<\/button>/);
  });

  it('Read only gives the tools that only read: the others are unknown tools', async () => {
    const mcp = (token: string, body: unknown) =>
      t.app.inject({
        method: 'POST',
        url: '/mcp',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
        payload: JSON.stringify(body),
      });
    const tokenFor = async (access: 'read' | 'write') => {
      const { code, verifier } = await authorizeWithForms(t.app, { clientId: client.client_id, redirectUri: REDIRECT, email: user.email, password: user.password, categories: ['contacts', 'messages'], access });
      return (await exchangeCode(t.app, { clientId: client.client_id, code, verifier, redirectUri: REDIRECT })).json.access_token as string;
    };
    const readOnly = await tokenFor('read');
    const full = await tokenFor('write');
    const names = async (token: string) => ((await mcp(token, { jsonrpc: '2.0', id: 1, method: 'tools/list' })).json().result.tools as Array<{ name: string; annotations: { readOnlyHint: boolean } }>);
    const readTools = await names(readOnly);
    const allTools = await names(full);
    expect(readTools.length).toBeGreaterThan(0);
    expect(readTools.every((tool) => tool.annotations.readOnlyHint)).toBe(true);
    expect(readTools.map((tool) => tool.name)).toEqual(allTools.filter((tool) => tool.annotations.readOnlyHint).map((tool) => tool.name));
    expect(allTools.some((tool) => tool.name === 'contacts_write')).toBe(true);
    const call = await mcp(readOnly, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'contacts_write', arguments: { method: 'create', firstName: 'Nope' } } });
    expect(call.json().error).toMatchObject({ code: -32602, message: 'Tool contacts_write not found' });
  });

  it('remembers the sign-in: the next authorization goes straight to consent', async () => {
    const { jar } = await signedIn();
    const again = await get(url(), jar.header());
    expect(again.body).toContain('action="/oauth/authorize/consent"');
    expect(again.body).not.toContain('action="/oauth/authorize/sign-in"');
  });
});

describe('form posts', () => {
  it('refuses a missing or wrong CSRF token with a 403 page', async () => {
    const { jar, fields } = await signedIn();
    const { csrf: _csrf, ...noCsrf } = fields;
    const missing = await post('/oauth/authorize/consent', { ...noCsrf, decision: 'approve' }, jar.header());
    expect(missing.statusCode).toBe(403);
    expect(missing.headers.location).toBeUndefined();
    expect(missing.headers['content-type']).toMatch(/^text\/html/);
    const wrong = await post('/oauth/authorize/consent', { ...fields, csrf: 'A'.repeat(32), decision: 'approve' }, jar.header());
    expect(wrong.statusCode).toBe(403);
    const noCookie = await post('/oauth/authorize/consent', { ...fields, decision: 'approve' }, '');
    expect(noCookie.statusCode).toBe(403);
    const page = await get(url());
    const signIn = await post('/oauth/authorize/sign-in', { ...hiddenFields(page.body, '/oauth/authorize/sign-in'), email: user.email, password: user.password }, '');
    expect(signIn.statusCode).toBe(403);
  });

  it('Deny redirects with access_denied, state and iss', async () => {
    const { jar, fields } = await signedIn();
    const res = await post('/oauth/authorize/consent', { ...fields, categories: ['contacts'], decision: 'deny' }, jar.header());
    expect(res.statusCode).toBe(303);
    const loc = new URL(String(res.headers.location));
    expect(loc.searchParams.get('error')).toBe('access_denied');
    expect(loc.searchParams.get('state')).toBe('st-123');
    expect(loc.searchParams.get('iss')).toBe(TEST_ORIGIN);
    expect(loc.searchParams.get('code')).toBeNull();
  });

  it('consent after the session ended asks to sign in again', async () => {
    const { fields, jar } = await signedIn();
    await t.database.db.delete(oauthSessions);
    const res = await post('/oauth/authorize/consent', { ...fields, decision: 'approve' }, jar.header());
    expect(res.statusCode).toBe(401);
    expect(res.body).toContain('action="/oauth/authorize/sign-in"');
  });

  it('the CSRF token is bound to the session: new at sign-in, and no good without that session', async () => {
    const page = await get(url());
    const jar = new CookieJar();
    jar.store(page);
    const before = hiddenFields(page.body, '/oauth/authorize/sign-in');
    const { fields, jar: signedJar } = await signedIn();
    expect(fields.csrf).toBeDefined();
    expect(fields.csrf).not.toBe(before.csrf);
    // The pre-sign-in token with the session cookie: refused.
    const stale = await post('/oauth/authorize/consent', { ...fields, csrf: before.csrf!, decision: 'approve' }, signedJar.header());
    expect(stale.statusCode).toBe(403);
    // The session's token without the session cookie: refused.
    const csrfOnly = signedJar.header().split('; ').filter((c) => c.startsWith('sb_csrf=')).join('; ');
    expect((await post('/oauth/authorize/consent', { ...fields, decision: 'approve' }, csrfOnly)).statusCode).toBe(403);
    // A second sign-in gives another token.
    expect((await signedIn()).fields.csrf).not.toBe(fields.csrf);
  });

  it('tampered hidden fields are checked again', async () => {
    const { jar, fields } = await signedIn();
    const res = await post('/oauth/authorize/consent', { ...fields, redirect_uri: 'https://evil.example/cb', decision: 'approve' }, jar.header());
    expect(res.statusCode).toBe(400);
    expect(res.headers.location).toBeUndefined();
  });

  it('Approve with nothing ticked gives a grant with no categories; missing scope means mcp', async () => {
    const pkce = pkcePair();
    const { code } = await authorizeWithForms(t.app, { clientId: client.client_id, redirectUri: REDIRECT, email: user.email, password: user.password, categories: [], pkce });
    const tokens = await exchangeCode(t.app, { clientId: client.client_id, code, verifier: pkce.verifier, redirectUri: REDIRECT });
    expect(tokens.json.scope).toBe('mcp');
    const grant = await verifyAccessToken(t.database.db, tokens.json.access_token, () => new Date());
    expect(grant).toMatchObject({ categories: [], scopes: ['mcp'], userId: user.id });
  });

  it('binds the normalised resource and ignores unknown categories and scopes', async () => {
    const r = await authorizeWithForms(t.app, {
      clientId: client.client_id,
      redirectUri: REDIRECT,
      email: user.email,
      password: user.password,
      categories: ['contacts', 'bogus', 'contacts'],
      scope: 'offline_access something',
      resource: `${TEST_ORIGIN}/mcp/`,
      extra: { prompt: 'consent' },
    });
    expect(r.redirectUrl.searchParams.get('state')).toBe(r.state);
    expect(r.redirectUrl.searchParams.get('iss')).toBe(TEST_ORIGIN);
    const tokens = await exchangeCode(t.app, { clientId: client.client_id, code: r.code, verifier: r.verifier, redirectUri: REDIRECT });
    expect(tokens.json.scope).toBe('mcp offline_access');
    const grant = await verifyAccessToken(t.database.db, tokens.json.access_token, () => new Date());
    expect(grant).toMatchObject({ categories: ['contacts'], resource: `${TEST_ORIGIN}/mcp` });
  });

  it('a loopback redirect on another port is accepted and must be repeated at the token endpoint', async () => {
    const other = 'http://127.0.0.1:61000/callback';
    const r = await authorizeWithForms(t.app, { clientId: client.client_id, redirectUri: other, email: user.email, password: user.password, categories: ['messages'] });
    expect(`${r.redirectUrl.origin}${r.redirectUrl.pathname}`).toBe(other);
    expect((await exchangeCode(t.app, { clientId: client.client_id, code: r.code, verifier: r.verifier, redirectUri: REDIRECT })).json.error).toBe('invalid_grant');
    expect((await exchangeCode(t.app, { clientId: client.client_id, code: r.code, verifier: r.verifier, redirectUri: other })).status).toBe(200);
  });

  it('offline_access is not granted to a client that did not register the refresh_token grant', async () => {
    const codeOnly = await registerClient(t.app, { grant_types: ['authorization_code'] });
    const r = await authorizeWithForms(t.app, { clientId: codeOnly.client_id, redirectUri: REDIRECT, email: user.email, password: user.password, categories: [], scope: 'mcp offline_access' });
    const tokens = await exchangeCode(t.app, { clientId: codeOnly.client_id, code: r.code, verifier: r.verifier, redirectUri: REDIRECT });
    expect(tokens.json.scope).toBe('mcp');
    expect(tokens.json.refresh_token).toBeUndefined();
  });
});
