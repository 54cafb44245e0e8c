import { createHash, randomBytes } from 'node:crypto';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';

/**
 * Drives the OAuth flow through `app.inject`: registration, the sign-in and consent forms (as a browser
 * would post them), and the token endpoint. Used by the OAuth tests and by the transport tests.
 */

export const DEFAULT_REDIRECT_URI = 'http://127.0.0.1:8976/callback';

export interface RegisteredClient {
  client_id: string;
  client_secret?: string;
  redirect_uris: string[];
  token_endpoint_auth_method: string;
  grant_types: string[];
  [key: string]: unknown;
}

/** A documentation-range address per call, so the per-IP registration limit does not trip other tests. */
const randomIp = () => `198.51.100.${1 + Math.floor(Math.random() * 254)}`;

/**
 * Registers a client (public, loopback redirect, both grant types) and returns the registration response.
 * `overrides` replace metadata fields; `ip` sets the caller's address (X-Forwarded-For).
 */
export async function registerClient(app: FastifyInstance, overrides: Record<string, unknown> = {}, opts: { ip?: string } = {}): Promise<RegisteredClient> {
  const res = await app.inject({
    method: 'POST',
    url: '/oauth/register',
    headers: { 'content-type': 'application/json', 'x-forwarded-for': opts.ip ?? randomIp() },
    payload: JSON.stringify({
      client_name: 'Test client',
      redirect_uris: [DEFAULT_REDIRECT_URI],
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      ...overrides,
    }),
  });
  if (res.statusCode !== 201) throw new Error(`registration failed: ${res.statusCode} ${res.body}`);
  return res.json() as RegisteredClient;
}

/** A PKCE pair: a random verifier and its S256 challenge. */
export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

/** A tiny cookie jar for inject: keeps the name=value of every Set-Cookie. */
export class CookieJar {
  private readonly cookies = new Map<string, string>();
  store(res: LightMyRequestResponse) {
    const header = res.headers['set-cookie'];
    for (const line of header === undefined ? [] : Array.isArray(header) ? header : [header]) {
      const [pair] = line.split(';');
      const at = pair!.indexOf('=');
      const name = pair!.slice(0, at).trim();
      const value = pair!.slice(at + 1).trim();
      if (/max-age=0/i.test(line) || value === '') this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }
  header() {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }
}

const unescape = (s: string) => s.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');

/** The hidden inputs of the first form posting to `action` in `html`. */
export function hiddenFields(html: string, action: string): Record<string, string> {
  const start = html.indexOf(`action="${action}"`);
  if (start < 0) throw new Error(`no form posting to ${action} in the page:\n${html.slice(0, 2000)}`);
  const form = html.slice(start, html.indexOf('</form>', start));
  const fields: Record<string, string> = {};
  for (const m of form.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g)) fields[unescape(m[1]!)] = unescape(m[2]!);
  return fields;
}

/** Form-encodes fields; array values repeat the name (checkboxes). */
export function formBody(fields: Record<string, string | string[]>): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(fields)) for (const item of Array.isArray(v) ? v : [v]) p.append(k, item);
  return p.toString();
}

export interface AuthorizeOptions {
  clientId: string;
  redirectUri: string;
  email: string;
  password: string;
  /** Categories ticked on the consent page. */
  categories: string[];
  scope?: string;
  resource?: string;
  state?: string;
  /** Defaults to a fresh pair (returned as `verifier`). */
  pkce?: { verifier: string; challenge: string };
  /** Extra query parameters of the authorization request. */
  extra?: Record<string, string>;
  /** Defaults to approve. */
  decision?: 'approve' | 'deny';
  /** The consent page's access choice; omitted means the form's default (read and change). */
  access?: 'read' | 'write';
}

export interface AuthorizeResult {
  /** The authorization code ('' when the user denied). */
  code: string;
  redirectUrl: URL;
  verifier: string;
  state: string;
}

export function authorizeUrl(o: { clientId: string; redirectUri: string; challenge: string; state: string; scope?: string; resource?: string; extra?: Record<string, string> }) {
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: o.clientId,
    redirect_uri: o.redirectUri,
    code_challenge: o.challenge,
    code_challenge_method: 'S256',
    state: o.state,
    ...(o.scope !== undefined ? { scope: o.scope } : {}),
    ...(o.resource !== undefined ? { resource: o.resource } : {}),
    ...o.extra,
  });
  return `/oauth/authorize?${q}`;
}

