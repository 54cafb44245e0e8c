import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyAccessToken } from '../../src/oauth/grants.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { authorizeWithForms, exchangeCode, pkcePair, refreshTokens, registerClient, tokenRequest } from '../helpers/oauth-flow.js';

let t: TestApp;
let now = new Date('2030-01-01T00:00:00Z');
let user: { id: string; email: string; password: string };
const advance = (ms: number) => (now = new Date(now.getTime() + ms));

beforeAll(async () => {
  t = await createTestApp({ clock: () => now });
  user = await (await t.tenant()).user();
});
afterAll(() => t.close());

const verify = (token: string) => verifyAccessToken(t.database.db, token, () => now);

async function authorized(opts: { scope?: string; categories?: string[]; clientOverrides?: Record<string, unknown> } = {}) {
  const client = await registerClient(t.app, opts.clientOverrides);
  const redirectUri = client.redirect_uris[0]!;
  const result = await authorizeWithForms(t.app, { clientId: client.client_id, redirectUri, email: user.email, password: user.password, categories: opts.categories ?? ['contacts'], scope: opts.scope });
  return { client, redirectUri, ...result };
}

describe('authorization_code', () => {
  it('exchanges a code for tokens bound to the approved categories', async () => {
    const a = await authorized({ scope: 'mcp offline_access', categories: ['contacts', 'messages'] });
    const res = await exchangeCode(t.app, { clientId: a.client.client_id, code: a.code, verifier: a.verifier, redirectUri: a.redirectUri });
    expect(res.status).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.json).toMatchObject({ token_type: 'Bearer', expires_in: 3600, scope: 'mcp offline_access' });
    expect(res.json.refresh_token).toEqual(expect.any(String));
    const grant = await verify(res.json.access_token);
    expect(grant).toMatchObject({ userId: user.id, clientId: a.client.client_id, categories: ['contacts', 'messages'], resource: t.config.publicUrl });
  });

  it('issues no refresh token without offline_access', async () => {
    const a = await authorized();
    const res = await exchangeCode(t.app, { clientId: a.client.client_id, code: a.code, verifier: a.verifier, redirectUri: a.redirectUri });
    expect(res.status).toBe(200);
    expect(res.json.scope).toBe('mcp');
    expect(res.json.refresh_token).toBeUndefined();
  });
});

