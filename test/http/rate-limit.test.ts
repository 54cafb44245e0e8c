import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { useTestApp } from '../helpers/app.js';

/** REST requests are limited per API key (`REST_RATE_LIMIT` per minute): 429 RATE_LIMITED with Retry-After. */

const { t, a, b } = useTestApp({ app: { env: { REST_RATE_LIMIT: '3' } } });

describe('REST rate limit', () => {
  it('has a default that a normal client never meets, and 0 turns it off', () => {
    expect(loadConfig({}).restRateLimit).toBeGreaterThanOrEqual(600);
    expect(loadConfig({ REST_RATE_LIMIT: '0' }).restRateLimit).toBe(0);
    expect(() => loadConfig({ REST_RATE_LIMIT: '-1' })).toThrow();
  });

  it('answers 429 RATE_LIMITED with Retry-After and no X-RateLimit-* headers past the limit, per key', async () => {
    for (let i = 0; i < 3; i++) {
      const ok = await a.request('GET', '/v1/contacts');
      expect(ok.status).toBe(200);
      expect(Object.keys(ok.headers).filter((h) => h.startsWith('x-ratelimit'))).toEqual([]);
    }
    const limited = await a.request('GET', '/v1/contacts');
    expect(limited.status).toBe(429);
    expect(limited.json).toEqual({ error: { code: 'RATE_LIMITED', message: expect.any(String) } });
    const retryAfter = Number(limited.headers['retry-after']);
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(limited.headers['x-request-id']).toBeTruthy();
    expect(Object.keys(limited.headers).filter((h) => h.startsWith('x-ratelimit') || h === 'ratelimit' || h === 'ratelimit-policy')).toEqual([]);
    // Writes count against the same key too.
    expect((await a.request('POST', '/v1/contacts', {})).status).toBe(429);

    // Another key (another organization, or another key of the same one) has its own budget.
    expect((await b.request('GET', '/v1/contacts')).status).toBe(200);
    const sibling = await a.keyWith(['contacts:read']);
    expect((await sibling.request('GET', '/v1/contacts')).status).toBe(200);
  });

  it('does not count requests without a valid key against anyone (they are 401)', async () => {
    for (let i = 0; i < 5; i++) {
      const res = await t.app.inject({ method: 'GET', url: '/v1/contacts', headers: { authorization: 'Bearer nope' } });
      expect(res.statusCode).toBe(401);
    }
    const c = await t.tenant();
    expect((await c.request('GET', '/v1/contacts')).status).toBe(200);
  });
});
