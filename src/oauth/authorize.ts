import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { getUser } from '../accounts/accounts.js';
import { randomToken, sha256 } from '../core/secrets.js';
import { oauthCodes } from '../db/schema.js';
import { ClientDocumentError, createClientLookup, type ClientLookup } from './client-documents.js';
import { redirectUriMatches, type Client } from './clients.js';
import { upsertGrant } from './grants.js';
import { matchResource } from './resource.js';
import type { SignIn } from './sign-in.js';
import { csrfToken, csrfValid, endSession, sessionUserId, startSession } from './sessions.js';
import { clientView, consentPage, errorPage, grantChoice, signInPage } from './views.js';

/** Authorization codes live 10 minutes (RFC 6749 §4.1.2 recommends at most 10). */
export const CODE_TTL_S = 10 * 60;

/** The parameters of an authorization request that the forms carry along (everything else is ignored). */
const PARAMS = ['response_type', 'client_id', 'redirect_uri', 'scope', 'state', 'code_challenge', 'code_challenge_method', 'resource'] as const;
const MAX_PARAM_LENGTH = 4096;

export interface AuthorizationRequest {
  client: Client;
  /** Where the answer goes: the `redirect_uri` given, or the client's only registered one. */
  redirectUri: string;
  /** The `redirect_uri` parameter as sent ('' when omitted); the token request must repeat it. */
  redirectUriParam: string;
  state: string | undefined;
  codeChallenge: string;
  scopes: string[];
  resource: string;
  /** The request's parameters, carried by the forms as hidden fields and checked again on every post. */
  params: Record<string, string>;
}

type Checked =
  | { kind: 'ok'; request: AuthorizationRequest }
  /** The client or its redirect URI cannot be trusted: shown to the user, never redirected (RFC 6749 §4.1.2.1). */
  | { kind: 'page'; message: string; status?: number; retryAfter?: number | undefined }
  | { kind: 'redirect'; redirectUri: string; error: string; description: string; state: string | undefined };

const one = (v: unknown) => (typeof v === 'string' ? v : undefined);

/** Validates an authorization request (query of the GET, hidden fields of the forms). */
export async function checkAuthorizationRequest(lookupClient: ClientLookup, source: Record<string, unknown>, publicUrl: string, ip?: string): Promise<Checked> {
  const params: Record<string, string> = {};
  const repeated: string[] = [];
  let resources: string[] = [];
  for (const name of PARAMS) {
    const value = source[name];
    if (Array.isArray(value)) {
      // RFC 8707 allows several `resource` values; every other parameter must appear at most once.
      if (name === 'resource') resources = value.filter((v): v is string => typeof v === 'string');
      else repeated.push(name);
      if (typeof value[0] === 'string') params[name] = value[0];
    } else if (typeof value === 'string') {
      params[name] = value;
      if (name === 'resource') resources = [value];
    }
  }

  if (repeated.includes('client_id') || repeated.includes('redirect_uri')) return { kind: 'page', message: 'The request repeats client_id or redirect_uri.' };
  if (!params.client_id) return { kind: 'page', message: 'The request has no client_id.' };
  let client: Client | undefined;
  try {
    client = await lookupClient(params.client_id, ip);
  } catch (err) {
    if (err instanceof ClientDocumentError) return { kind: 'page', message: err.message, status: err.status, retryAfter: err.retryAfter };
    throw err;
  }
  if (!client) return { kind: 'page', message: 'This application is not registered here (unknown client_id).' };
  let redirectUri: string;
  if (params.redirect_uri !== undefined) {
    if (!redirectUriMatches(client.redirectUris, params.redirect_uri)) {
      return { kind: 'page', message: 'The redirect_uri is not one this application registered.' };
    }
    redirectUri = params.redirect_uri;
  } else if (client.redirectUris.length === 1) {
    redirectUri = client.redirectUris[0]!;
  } else {
    return { kind: 'page', message: 'The request has no redirect_uri, and this application registered several.' };
  }

  const state = repeated.includes('state') ? undefined : params.state;
  const fail = (error: string, description: string): Checked => ({ kind: 'redirect', redirectUri, error, description, state });
  if (repeated.length) return fail('invalid_request', `Parameters repeated: ${repeated.join(', ')}`);
  const tooLong = Object.keys(params).find((k) => params[k]!.length > MAX_PARAM_LENGTH);
  if (tooLong) return fail('invalid_request', `${tooLong} is longer than ${MAX_PARAM_LENGTH} characters`);
  if (!params.response_type) return fail('invalid_request', 'response_type is required');
  if (params.response_type !== 'code') return fail('unsupported_response_type', 'Only response_type=code is supported');
  if (!params.code_challenge) return fail('invalid_request', 'code_challenge is required (PKCE with S256)');
  if (params.code_challenge_method !== 'S256') {
    return fail('invalid_request', params.code_challenge_method ? 'Only code_challenge_method=S256 is supported' : 'code_challenge_method=S256 is required');
  }
  // BASE64URL(SHA-256(verifier)) is always 43 characters.
  if (!/^[A-Za-z0-9_-]{43}$/.test(params.code_challenge)) return fail('invalid_request', 'code_challenge is not a base64url SHA-256 value');

  let resource = publicUrl;
  if (resources.length) {
    const matched = resources.map((r) => matchResource(r, publicUrl));
    if (matched.some((m) => !m)) return fail('invalid_target', `resource must be ${publicUrl}, ${publicUrl}/mcp or ${publicUrl}/sse`);
    if (new Set(matched).size > 1) return fail('invalid_target', 'Ask for one resource per authorization request');
    resource = matched[0]!;
  }

  // A missing scope means `mcp`; unknown scopes are ignored; `mcp` is always granted. A refresh token needs
  // both the `offline_access` request and a client registered for the refresh_token grant.
  const requested = (params.scope ?? 'mcp').split(/\s+/).filter(Boolean);
  const scopes = ['mcp'];
  if (requested.includes('offline_access') && client.grantTypes.includes('refresh_token')) scopes.push('offline_access');

  return {
    kind: 'ok',
    request: { client, redirectUri, redirectUriParam: params.redirect_uri ?? '', state, codeChallenge: params.code_challenge, scopes, resource, params },
  };
}

