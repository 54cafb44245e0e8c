import { describe, expect, it } from 'vitest';
import { TEST_ORIGIN, useTestApp } from '../helpers/app.js';

/**
 * CORS only where a browser calls: the OAuth documents and endpoints and the MCP transports. Everything
 * else (the REST API, health checks, the API reference, the sign-in pages) neither sends CORS headers nor
 * runs the CORS hook at all.
 */
const { t, a } = useTestApp();

const corsHeaders = (headers: Record<string, unknown>) => Object.keys(headers).filter((h) => h.startsWith('access-control-'));
const browser = { origin: 'https://client.example' };

/** Every route of `method` with the names of its `onRequest` hooks, read from Fastify's route tree. */
function onRequestHooks(method: string): Map<string, string> {
  const tree = t.app.printRoutes({ method, includeHooks: true, commonPrefix: false });
  const routes = new Map<string, string>();
  const stack: string[] = [];
  let last: string | undefined;
  for (const line of tree.split('\n')) {
    const at = line.search(/[^\s│├└─]/);
    if (at < 0) continue;
    const text = line.slice(at);
    if (text.startsWith('•')) {
      if (text.startsWith('• (onRequest)') && last !== undefined) routes.set(last, text);
      continue;
    }
    const segment = /^(\S+) \(/.exec(text)?.[1];
    if (!segment) continue;
    const depth = at / 4;
    stack.length = depth;
    stack[depth] = segment;
    last = stack.join('');
  }
  return routes;
}

describe('CORS where a browser calls', () => {
  it.each([
    ['GET', '/.well-known/oauth-authorization-server', '*'],
    ['GET', '/.well-known/oauth-protected-resource/mcp', '*'],
    ['OPTIONS', '/oauth/token', '*'],
    ['OPTIONS', '/oauth/register', '*'],
  ])('%s %s answers a browser origin with Access-Control-Allow-Origin %s', async (method, url, allowed) => {
    const res = await t.app.inject({ method: method as 'GET', url, headers: { ...browser, 'access-control-request-method': 'POST' } });
    expect(res.statusCode).toBeLessThan(300);
    expect(res.headers['access-control-allow-origin']).toBe(allowed);
  });

  it('the MCP transport answers a preflight from an origin it lets through, with its own origin', async () => {
    const res = await t.app.inject({ method: 'OPTIONS', url: '/mcp', headers: { origin: TEST_ORIGIN, 'access-control-request-method': 'POST' } });
    expect(res.statusCode).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe(TEST_ORIGIN);
    expect(res.headers['access-control-expose-headers']).toMatch(/WWW-Authenticate/);
  });
});

describe('no CORS anywhere else', () => {
  it.each([
    ['GET', '/healthz'],
    ['GET', '/readyz'],
    ['GET', '/v1/openapi.json'],
    ['GET', '/v1/contacts'],
    ['GET', '/v1/contacts/00000000-0000-4000-8000-000000000000'],
    ['POST', '/v1/contacts'],
    ['OPTIONS', '/v1/contacts'],
    ['GET', '/oauth/authorize'],
    ['GET', '/no/such/path'],
  ])('%s %s sends no CORS headers to a browser origin', async (method, url) => {
    const res = await t.app.inject({ method: method as 'GET', url, headers: { ...browser, authorization: `Bearer ${a.key}`, 'access-control-request-method': 'GET' } });
    expect(corsHeaders(res.headers)).toEqual([]);
    expect(String(res.headers.vary ?? '')).not.toMatch(/origin/i);
  });

  it('runs the CORS hook only on the routes of the OAuth server and the MCP transports', () => {
    for (const method of ['GET', 'POST', 'PATCH', 'DELETE', 'OPTIONS']) {
      const routes = onRequestHooks(method);
      const withCors = [...routes].filter(([, hooks]) => hooks.includes('handleCors')).map(([url]) => url);
      const outside = withCors.filter((url) => !/^\/(oauth|account|\.well-known|mcp|sse)(\/|$)|^\*$/.test(url));
      expect(outside, `${method} routes with the CORS hook`).toEqual([]);
      if (method === 'GET') expect(routes.get('/v1/contacts/:id')).toBeDefined();
    }
    const posts = onRequestHooks('POST');
    expect(posts.get('/mcp')).toContain('handleCors');
    expect(posts.get('/oauth/token')).toContain('handleCors');
  });
});
