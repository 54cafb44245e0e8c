import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSignIn, SIGN_IN_POLICY, type SignInPolicy } from '../../src/oauth/sign-in.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { testDbKind } from '../helpers/database.js';
import { authorizeUrl, CookieJar, formBody, hiddenFields, pkcePair, registerClient, type RegisteredClient } from '../helpers/oauth-flow.js';
import { skipWithout } from '../helpers/requirements.js';

/** Failed sign-ins are limited per account and per IP; a success resets the account's count. */
const SIGN_IN_ACCOUNT_LIMIT = SIGN_IN_POLICY.account;
const SIGN_IN_IP_LIMIT = SIGN_IN_POLICY.ip;
const redisUrl = process.env.TEST_REDIS_URL;

let t: TestApp;
let client: RegisteredClient;
let user: { id: string; email: string; password: string };
const REDIRECT = 'http://127.0.0.1:8976/callback';

beforeAll(async () => {
  t = await createTestApp();
  user = await (await t.tenant()).user();
  client = await registerClient(t.app, { redirect_uris: [REDIRECT] });
});
afterAll(() => t.close());

/** One sign-in attempt from `ip` (the test app trusts X-Forwarded-For): status and page. */
async function signIn(email: string, password: string, ip: string) {
  const headers = { 'x-forwarded-for': ip };
  const page = await t.app.inject({ method: 'GET', url: authorizeUrl({ clientId: client.client_id, redirectUri: REDIRECT, challenge: pkcePair().challenge, state: 's' }), headers });
  const jar = new CookieJar();
  jar.store(page);
  const res = await t.app.inject({
    method: 'POST',
    url: '/oauth/authorize/sign-in',
    headers: { ...headers, 'content-type': 'application/x-www-form-urlencoded', cookie: jar.header() },
    payload: formBody({ ...hiddenFields(page.body, '/oauth/authorize/sign-in'), email, password }),
  });
  return { status: res.statusCode, body: res.body, retryAfter: res.headers['retry-after'], consent: res.body.includes('action="/oauth/authorize/consent"') };
}

describe('sign-in limits', () => {
  it('locks an account after its failures, whatever the IP, and the correct password too, for the lockout', async () => {
    for (let i = 0; i < SIGN_IN_ACCOUNT_LIMIT.points; i++) {
      const res = await signIn(user.email, 'wrong password', `10.0.0.${i + 1}`);
      expect(res.status).toBe(200);
      expect(res.body).toContain('Incorrect email or password.');
    }
    const locked = await signIn(user.email, user.password, '10.0.1.1');
    expect(locked.status).toBe(429);
    // The first lockout lasts its full time from the failure that caused it.
    expect(Number(locked.retryAfter)).toBeGreaterThan(SIGN_IN_POLICY.lockout.firstSeconds - 60);
    expect(Number(locked.retryAfter)).toBeLessThanOrEqual(SIGN_IN_POLICY.lockout.firstSeconds);
    expect(locked.body).toContain('Too many failed sign-ins');
    expect(locked.consent).toBe(false);
    // An unknown email is counted the same way: nothing tells the two apart.
    for (let i = 0; i < SIGN_IN_ACCOUNT_LIMIT.points; i++) await signIn('nobody@example.test', 'x', `10.0.2.${i + 1}`);
    expect((await signIn('nobody@example.test', 'x', '10.0.2.99')).status).toBe(429);
  });

  it('a success resets the account count', async () => {
    const other = await (await t.tenant()).user();
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < SIGN_IN_ACCOUNT_LIMIT.points - 1; i++) expect((await signIn(other.email, 'wrong', '10.1.0.1')).status).toBe(200);
      expect((await signIn(other.email, other.password, '10.1.0.2')).consent).toBe(true);
    }
  });

  it('limits failures per IP across accounts', async () => {
    const ip = '10.2.0.1';
    for (let i = 0; i < SIGN_IN_IP_LIMIT.points; i++) expect((await signIn(`guess${i}@example.test`, 'x', ip)).status).toBe(200);
    const fresh = await (await t.tenant()).user();
    expect((await signIn(fresh.email, fresh.password, ip)).status).toBe(429);
    expect((await signIn(fresh.email, fresh.password, '10.2.0.2')).consent).toBe(true);
  });
});

/**
 * The delay grows: each lockout within the memory lasts twice the one before, up to the cap, and a
 * success forgets it all. Real time with a policy scaled down to seconds; with Redis, two processes'
 * sign-ins (two limiters on one Redis) share the counts. The lockouts are kept in memory or in Redis, never
 * in the database, so these run once, on the embedded database (the tests above check the sign-in's own
 * database work on both): 11 s of real waiting each time.
 */
describe.runIf(testDbKind === 'pglite').each([
  ['in memory', false],
  ['shared through Redis', true],
] as const)('growing lockouts (%s)', (_name, shared) => {
  const policy: SignInPolicy = { account: { points: 3, durationSeconds: 60 }, lockout: { firstSeconds: 1, maxSeconds: 2, memorySeconds: 60 }, ip: { points: 1000, durationSeconds: 60 } };
  const skip = shared && skipWithout(!!redisUrl, 'Redis (TEST_REDIS_URL)');
  const redises: Redis[] = [];
  afterAll(() => Promise.all(redises.map((r) => r.quit())));

  it.skipIf(skip)('locks for 1 s, then 2 s, then the 2 s cap; a success resets the lockouts', async () => {
    const connect = () => {
      const r = new Redis(redisUrl!, { keyPrefix: `test-${randomUUID()}:` });
      redises.push(r);
      return r;
    };
    const redis = shared ? connect() : undefined;
    const one = createSignIn(t.database.db, redis, policy);
    // With Redis, a second process (its own limiters, the same store) sees and adds to the same counts.
    const other = shared ? createSignIn(t.database.db, redis, policy) : one;
    const person = await (await t.tenant()).user();
    const failThrice = async () => {
      for (const signIn of [one, other, one]) expect((await signIn('10.9.0.1', person.email, 'wrong')).kind).toBe('failed');
    };
    const lockedFor = async () => {
      const outcome = await other('10.9.0.1', person.email, person.password);
      expect(outcome.kind).toBe('wait');
      return outcome.kind === 'wait' ? outcome.seconds : 0;
    };
    const waitOut = (seconds: number) => new Promise((r) => setTimeout(r, seconds * 1000 + 100));

    await failThrice();
    expect(await lockedFor()).toBe(1);
    await waitOut(1);
    await failThrice();
    expect(await lockedFor()).toBe(2);
    await waitOut(2);
    await failThrice();
    expect(await lockedFor()).toBe(2); // the cap
    await waitOut(2);
    expect((await one('10.9.0.1', person.email, person.password)).kind).toBe('ok');
    await failThrice();
    expect(await lockedFor()).toBe(1); // forgotten by the success
  });
});
