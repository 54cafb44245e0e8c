import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(() => t.close());

let ipCounter = 0;
/** Each call from a fresh address unless one is given, so only the rate-limit test meets the limit. */
const register = (body: unknown, ip = `203.0.113.${++ipCounter}`) =>
  t.app.inject({ method: 'POST', url: '/oauth/register', headers: { 'content-type': 'application/json', 'x-forwarded-for': ip }, payload: JSON.stringify(body) });

describe('POST /oauth/register', () => {
  it('registers a public client: client_id, no secret, metadata echoed, 201', async () => {
    const res = await register({ client_name: 'Claude', redirect_uris: ['http://127.0.0.1:33418/callback'], token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], unknown_field: 1 });
    expect(res.statusCode).toBe(201);
    expect(res.headers['cache-control']).toBe('no-store');
    const body = res.json();
    expect(body).toMatchObject({ client_id: expect.any(String), client_id_issued_at: expect.any(Number), client_name: 'Claude', redirect_uris: ['http://127.0.0.1:33418/callback'], token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'] });
    expect(body.client_secret).toBeUndefined();
    expect(body.unknown_field).toBeUndefined();
  });

  it('gives confidential clients a secret (client_secret_basic is the default method)', async () => {
    const res = await register({ redirect_uris: ['https://app.example.com/oauth/callback'] });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toMatchObject({ token_endpoint_auth_method: 'client_secret_basic', client_secret: expect.any(String), client_secret_expires_at: 0 });
  });

  it.each([
    'https://app.example.com/cb',
    'http://127.0.0.1/callback',
    'http://[::1]:8080/callback',
    'http://localhost:3000/callback',
    'cursor://anysphere.cursor-retrieval/oauth/user-switchboard/callback',
    'vscode://vscode.github-authentication/did-authenticate',
    'com.example.app:/oauth2redirect',
  ])('accepts the redirect URI %s', async (uri) => {
    const res = await register({ redirect_uris: [uri], token_endpoint_auth_method: 'none' });
    expect(res.statusCode).toBe(201);
    expect(res.json().redirect_uris).toEqual([uri]);
  });

  it.each([
    'javascript:alert(1)',
    'JavaScript:alert(1)//',
    'data:text/html,hi',
    'file:///etc/passwd',
    'vbscript:msgbox',
    'blob:https://example.com/x',
    'about:blank',
    'http://example.com/callback',
    'http://192.168.1.10/callback',
    'https://app.example.com/cb#fragment',
    'not a uri',
    '/relative/path',
    'https:///cb',
    'https:cb.example/x',
    'https:\\\\evil.example\\cb',
    'http:///127.0.0.1/cb',
  ])('refuses the redirect URI %s', async (uri) => {
    const res = await register({ redirect_uris: [uri] });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: 'invalid_redirect_uri', error_description: expect.any(String) });
  });

  it('refuses invalid metadata with invalid_client_metadata', async () => {
    for (const body of [
      {},
      { redirect_uris: [] },
      { redirect_uris: 'https://app.example.com/cb' },
      { redirect_uris: ['https://app.example.com/cb'], token_endpoint_auth_method: 'private_key_jwt' },
      { redirect_uris: ['https://app.example.com/cb'], grant_types: ['client_credentials'] },
      { redirect_uris: ['https://app.example.com/cb'], grant_types: ['refresh_token'] },
      { redirect_uris: ['https://app.example.com/cb'], response_types: ['token'] },
      { redirect_uris: ['https://app.example.com/cb'], logo_uri: 'javascript:alert(1)' },
      { redirect_uris: ['https://app.example.com/cb'], client_name: 'x'.repeat(1000) },
    ]) {
      const res = await register(body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(['invalid_client_metadata', 'invalid_redirect_uri']).toContain(res.json().error);
      expect(res.json().error_description).toEqual(expect.any(String));
    }
    expect((await register({ redirect_uris: [] })).json().error).toBe('invalid_redirect_uri');
    expect((await register({ redirect_uris: ['https://a.example/cb'], grant_types: ['client_credentials'] })).json().error).toBe('invalid_client_metadata');
    const notJson = await t.app.inject({ method: 'POST', url: '/oauth/register', headers: { 'content-type': 'application/json' }, payload: '[1,' });
    expect(notJson.statusCode).toBe(400);
    expect(notJson.json().error).toBe('invalid_client_metadata');
    const array = await register([1, 2]);
    expect(array.json().error).toBe('invalid_client_metadata');
  });

  it('allows 10 registrations per 60 s per IP; the 11th is a 429 with Retry-After', async () => {
    const body = { redirect_uris: ['https://app.example.com/cb'], token_endpoint_auth_method: 'none' };
    for (let i = 0; i < 10; i++) expect((await register(body, '192.0.2.77')).statusCode).toBe(201);
    const limited = await register(body, '192.0.2.77');
    expect(limited.statusCode).toBe(429);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    expect(Number(limited.headers['retry-after'])).toBeLessThanOrEqual(60);
    expect(limited.json().error).toBe('rate_limited');
    expect(Object.keys(limited.headers).filter((h) => h.startsWith('x-ratelimit'))).toEqual([]);
    expect((await register(body, '192.0.2.78')).statusCode).toBe(201);
  });

  it('creates at most 100 clients per IP per day; refused attempts do not count', async () => {
    const body = { redirect_uris: ['https://app.example.com/cb'], token_endpoint_auth_method: 'none' };
    const ip = '192.0.2.99';
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() });
    try {
      expect((await register({ redirect_uris: [] }, ip)).statusCode).toBe(400);
      for (let minute = 0; minute < 10; minute++) {
        for (let i = 0; i < (minute === 0 ? 9 : 10); i++) expect((await register(body, ip)).statusCode).toBe(201);
        vi.setSystemTime(Date.now() + 61_000);
      }
      expect((await register(body, ip)).statusCode).toBe(201); // the 100th client
      vi.setSystemTime(Date.now() + 61_000);
      const refused = await register(body, ip);
      expect(refused.statusCode).toBe(429);
      expect(refused.json().error_description).toMatch(/100 per day/);
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(22 * 3600);
      expect((await register(body, '192.0.2.100')).statusCode).toBe(201);
    } finally {
      vi.useRealTimers();
    }
  });
});
