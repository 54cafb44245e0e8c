import { describe, expect, it } from 'vitest';
import { systemClock } from '../../src/core/clock.js';
import { verifyAccessToken } from '../../src/oauth/grants.js';
import { useTestApp } from '../helpers/app.js';
import { CookieJar, formBody, hiddenFields, obtainTokens } from '../helpers/oauth-flow.js';

/** /account/apps without a browser: CSRF, sessions, and other people's grants. */

const { t, a, b } = useTestApp();

const form = { 'content-type': 'application/x-www-form-urlencoded' };

async function signIn(user: { email: string; password: string }) {
  const jar = new CookieJar();
  const page = await t.app.inject({ method: 'GET', url: '/account/apps' });
  jar.store(page);
  const res = await t.app.inject({ method: 'POST', url: '/account/sign-in', headers: { ...form, cookie: jar.header() }, payload: formBody({ ...hiddenFields(page.body, '/account/sign-in'), ...user }) });
  expect(res.statusCode).toBe(303);
  jar.store(res);
  const apps = await t.app.inject({ method: 'GET', url: '/account/apps', headers: { cookie: jar.header() } });
  return { jar, apps };
}

describe('connected apps', () => {
  it('refuses forms without the session CSRF token, and another person’s grant is not found', async () => {
    const ada = await a.user();
    const bob = await b.user();
    const adaApp = await obtainTokens(t.app, { ...ada, categories: ['contacts'], clientOverrides: { client_name: 'Ada app' } });
    const { jar, apps } = await signIn(bob);
    expect(apps.body).toContain('No application is connected.');
    const adaGrant = (await verifyAccessToken(t.database.db, adaApp.tokens.access_token, systemClock))!.id;
    const csrf = /name="csrf" value="([^"]+)"/.exec(apps.body)![1]!;

    const forged = await t.app.inject({ method: 'POST', url: `/account/apps/${adaGrant}/revoke`, headers: { ...form, cookie: jar.header() }, payload: formBody({ csrf: 'wrong' }) });
    expect(forged.statusCode).toBe(403);
    const foreign = await t.app.inject({ method: 'POST', url: `/account/apps/${adaGrant}/revoke`, headers: { ...form, cookie: jar.header() }, payload: formBody({ csrf }) });
    expect(foreign.statusCode).toBe(404);
    expect(await verifyAccessToken(t.database.db, adaApp.tokens.access_token, systemClock)).toBeDefined();
  });

  it('shows the app with its redirect host, and refuses an empty category list', async () => {
    const ada = await a.user();
    await obtainTokens(t.app, { ...ada, categories: ['contacts'], clientOverrides: { client_name: 'Shown app' } });
    const { jar, apps } = await signIn(ada);
    expect(apps.body).toContain('Shown app');
    expect(apps.body).toMatch(/Sends you back to <code>[^<]+<\/code>/);
    const action = /action="(\/account\/apps\/[^/]+\/categories)"/.exec(apps.body)![1]!;
    const csrf = /name="csrf" value="([^"]+)"/.exec(apps.body)![1]!;
    const none = await t.app.inject({ method: 'POST', url: action, headers: { ...form, cookie: jar.header() }, payload: formBody({ csrf }) });
    expect(none.statusCode).toBe(400);
  });
});