describe('code redemption failures', () => {
  it('refuses a wrong code_verifier without burning the code', async () => {
    const a = await authorized();
    const wrong = await exchangeCode(t.app, { clientId: a.client.client_id, code: a.code, verifier: pkcePair().verifier, redirectUri: a.redirectUri });
    expect(wrong.status).toBe(400);
    expect(wrong.json).toEqual({ error: 'invalid_grant', error_description: expect.stringContaining('PKCE') });
    expect(wrong.headers['cache-control']).toBe('no-store');
    const right = await exchangeCode(t.app, { clientId: a.client.client_id, code: a.code, verifier: a.verifier, redirectUri: a.redirectUri });
    expect(right.status).toBe(200);
  });

  it('refuses a missing or malformed code_verifier', async () => {
    const a = await authorized();
    const missing = await tokenRequest(t.app, { grant_type: 'authorization_code', code: a.code, client_id: a.client.client_id, redirect_uri: a.redirectUri });
    expect(missing.status).toBe(400);
    expect(missing.json.error).toBe('invalid_request');
    const short = await exchangeCode(t.app, { clientId: a.client.client_id, code: a.code, verifier: 'too-short', redirectUri: a.redirectUri });
    expect(short.json.error).toBe('invalid_request');
  });

  it('refuses a redirect_uri other than the one of the authorization request', async () => {
    const a = await authorized({ clientOverrides: { redirect_uris: ['http://127.0.0.1:8976/callback', 'https://app.example.com/cb'] } });
    const other = await exchangeCode(t.app, { clientId: a.client.client_id, code: a.code, verifier: a.verifier, redirectUri: 'https://app.example.com/cb' });
    expect(other.status).toBe(400);
    expect(other.json.error).toBe('invalid_grant');
    const none = await exchangeCode(t.app, { clientId: a.client.client_id, code: a.code, verifier: a.verifier });
    expect(none.json.error).toBe('invalid_grant');
    expect((await exchangeCode(t.app, { clientId: a.client.client_id, code: a.code, verifier: a.verifier, redirectUri: a.redirectUri })).status).toBe(200);
  });

  it('refuses a code presented by another client', async () => {
    const a = await authorized();
    const other = await registerClient(t.app);
    const res = await exchangeCode(t.app, { clientId: other.client_id, code: a.code, verifier: a.verifier, redirectUri: a.redirectUri });
    expect(res.json.error).toBe('invalid_grant');
  });

  it('a reused code fails and revokes the tokens issued from it', async () => {
    const a = await authorized({ scope: 'mcp offline_access' });
    const first = await exchangeCode(t.app, { clientId: a.client.client_id, code: a.code, verifier: a.verifier, redirectUri: a.redirectUri });
    expect(first.status).toBe(200);
    expect(await verify(first.json.access_token)).toBeDefined();
    const second = await exchangeCode(t.app, { clientId: a.client.client_id, code: a.code, verifier: a.verifier, redirectUri: a.redirectUri });
    expect(second.status).toBe(400);
    expect(second.json.error).toBe('invalid_grant');
    expect(await verify(first.json.access_token)).toBeUndefined();
    const refreshed = await refreshTokens(t.app, { clientId: a.client.client_id, refreshToken: first.json.refresh_token });
    expect(refreshed.json.error).toBe('invalid_grant');
  });

  it('concurrent redemptions of one code: exactly one wins', async () => {
    const a = await authorized();
    const results = await Promise.all(
      Array.from({ length: 4 }, () => exchangeCode(t.app, { clientId: a.client.client_id, code: a.code, verifier: a.verifier, redirectUri: a.redirectUri })),
    );
    expect(results.map((r) => r.status).sort()).toEqual([200, 400, 400, 400]);
    expect(results.find((r) => r.status === 400)!.json.error).toBe('invalid_grant');
  });

  it('an expired code fails (10 minutes)', async () => {
    const a = await authorized();
    advance(10 * 60 * 1000 + 1000);
    const res = await exchangeCode(t.app, { clientId: a.client.client_id, code: a.code, verifier: a.verifier, redirectUri: a.redirectUri });
    expect(res.status).toBe(400);
    expect(res.json).toEqual({ error: 'invalid_grant', error_description: expect.stringContaining('expired') });
  });

  it('an unknown code fails', async () => {
    const client = await registerClient(t.app);
    const res = await exchangeCode(t.app, { clientId: client.client_id, code: 'no-such-code', verifier: pkcePair().verifier, redirectUri: client.redirect_uris[0] });
    expect(res.json.error).toBe('invalid_grant');
  });
});

describe('refresh_token', () => {
  it('rotates on every use; a rotated token presented again revokes the grant', async () => {
    const a = await authorized({ scope: 'mcp offline_access', categories: ['domains'] });
    const first = (await exchangeCode(t.app, { clientId: a.client.client_id, code: a.code, verifier: a.verifier, redirectUri: a.redirectUri })).json;
    const second = await refreshTokens(t.app, { clientId: a.client.client_id, refreshToken: first.refresh_token });
    expect(second.status).toBe(200);
    expect(second.headers['cache-control']).toBe('no-store');
    expect(second.json.refresh_token).not.toBe(first.refresh_token);
    expect(second.json.access_token).not.toBe(first.access_token);
    const g1 = await verify(first.access_token);
    const g2 = await verify(second.json.access_token);
    expect(g2?.id).toBe(g1?.id);
    expect(g2?.categories).toEqual(['domains']);

    const third = await refreshTokens(t.app, { clientId: a.client.client_id, refreshToken: second.json.refresh_token });
    expect(third.status).toBe(200);

    const replay = await refreshTokens(t.app, { clientId: a.client.client_id, refreshToken: first.refresh_token });
    expect(replay.status).toBe(400);
    expect(replay.json.error).toBe('invalid_grant');
    expect(await verify(third.json.access_token)).toBeUndefined();
    expect((await refreshTokens(t.app, { clientId: a.client.client_id, refreshToken: third.json.refresh_token })).json.error).toBe('invalid_grant');
  });

  it('access tokens expire after 60 minutes, refresh tokens after 90 days', async () => {
    const a = await authorized({ scope: 'mcp offline_access' });
    const tokens = (await exchangeCode(t.app, { clientId: a.client.client_id, code: a.code, verifier: a.verifier, redirectUri: a.redirectUri })).json;
    advance(59 * 60 * 1000);
    expect(await verify(tokens.access_token)).toBeDefined();
    advance(2 * 60 * 1000);
    expect(await verify(tokens.access_token)).toBeUndefined();
    const renewed = await refreshTokens(t.app, { clientId: a.client.client_id, refreshToken: tokens.refresh_token });
    expect(renewed.status).toBe(200);
    advance(91 * 24 * 60 * 60 * 1000);
    const expired = await refreshTokens(t.app, { clientId: a.client.client_id, refreshToken: renewed.json.refresh_token });
    expect(expired.status).toBe(400);
    expect(expired.json).toEqual({ error: 'invalid_grant', error_description: expect.stringContaining('expired') });
  });

  it("refuses another client's refresh token without burning it", async () => {
    const a = await authorized({ scope: 'mcp offline_access' });
    const tokens = (await exchangeCode(t.app, { clientId: a.client.client_id, code: a.code, verifier: a.verifier, redirectUri: a.redirectUri })).json;
    const other = await registerClient(t.app);
    expect((await refreshTokens(t.app, { clientId: other.client_id, refreshToken: tokens.refresh_token })).json.error).toBe('invalid_grant');
    expect((await refreshTokens(t.app, { clientId: a.client.client_id, refreshToken: tokens.refresh_token })).status).toBe(200);
  });
});

