import * as oauth from 'oauth4webapi';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyAccessToken } from '../../src/oauth/grants.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { freePort } from '../helpers/listen.js';
import { formBody, hiddenFields } from '../helpers/oauth-flow.js';

/** The whole flow over real HTTP with a strict, spec-checking OAuth client (oauth4webapi). */

let t: TestApp;
let origin: string;
let user: { id: string; email: string; password: string };
const insecure = { [oauth.allowInsecureRequests]: true };

beforeAll(async () => {
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  t = await createTestApp({ env: { PUBLIC_URL: origin } });
  await t.app.listen({ port, host: '127.0.0.1' });
  user = await (await t.tenant()).user();
});
afterAll(() => t?.close());

/** Plays the browser: GET the page, post sign-in, post consent; answers the redirect URL. */
async function browse(authorizationUrl: URL, categories: string[]): Promise<URL> {
  const cookies = new Map<string, string>();
  const keep = (res: Response) => {
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const at = pair!.indexOf('=');
      cookies.set(pair!.slice(0, at), pair!.slice(at + 1));
    }
  };
  const cookie = () => [...cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  const page = await fetch(authorizationUrl, { redirect: 'manual' });
  expect(page.status).toBe(200);
  keep(page);
  const signIn = await fetch(`${origin}/oauth/authorize/sign-in`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: cookie() },
    body: formBody({ ...hiddenFields(await page.text(), '/oauth/authorize/sign-in'), email: user.email, password: user.password }),
  });
  keep(signIn);
  const consent = await fetch(`${origin}/oauth/authorize/consent`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: cookie() },
    body: formBody({ ...hiddenFields(await signIn.text(), '/oauth/authorize/consent'), categories, decision: 'approve' }),
  });
  expect(consent.status).toBe(303);
  return new URL(consent.headers.get('location')!);
}

describe('oauth4webapi against a listening server', () => {
  it.each([
    ['a public client', 'none'],
    ['a client_secret_basic client', 'client_secret_basic'],
    ['a client_secret_post client', 'client_secret_post'],
  ] as const)('discovers, registers, authorizes, redeems, refreshes and revokes as %s', async (_label, method) => {
    const resource = new URL(`${origin}/mcp`);
    const rs = await oauth.processResourceDiscoveryResponse(resource, await oauth.resourceDiscoveryRequest(resource, insecure));
    expect(rs.authorization_servers).toEqual([origin]);

    const issuer = new URL(rs.authorization_servers![0]!);
    const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }));
    expect(as.code_challenge_methods_supported).toEqual(['S256']);

    const redirectUri = 'http://127.0.0.1:9/callback';
    const registered = await oauth.processDynamicClientRegistrationResponse(
      await oauth.dynamicClientRegistrationRequest(
        as,
        { redirect_uris: [redirectUri], token_endpoint_auth_method: method, grant_types: ['authorization_code', 'refresh_token'], client_name: 'oauth4webapi' },
        insecure,
      ),
    );
    const client: oauth.Client = { client_id: registered.client_id, token_endpoint_auth_method: method };
    const auth =
      method === 'none' ? oauth.None() : method === 'client_secret_basic' ? oauth.ClientSecretBasic(registered.client_secret as string) : oauth.ClientSecretPost(registered.client_secret as string);

    const verifier = oauth.generateRandomCodeVerifier();
    const state = oauth.generateRandomState();
    const authorizationUrl = new URL(as.authorization_endpoint!);
    authorizationUrl.search = new URLSearchParams({
      client_id: client.client_id,
      redirect_uri: redirectUri,
      response_type: 'code',
      scope: 'mcp offline_access',
      code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
      resource: resource.href,
    }).toString();

    const callback = await browse(authorizationUrl, ['contacts', 'customers']);
    // Checks state and the RFC 9207 `iss` parameter.
    const params = oauth.validateAuthResponse(as, client, callback, state);
    const tokenOptions = { additionalParameters: { resource: resource.href }, ...insecure };
    const tokens = await oauth.processAuthorizationCodeResponse(
      as,
      client,
      await oauth.authorizationCodeGrantRequest(as, client, auth, params, redirectUri, verifier, tokenOptions),
    );
    expect(tokens.token_type).toBe('bearer');
    expect(tokens.expires_in).toBe(3600);
    expect(tokens.scope).toBe('mcp offline_access');
    const grant = await verifyAccessToken(t.database.db, tokens.access_token, () => new Date());
    expect(grant).toMatchObject({ categories: ['contacts', 'customers'], resource: `${origin}/mcp`, userId: user.id });

    const refreshed = await oauth.processRefreshTokenResponse(as, client, await oauth.refreshTokenGrantRequest(as, client, auth, tokens.refresh_token!, tokenOptions));
    expect(refreshed.refresh_token).not.toBe(tokens.refresh_token);

    // A second redemption of the same code is refused as invalid_grant.
    await expect(
      oauth.processAuthorizationCodeResponse(as, client, await oauth.authorizationCodeGrantRequest(as, client, auth, params, redirectUri, verifier, tokenOptions)),
    ).rejects.toMatchObject({ error: 'invalid_grant' });

    await oauth.processRevocationResponse(await oauth.revocationRequest(as, client, auth, refreshed.access_token, insecure));
  });

  it('a plain PKCE request from an oauth4webapi client is refused on an error page', async () => {
    const issuer = new URL(origin);
    const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }));
    const registered = await oauth.processDynamicClientRegistrationResponse(
      await oauth.dynamicClientRegistrationRequest(as, { redirect_uris: ['http://127.0.0.1:9/cb'], token_endpoint_auth_method: 'none' }, insecure),
    );
    const client: oauth.Client = { client_id: registered.client_id, token_endpoint_auth_method: 'none' };
    const u = new URL(as.authorization_endpoint!);
    u.search = new URLSearchParams({ client_id: client.client_id, redirect_uri: 'http://127.0.0.1:9/cb', response_type: 'code', code_challenge: 'x'.repeat(43), code_challenge_method: 'plain', state: 's1' }).toString();
    const res = await fetch(u, { redirect: 'manual' });
    // Refused before any user interaction: an error page, not a redirect to the client (RFC 9700 §4.11.2).
    expect(res.status).toBe(400);
    expect(res.headers.get('location')).toBeNull();
    expect(await res.text()).toMatch(/invalid_request: .*S256/);
  });
});