/** GET the authorization page, sign in with the CSRF token and cookie, then approve (or deny) the consent form. */
export async function authorizeWithForms(app: FastifyInstance, o: AuthorizeOptions): Promise<AuthorizeResult> {
  const pkce = o.pkce ?? pkcePair();
  const state = o.state ?? randomBytes(8).toString('hex');
  const jar = new CookieJar();
  const page = await app.inject({ method: 'GET', url: authorizeUrl({ ...o, challenge: pkce.challenge, state }) });
  if (page.statusCode !== 200) throw new Error(`authorize page: ${page.statusCode} ${page.headers.location ?? page.body.slice(0, 500)}`);
  jar.store(page);

  const signIn = await app.inject({
    method: 'POST',
    url: '/oauth/authorize/sign-in',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: jar.header() },
    payload: formBody({ ...hiddenFields(page.body, '/oauth/authorize/sign-in'), email: o.email, password: o.password }),
  });
  jar.store(signIn);
  if (signIn.statusCode !== 200 || !signIn.body.includes('action="/oauth/authorize/consent"')) {
    throw new Error(`sign-in failed: ${signIn.statusCode} ${signIn.body.match(/role="alert"[^>]*>([^<]*)/)?.[1] ?? signIn.body.slice(0, 500)}`);
  }

  const consent = await app.inject({
    method: 'POST',
    url: '/oauth/authorize/consent',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: jar.header() },
    payload: formBody({ ...hiddenFields(signIn.body, '/oauth/authorize/consent'), categories: o.categories, decision: o.decision ?? 'approve', ...(o.access ? { access: o.access } : {}) }),
  });
  const location = consent.headers.location;
  if (consent.statusCode !== 303 || typeof location !== 'string') throw new Error(`consent: ${consent.statusCode} ${consent.body.slice(0, 500)}`);
  const redirectUrl = new URL(location);
  const code = redirectUrl.searchParams.get('code') ?? '';
  if (!code && (o.decision ?? 'approve') === 'approve') throw new Error(`no code in ${location}`);
  return { code, redirectUrl, verifier: pkce.verifier, state };
}

export interface TokenResult {
  status: number;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  json: any;
  headers: LightMyRequestResponse['headers'];
}

/** POST /oauth/token with form fields (and HTTP Basic when `basic` is given). */
export async function tokenRequest(app: FastifyInstance, fields: Record<string, string | undefined>, basic?: { id: string; secret: string }): Promise<TokenResult> {
  const defined = Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) as Record<string, string>;
  const res = await app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      ...(basic ? { authorization: `Basic ${Buffer.from(`${encodeURIComponent(basic.id)}:${encodeURIComponent(basic.secret)}`).toString('base64')}` } : {}),
    },
    payload: formBody(defined),
  });
  return { status: res.statusCode, json: res.json(), headers: res.headers };
}

/** Exchanges a code for tokens; answers the raw status and body so tests can check failures too. */
export function exchangeCode(app: FastifyInstance, o: { clientId: string; code: string; verifier: string; redirectUri?: string; clientSecret?: string; resource?: string }) {
  return tokenRequest(app, {
    grant_type: 'authorization_code',
    code: o.code,
    code_verifier: o.verifier,
    redirect_uri: o.redirectUri,
    client_id: o.clientId,
    client_secret: o.clientSecret,
    resource: o.resource,
  });
}

export function refreshTokens(app: FastifyInstance, o: { clientId: string; refreshToken: string; clientSecret?: string }) {
  return tokenRequest(app, { grant_type: 'refresh_token', refresh_token: o.refreshToken, client_id: o.clientId, client_secret: o.clientSecret });
}

/**
 * The whole flow in one call: registers a client, signs `user` in, approves `categories` and returns the
 * tokens (an `access_token`, plus a `refresh_token` when `scope` includes `offline_access`).
 */
export async function obtainTokens(
  app: FastifyInstance,
  o: { email: string; password: string; categories: string[]; scope?: string; resource?: string; clientOverrides?: Record<string, unknown> },
) {
  const client = await registerClient(app, o.clientOverrides);
  const redirectUri = client.redirect_uris[0]!;
  const { code, verifier } = await authorizeWithForms(app, { clientId: client.client_id, redirectUri, ...o });
  const tokens = await exchangeCode(app, { clientId: client.client_id, code, verifier, redirectUri, clientSecret: client.client_secret });
  if (tokens.status !== 200) throw new Error(`token exchange failed: ${tokens.status} ${JSON.stringify(tokens.json)}`);
  return { client, tokens: tokens.json as { access_token: string; refresh_token?: string; expires_in: number; scope: string; token_type: string } };
}

/**
 * The person in the browser: opens an authorization URL a client produced, signs in, ticks the categories
 * and approves. Answers the callback URL the browser is sent to (code, state, iss).
 */
export async function approveInBrowser(app: FastifyInstance, authorizationUrl: URL, user: { email: string; password: string }, categories: string[]): Promise<URL> {
  const jar = new CookieJar();
  const page = await app.inject({ method: 'GET', url: `${authorizationUrl.pathname}${authorizationUrl.search}` });
  if (page.statusCode !== 200) throw new Error(`authorization page: ${page.statusCode} ${page.body.slice(0, 500)}`);
  jar.store(page);
  const form = (url: string, fields: Record<string, string | string[]>) =>
    app.inject({ method: 'POST', url, headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: jar.header() }, payload: formBody(fields) });
  const consent = await form('/oauth/authorize/sign-in', { ...hiddenFields(page.body, '/oauth/authorize/sign-in'), email: user.email, password: user.password });
  jar.store(consent);
  const answer = await form('/oauth/authorize/consent', { ...hiddenFields(consent.body, '/oauth/authorize/consent'), categories, decision: 'approve' });
  if (answer.statusCode !== 303) throw new Error(`consent: ${answer.statusCode} ${answer.body.slice(0, 500)}`);
  return new URL(String(answer.headers.location));
}