/** The client's redirect URI with the answer's parameters added, `iss` included (RFC 9207). */
export function redirectTarget(redirectUri: string, values: Record<string, string | undefined>): string {
  const url = new URL(redirectUri);
  for (const [k, v] of Object.entries(values)) if (v !== undefined) url.searchParams.append(k, v);
  return url.toString();
}

/** S256: BASE64URL(SHA-256(code_verifier)) (RFC 7636 §4.2). */
export const s256 = (verifier: string) => createHash('sha256').update(verifier).digest('base64url');

export function registerAuthorizeRoutes(app: FastifyInstance, signIn: SignIn) {
  const { config, clock, database } = app.deps;
  const db = database.db;
  const issuer = config.publicUrl;
  const secure = issuer.startsWith('https:');
  const lookupClient = createClientLookup(db, config.clientDocuments, clock, app.deps.redis);

  const redirect = (reply: FastifyReply, status: 302 | 303, to: string) =>
    reply.code(status).header('cache-control', 'no-store').header('referrer-policy', 'no-referrer').redirect(to, status);

  /** Answers a failed check: the error page, or a redirect back to the client with `error`. */
  function answerFailure(reply: FastifyReply, checked: Exclude<Checked, { kind: 'ok' }>, status: 302 | 303) {
    if (checked.kind === 'page') {
      if (checked.retryAfter !== undefined) reply.header('retry-after', String(checked.retryAfter));
      return errorPage(reply, checked.status ?? 400, 'This request cannot be completed', checked.message);
    }
    return redirect(reply, status, redirectTarget(checked.redirectUri, { error: checked.error, error_description: checked.description, state: checked.state, iss: issuer }));
  }

  const view = (r: AuthorizationRequest) => clientView(r.client.clientName, r.client.id, r.redirectUri);

  async function showConsentOrSignIn(req: FastifyRequest, reply: FastifyReply, r: AuthorizationRequest) {
    const csrf = csrfToken(req, reply, secure);
    const userId = await sessionUserId(db, req, clock, secure);
    const user = userId ? await getUser(db, userId) : undefined;
    if (!user) return signInPage(reply, { client: view(r), params: r.params, csrf, redirectUri: r.redirectUri });
    return consentPage(reply, { client: view(r), params: r.params, csrf, redirectUri: r.redirectUri, userEmail: user.email, offline: r.scopes.includes('offline_access') });
  }

  /** Every form post: the CSRF token first, then the authorization request it carries, checked afresh. */
  async function checkForm(req: FastifyRequest, reply: FastifyReply): Promise<{ body: Record<string, unknown>; request: AuthorizationRequest } | undefined> {
    const body = (req.body ?? {}) as Record<string, unknown>;
    if (typeof body !== 'object' || !csrfValid(req, secure, one(body.csrf))) {
      await errorPage(reply, 403, 'Form expired', 'This form could not be verified (missing or wrong security token). Go back to the application and start again.');
      return undefined;
    }
    const checked = await checkAuthorizationRequest(lookupClient, body, issuer, req.ip);
    if (checked.kind !== 'ok') {
      await answerFailure(reply, checked, 303);
      return undefined;
    }
    return { body, request: checked.request };
  }

  app.get('/oauth/authorize', async (req, reply) => {
    const checked = await checkAuthorizationRequest(lookupClient, (req.query ?? {}) as Record<string, unknown>, issuer, req.ip);
    // Before any user interaction an error is shown, never redirected: with open registration, redirecting
    // to a registered URI would make this server an open redirector (RFC 9700 §4.11.2).
    if (checked.kind === 'redirect') return errorPage(reply, 400, 'This request cannot be completed', `${checked.error}: ${checked.description}`);
    if (checked.kind !== 'ok') return answerFailure(reply, checked, 302);
    return showConsentOrSignIn(req, reply, checked.request);
  });

  app.post('/oauth/authorize/sign-in', async (req, reply) => {
    const form = await checkForm(req, reply);
    if (!form) return reply;
    const { body, request: r } = form;
    const email = one(body.email) ?? '';
    const outcome = await signIn(req.ip, email, one(body.password) ?? '');
    if (outcome.kind !== 'ok') {
      if (outcome.kind === 'wait') reply.header('retry-after', String(outcome.seconds));
      const status = outcome.kind === 'wait' ? 429 : 200;
      return signInPage(reply, { client: view(r), params: r.params, csrf: csrfToken(req, reply, secure), redirectUri: r.redirectUri, error: outcome.message, email, status });
    }
    const user = outcome.user;
    // A new session, and with it a new CSRF token: one seen before the sign-in is no good after it.
    const session = await startSession(db, reply, user.id, clock, secure);
    const csrf = csrfToken(req, reply, secure, session);
    return consentPage(reply, { client: view(r), params: r.params, csrf, redirectUri: r.redirectUri, userEmail: user.email, offline: r.scopes.includes('offline_access') });
  });

  app.post('/oauth/authorize/sign-out', async (req, reply) => {
    const form = await checkForm(req, reply);
    if (!form) return reply;
    await endSession(db, req, reply, secure);
    return signInPage(reply, { client: view(form.request), params: form.request.params, csrf: csrfToken(req, reply, secure, null), redirectUri: form.request.redirectUri });
  });

  app.post('/oauth/authorize/consent', async (req, reply) => {
    const form = await checkForm(req, reply);
    if (!form) return reply;
    const { body, request: r } = form;
    const userId = await sessionUserId(db, req, clock, secure);
    const user = userId ? await getUser(db, userId) : undefined;
    const csrf = csrfToken(req, reply, secure);
    if (!user) {
      return signInPage(reply, { client: view(r), params: r.params, csrf, redirectUri: r.redirectUri, error: 'Your sign-in has expired. Sign in again.', status: 401 });
    }
    const decision = one(body.decision);
    if (decision === 'deny') {
      return redirect(reply, 303, redirectTarget(r.redirectUri, { error: 'access_denied', error_description: 'The user denied the request', state: r.state, iss: issuer }));
    }
    if (decision !== 'approve') return errorPage(reply, 400, 'No decision', 'Choose Approve or Deny.');

    const { categories, readOnly, send } = grantChoice(body);
    const code = randomToken(32);
    const now = clock();
    await db.transaction(async (tx) => {
      const grant = await upsertGrant(tx, {
        userId: user.id,
        organizationId: user.organizationId,
        clientId: r.client.id,
        scopes: r.scopes,
        categories,
        resource: r.resource,
        readOnly,
        send,
      }, clock);
      await tx.insert(oauthCodes).values({
        codeHash: sha256(code),
        createdAt: now,
        expiresAt: new Date(now.getTime() + CODE_TTL_S * 1000),
        grantId: grant.id,
        clientId: r.client.id,
        redirectUri: r.redirectUriParam,
        codeChallenge: r.codeChallenge,
      });
    });
    return redirect(reply, 303, redirectTarget(r.redirectUri, { code, state: r.state, iss: issuer }));
  });
}