describe('client authentication and request shape', () => {
  it('confidential clients authenticate with client_secret_basic or client_secret_post', async () => {
    const basic = await authorized({ clientOverrides: { token_endpoint_auth_method: 'client_secret_basic' } });
    expect(basic.client.client_secret).toEqual(expect.any(String));
    const fields = { grant_type: 'authorization_code', code: basic.code, code_verifier: basic.verifier, redirect_uri: basic.redirectUri };
    const noSecret = await tokenRequest(t.app, { ...fields, client_id: basic.client.client_id });
    expect(noSecret.status).toBe(401);
    expect(noSecret.json.error).toBe('invalid_client');
    const wrong = await tokenRequest(t.app, fields, { id: basic.client.client_id, secret: 'wrong' });
    expect(wrong.status).toBe(401);
    expect(wrong.headers['www-authenticate']).toMatch(/^Basic/);
    const ok = await tokenRequest(t.app, fields, { id: basic.client.client_id, secret: basic.client.client_secret! });
    expect(ok.status).toBe(200);

    const post = await authorized({ clientOverrides: { token_endpoint_auth_method: 'client_secret_post' } });
    const res = await exchangeCode(t.app, { clientId: post.client.client_id, clientSecret: post.client.client_secret!, code: post.code, verifier: post.verifier, redirectUri: post.redirectUri });
    expect(res.status).toBe(200);
  });

  it('a confidential client must use the authentication method it registered', async () => {
    const basic = await authorized({ clientOverrides: { token_endpoint_auth_method: 'client_secret_basic' } });
    const asPost = await exchangeCode(t.app, { clientId: basic.client.client_id, clientSecret: basic.client.client_secret!, code: basic.code, verifier: basic.verifier, redirectUri: basic.redirectUri });
    expect(asPost.status).toBe(401);
    expect(asPost.json).toMatchObject({ error: 'invalid_client', error_description: expect.stringContaining('client_secret_basic') });

    const post = await authorized({ clientOverrides: { token_endpoint_auth_method: 'client_secret_post' } });
    const fields = { grant_type: 'authorization_code', code: post.code, code_verifier: post.verifier, redirect_uri: post.redirectUri };
    const asBasic = await tokenRequest(t.app, fields, { id: post.client.client_id, secret: post.client.client_secret! });
    expect(asBasic.status).toBe(401);
    expect(asBasic.json.error).toBe('invalid_client');
    // The code was not spent by the refused attempts.
    const ok = await exchangeCode(t.app, { clientId: post.client.client_id, clientSecret: post.client.client_secret!, code: post.code, verifier: post.verifier, redirectUri: post.redirectUri });
    expect(ok.status).toBe(200);
  });

  it('stores client secrets only as SHA-256', async () => {
    const client = await registerClient(t.app, { token_endpoint_auth_method: 'client_secret_post' });
    const { oauthClients } = await import('../../src/db/schema.js');
    const { eq } = await import('drizzle-orm');
    const [row] = await t.database.db.select().from(oauthClients).where(eq(oauthClients.id, client.client_id));
    expect(row!.secretHash).toMatch(/^[0-9a-f]{64}$/);
    expect(JSON.stringify(row)).not.toContain(client.client_secret!);
  });

  it('answers RFC 6749 errors for unknown clients, grant types and missing parameters', async () => {
    expect((await tokenRequest(t.app, { grant_type: 'authorization_code', client_id: 'nope', code: 'x', code_verifier: pkcePair().verifier })).status).toBe(401);
    const client = await registerClient(t.app);
    const pw = await tokenRequest(t.app, { grant_type: 'password', client_id: client.client_id });
    expect(pw.json).toEqual({ error: 'unsupported_grant_type', error_description: expect.any(String) });
    expect((await tokenRequest(t.app, { client_id: client.client_id })).json.error).toBe('invalid_request');
    const dup = await t.app.inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: `grant_type=refresh_token&grant_type=refresh_token&client_id=${client.client_id}` });
    expect(dup.statusCode).toBe(400);
    expect(dup.json().error).toBe('invalid_request');
    const badJson = await t.app.inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/json' }, payload: '{nope' });
    expect(badJson.statusCode).toBe(400);
    expect(badJson.json().error).toBe('invalid_request');
    const xml = await t.app.inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': 'text/xml' }, payload: '<a/>' });
    expect(xml.statusCode).toBe(415);
    expect(xml.json().error).toBe('invalid_request');
  });

  it('accepts only a form body (RFC 6749), and checks resource', async () => {
    const a = await authorized();
    const fields = { grant_type: 'authorization_code', code: a.code, code_verifier: a.verifier, redirect_uri: a.redirectUri, client_id: a.client.client_id, resource: `${t.config.publicUrl}/mcp/` };
    for (const url of ['/oauth/token', '/oauth/revoke']) {
      const json = await t.app.inject({ method: 'POST', url, headers: { 'content-type': 'application/json' }, payload: JSON.stringify(fields) });
      expect(json.statusCode, url).toBe(400);
      expect(json.json()).toMatchObject({ error: 'invalid_request', error_description: expect.stringContaining('x-www-form-urlencoded') });
    }
    const foreign = await exchangeCode(t.app, { clientId: a.client.client_id, code: a.code, verifier: a.verifier, redirectUri: a.redirectUri, resource: 'https://evil.example/mcp' });
    expect(foreign.json.error).toBe('invalid_target');
    const res = await t.app.inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: new URLSearchParams(fields).toString() });
    expect(res.statusCode).toBe(200);
    expect(res.json().access_token).toEqual(expect.any(String));
  });
});

describe('revocation (RFC 7009)', () => {
  it('revokes an access token, and a refresh token with its grant', async () => {
    const a = await authorized({ scope: 'mcp offline_access' });
    const tokens = (await exchangeCode(t.app, { clientId: a.client.client_id, code: a.code, verifier: a.verifier, redirectUri: a.redirectUri })).json;
    const revoke = (token: string, clientId = a.client.client_id) =>
      t.app.inject({ method: 'POST', url: '/oauth/revoke', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: new URLSearchParams({ token, client_id: clientId }).toString() });
    const other = await registerClient(t.app);
    expect((await revoke(tokens.access_token, other.client_id)).statusCode).toBe(200);
    expect(await verify(tokens.access_token)).toBeDefined();
    expect((await revoke(tokens.access_token)).statusCode).toBe(200);
    expect(await verify(tokens.access_token)).toBeUndefined();
    const renewed = await refreshTokens(t.app, { clientId: a.client.client_id, refreshToken: tokens.refresh_token });
    expect(renewed.status).toBe(200);
    expect((await revoke(renewed.json.refresh_token)).statusCode).toBe(200);
    expect(await verify(renewed.json.access_token)).toBeUndefined();
    expect((await revoke('unknown-token')).statusCode).toBe(200);
  });
});
