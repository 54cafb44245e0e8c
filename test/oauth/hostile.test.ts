import type { InjectOptions } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { authorizeUrl, CookieJar, formBody, hiddenFields, pkcePair, registerClient } from '../helpers/oauth-flow.js';

/** No input, however odd, makes the authorization server answer 5xx. */

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(() => t.close());

const form = { 'content-type': 'application/x-www-form-urlencoded' };
const json = { 'content-type': 'application/json', 'x-forwarded-for': '198.18.0.1' };

describe('hostile input', () => {
  it('answers 4xx, never 5xx', async () => {
    const client = await registerClient(t.app);
    const requests: InjectOptions[] = [
      { method: 'GET', url: '/oauth/authorize?client_id=%00' },
      { method: 'GET', url: `/oauth/authorize?client_id=${client.client_id}&redirect_uri=%00` },
      { method: 'GET', url: `/oauth/authorize?client_id=${client.client_id}&client_id=x` },
      { method: 'GET', url: `${authorizeUrl({ clientId: client.client_id, redirectUri: client.redirect_uris[0]!, challenge: pkcePair().challenge, state: '%00'.repeat(3) })}&resource=%00` },
      { method: 'GET', url: `/oauth/authorize?client_id[a]=1` },
      { method: 'POST', url: '/oauth/register', headers: json, payload: JSON.stringify({ redirect_uris: ['https://a.example/cb'], client_name: 'nul\u0000byte' }) },
      { method: 'POST', url: '/oauth/register', headers: json, payload: JSON.stringify({ redirect_uris: ['https://a.example/\u0000'] }) },
      { method: 'POST', url: '/oauth/register', headers: json, payload: 'null' },
      { method: 'POST', url: '/oauth/register', headers: json, payload: JSON.stringify({ redirect_uris: [{}], __proto__: { x: 1 } }) },
      { method: 'POST', url: '/oauth/register', headers: { ...json, 'content-type': 'application/x-www-form-urlencoded' }, payload: 'redirect_uris=https://a.example/cb' },
      { method: 'POST', url: '/oauth/token', headers: form, payload: 'grant_type=authorization_code&client_id=%00&code=%00&code_verifier=%00' },
      { method: 'POST', url: '/oauth/token', headers: form, payload: `grant_type=refresh_token&client_id=${client.client_id}&refresh_token=%00` },
      { method: 'POST', url: '/oauth/token', headers: { ...form, authorization: 'Basic %%%' }, payload: 'grant_type=refresh_token' },
      { method: 'POST', url: '/oauth/token', headers: { ...form, authorization: `Basic ${Buffer.from('no-colon').toString('base64')}` }, payload: 'grant_type=refresh_token' },
      { method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/json' }, payload: '[]' },
      { method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/json' }, payload: '"string"' },
      { method: 'POST', url: '/oauth/token', headers: form, payload: 'x'.repeat(100_000) },
      { method: 'POST', url: '/oauth/revoke', headers: form, payload: `client_id=${client.client_id}` },
      { method: 'POST', url: '/oauth/authorize/consent', headers: form, payload: '' },
      { method: 'POST', url: '/oauth/authorize/sign-in', headers: { 'content-type': 'application/json' }, payload: '{"csrf":["a"]}' },
      { method: 'GET', url: '/.well-known/%00' },
    ];
    for (const r of requests) {
      const res = await t.app.inject(r);
      expect(res.statusCode, `${r.method} ${r.url} ${String(r.payload).slice(0, 80)}: ${res.body.slice(0, 200)}`).toBeGreaterThanOrEqual(300);
      expect(res.statusCode, `${r.method} ${r.url}`).toBeLessThan(500);
    }
  });

  it('a NUL byte in the sign-in form is a failed sign-in, not an error', async () => {
    const client = await registerClient(t.app);
    const jar = new CookieJar();
    const page = await t.app.inject({ method: 'GET', url: authorizeUrl({ clientId: client.client_id, redirectUri: client.redirect_uris[0]!, challenge: pkcePair().challenge, state: 's' }) });
    jar.store(page);
    const res = await t.app.inject({
      method: 'POST',
      url: '/oauth/authorize/sign-in',
      headers: { ...form, cookie: jar.header() },
      payload: formBody({ ...hiddenFields(page.body, '/oauth/authorize/sign-in'), email: 'a\u0000@example.com', password: 'x\u0000' }),
    });
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain('Incorrect email or password.');
  });
});

describe('prototype keys', () => {
  it('a registration document with __proto__ or constructor is refused naming the key', async () => {
    for (const [key, payload] of [
      ['__proto__', '{"redirect_uris":["https://a.example/cb"],"__proto__":{"x":1}}'],
      ['constructor', '{"redirect_uris":["https://a.example/cb"],"client_name":"x","constructor":{"prototype":{}}}'],
    ] as const) {
      const res = await t.app.inject({ method: 'POST', url: '/oauth/register', headers: { 'content-type': 'application/json' }, payload });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toMatchObject({ error: 'invalid_client_metadata', error_description: `Unrecognized key: "${key}"` });
    }
  });
});
