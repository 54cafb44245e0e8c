import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, TEST_ORIGIN, type TestApp } from '../helpers/app.js';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(() => t.close());

const get = (url: string) => t.app.inject({ method: 'GET', url });

describe('metadata documents', () => {
  it('publishes RFC 8414 authorization-server metadata', async () => {
    const res = await get('/.well-known/oauth-authorization-server');
    expect(res.statusCode).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBe('*');
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const m = res.json();
    expect(m).toMatchObject({
      issuer: TEST_ORIGIN,
      authorization_endpoint: `${TEST_ORIGIN}/oauth/authorize`,
      token_endpoint: `${TEST_ORIGIN}/oauth/token`,
      registration_endpoint: `${TEST_ORIGIN}/oauth/register`,
      code_challenge_methods_supported: ['S256'],
      scopes_supported: ['mcp', 'offline_access'],
      response_types_supported: ['code'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      token_endpoint_auth_methods_supported: ['none', 'client_secret_basic', 'client_secret_post'],
      authorization_response_iss_parameter_supported: true,
    });
    expect(m.issuer.endsWith('/')).toBe(false);
  });

  it.each([
    ['/.well-known/oauth-protected-resource', TEST_ORIGIN],
    ['/.well-known/oauth-protected-resource/mcp', `${TEST_ORIGIN}/mcp`],
    ['/.well-known/oauth-protected-resource/sse', `${TEST_ORIGIN}/sse`],
  ])('publishes RFC 9728 metadata at %s', async (path, resource) => {
    const res = await get(path);
    expect(res.statusCode).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBe('*');
    expect(res.json()).toMatchObject({ resource, authorization_servers: [TEST_ORIGIN], scopes_supported: ['mcp', 'offline_access'], bearer_methods_supported: ['header'] });
  });

  it('answers unknown well-known paths with a JSON 404, never HTML', async () => {
    for (const path of ['/.well-known/openid-configuration', '/.well-known/oauth-authorization-server/mcp', '/.well-known/nothing/here']) {
      const res = await get(path);
      expect(res.statusCode).toBe(404);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.json()).toMatchObject({ error: 'not_found' });
    }
  });

  it('answers CORS preflights without credentials', async () => {
    for (const url of ['/.well-known/oauth-authorization-server', '/oauth/token', '/oauth/register']) {
      const res = await t.app.inject({ method: 'OPTIONS', url, headers: { origin: 'https://client.example', 'access-control-request-method': 'POST' } });
      expect(res.statusCode).toBe(204);
      expect(res.headers['access-control-allow-origin']).toBe('*');
      expect(res.headers['access-control-allow-credentials']).toBeUndefined();
    }
  });

  it('emits no X-RateLimit headers', async () => {
    const res = await get('/.well-known/oauth-authorization-server');
    expect(Object.keys(res.headers).filter((h) => h.startsWith('x-ratelimit'))).toEqual([]);
  });
});

describe('unknown OAuth endpoints', () => {
  it('answer a JSON 404 in the OAuth error shape', async () => {
    for (const [method, url] of [['GET', '/oauth/nothing'], ['GET', '/oauth/token'], ['DELETE', '/oauth/register']] as const) {
      const res = await t.app.inject({ method, url });
      expect(res.statusCode, url).toBe(404);
      expect(res.json()).toEqual({ error: 'not_found', error_description: expect.any(String) });
    }
  });
});
