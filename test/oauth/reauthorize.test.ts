import { and, eq, isNull } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { systemClock } from '../../src/core/clock.js';
import { oauthGrants } from '../../src/db/schema.js';
import { createGrant, issueTokens, listUserGrants, setGrantCategories, verifyAccessToken } from '../../src/oauth/grants.js';
import { useTestApp } from '../helpers/app.js';
import { authorizeWithForms, CookieJar, exchangeCode, formBody, hiddenFields, refreshTokens, registerClient } from '../helpers/oauth-flow.js';

/**
 * One grant per (person, client): signing in to the same application again updates that grant in place
 * with the newest choices, so /account/apps shows one card; tokens already issued keep the categories
 * they were issued with until they expire or are rotated.
 */

const { t, a } = useTestApp();
const db = () => t.database.db;

async function authorize(clientId: string, redirectUri: string, user: { email: string; password: string }, categories: string[]) {
  const { code, verifier } = await authorizeWithForms(t.app, { clientId, redirectUri, ...user, categories, scope: 'mcp offline_access' });
  const tokens = await exchangeCode(t.app, { clientId, code, verifier, redirectUri });
  expect(tokens.status, JSON.stringify(tokens.json)).toBe(200);
  return tokens.json as { access_token: string; refresh_token: string };
}

const live = async (userId: string, clientId: string) =>
  db()
    .select()
    .from(oauthGrants)
    .where(and(eq(oauthGrants.userId, userId), eq(oauthGrants.clientId, clientId), isNull(oauthGrants.revokedAt)));

/** The cards of /account/apps for a person (one form to change categories per connected app). */
async function cards(user: { email: string; password: string }): Promise<number> {
  const form = { 'content-type': 'application/x-www-form-urlencoded' };
  const jar = new CookieJar();
  const page = await t.app.inject({ method: 'GET', url: '/account/apps' });
  jar.store(page);
  const res = await t.app.inject({ method: 'POST', url: '/account/sign-in', headers: { ...form, cookie: jar.header() }, payload: formBody({ ...hiddenFields(page.body, '/account/sign-in'), ...user }) });
  jar.store(res);
  const apps = await t.app.inject({ method: 'GET', url: '/account/apps', headers: { cookie: jar.header() } });
  expect(apps.statusCode).toBe(200);
  return [...apps.body.matchAll(/action="\/account\/apps\/[^/]+\/categories"/g)].length;
}

describe('re-authorizing the same client', () => {
  it('twelve sign-ins leave one grant and one card', async () => {
    const ada = await a.user();
    const client = await registerClient(t.app, { client_name: 'Twelve times' });
    const redirectUri = client.redirect_uris[0]!;
    const tokens = [];
    for (let i = 0; i < 12; i++) tokens.push(await authorize(client.client_id, redirectUri, ada, ['contacts']));
    expect(await live(ada.id, client.client_id)).toHaveLength(1);
    expect((await listUserGrants(db(), ada.id)).filter((g) => g.clientId === client.client_id && g.revokedAt === null)).toHaveLength(1);
    expect(await cards(ada)).toBe(1);
    // Every token still works, all under the one grant.
    const grants = await Promise.all(tokens.map((tk) => verifyAccessToken(db(), tk.access_token, systemClock)));
    expect(new Set(grants.map((g) => g?.id)).size).toBe(1);
  });

  it('takes the newest categories; tokens already issued keep theirs until they are rotated', async () => {
    const ada = await a.user();
    const client = await registerClient(t.app, { client_name: 'Changing mind' });
    const redirectUri = client.redirect_uris[0]!;
    const first = await authorize(client.client_id, redirectUri, ada, ['contacts']);
    const second = await authorize(client.client_id, redirectUri, ada, ['messages', 'folders']);

    const [grant] = await live(ada.id, client.client_id);
    expect(grant!.categories.sort()).toEqual(['folders', 'messages']);
    expect((await verifyAccessToken(db(), first.access_token, systemClock))?.categories).toEqual(['contacts']);
    expect((await verifyAccessToken(db(), second.access_token, systemClock))?.categories.sort()).toEqual(['folders', 'messages']);

    // Rotating the old refresh token gives tokens with the grant's categories of now.
    const rotated = await refreshTokens(t.app, { clientId: client.client_id, refreshToken: first.refresh_token });
    expect(rotated.status).toBe(200);
    expect((await verifyAccessToken(db(), rotated.json.access_token, systemClock))?.categories.sort()).toEqual(['folders', 'messages']);

    // A change on the connected-apps page applies to every token of the grant.
    await setGrantCategories(db(), grant!.id, ['customers'], systemClock);
    for (const token of [first.access_token, second.access_token, rotated.json.access_token as string]) {
      expect((await verifyAccessToken(db(), token, systemClock))?.categories).toEqual(['customers']);
    }
  });

  it('keeps another person’s grant to the same client apart', async () => {
    const [ada, bob] = [await a.user(), await a.user()];
    const client = await registerClient(t.app, { client_name: 'Shared app' });
    const redirectUri = client.redirect_uris[0]!;
    await authorize(client.client_id, redirectUri, ada, ['contacts']);
    await authorize(client.client_id, redirectUri, bob, ['messages']);
    const [adaGrant] = await live(ada.id, client.client_id);
    const [bobGrant] = await live(bob.id, client.client_id);
    expect(adaGrant!.id).not.toBe(bobGrant!.id);
    expect(adaGrant!.categories).toEqual(['contacts']);
  });

  it('merges the several grants an earlier version left into one, without cutting their tokens', async () => {
    const ada = await a.user();
    const client = await registerClient(t.app, { client_name: 'Old duplicates' });
    const base = { userId: ada.id, organizationId: a.orgId, clientId: client.client_id, scopes: ['mcp'], resource: 'http://127.0.0.1:3999' };
    const old1 = await createGrant(db(), { ...base, categories: ['contacts'] });
    const old2 = await createGrant(db(), { ...base, categories: ['messages'] });
    const t1 = await issueTokens(db(), old1, systemClock);
    const t2 = await issueTokens(db(), old2, systemClock);

    const fresh = await authorize(client.client_id, client.redirect_uris[0]!, ada, ['folders']);
    const grants = await live(ada.id, client.client_id);
    expect(grants).toHaveLength(1);
    expect(grants[0]!.categories).toEqual(['folders']);
    expect(await cards(ada)).toBe(1);
    const verified = await Promise.all([t1, t2, fresh].map((tk) => verifyAccessToken(db(), tk.access_token, systemClock)));
    expect(verified.map((g) => g?.id)).toEqual([grants[0]!.id, grants[0]!.id, grants[0]!.id]);
    expect(verified.map((g) => g?.categories)).toEqual([['contacts'], ['messages'], ['folders']]);
  });
});
