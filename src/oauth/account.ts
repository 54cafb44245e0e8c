import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { getUser } from '../accounts/accounts.js';
import { listUserGrants, revokeGrant, setGrantCategories } from './grants.js';
import { csrfToken, csrfValid, endSession, sessionUserId, startSession } from './sessions.js';
import type { SignIn } from './sign-in.js';
import { accountSignInPage, appsPage, clientView, errorPage, grantChoice } from './views.js';

const one = (v: unknown) => (typeof v === 'string' ? v : undefined);

/** Where the sign-in form goes back to: one of the account pages (never another site), else the connected apps. */
const NEXT_PAGE = /^\/account\/(?:apps|automations(?:\/[0-9a-f-]{36})?)$/;
export const nextOf = (body: Record<string, unknown>): { next?: string } => {
  const next = one(body.next);
  return next && NEXT_PAGE.test(next) ? { next } : {};
};

/**
 * `/account/apps`: a signed-in person sees the clients they approved (name, redirect host, categories,
 * approval, last token) and changes their categories or revokes them. The same sign-in and session as
 * the consent page; every form carries the session's CSRF token.
 */
export function registerAccountRoutes(app: FastifyInstance, signIn: SignIn) {
  const { config, clock, database } = app.deps;
  const db = database.db;
  const secure = config.publicUrl.startsWith('https:');
  const formOrigin = config.publicUrl;
  const back = (reply: FastifyReply, to = '/account/apps') => reply.code(303).header('cache-control', 'no-store').redirect(to, 303);

  async function signedIn(req: FastifyRequest) {
    const userId = await sessionUserId(db, req, clock, secure);
    return userId ? getUser(db, userId) : undefined;
  }

  async function showApps(req: FastifyRequest, reply: FastifyReply, userId: string, email: string) {
    const grants = (await listUserGrants(db, userId)).filter((g) => g.revokedAt === null);
    const apps = grants.map((g) => ({
      grantId: g.id,
      client: clientView(g.clientName, g.clientId, g.redirectUris[0] ?? ''),
      categories: g.categories,
      readOnly: g.readOnly,
      send: g.send,
      approvedAt: g.createdAt,
      lastTokenAt: g.lastTokenAt,
    }));
    return appsPage(reply, { csrf: csrfToken(req, reply, secure), formOrigin, userEmail: email, apps });
  }

  /** A form post: CSRF first, then the signed-in user; answers the page itself when either is missing. */
  async function formUser(req: FastifyRequest, reply: FastifyReply) {
    const body = (req.body ?? {}) as Record<string, unknown>;
    if (typeof body !== 'object' || !csrfValid(req, secure, one(body.csrf))) {
      await errorPage(reply, 403, 'Form expired', 'This form could not be verified (missing or wrong security token). Open the page again.');
      return undefined;
    }
    const user = await signedIn(req);
    if (!user) {
      await accountSignInPage(reply, { csrf: csrfToken(req, reply, secure, null), formOrigin, error: 'Your sign-in has expired. Sign in again.', status: 401 });
      return undefined;
    }
    return { user, body };
  }

  /** The user's live grant with this id, or undefined (another person's grant does not exist here). */
  async function ownGrant(userId: string, grantId: string) {
    return (await listUserGrants(db, userId)).find((g) => g.id === grantId && g.revokedAt === null);
  }

  app.get('/account/apps', async (req, reply) => {
    const user = await signedIn(req);
    if (!user) return accountSignInPage(reply, { csrf: csrfToken(req, reply, secure), formOrigin });
    return showApps(req, reply, user.id, user.email);
  });

  app.post('/account/sign-in', async (req, reply) => {
    const body = (req.body ?? {}) as Record<string, unknown>;
    if (typeof body !== 'object' || !csrfValid(req, secure, one(body.csrf))) {
      return errorPage(reply, 403, 'Form expired', 'This form could not be verified (missing or wrong security token). Open the page again.');
    }
    const email = one(body.email) ?? '';
    const outcome = await signIn(req.ip, email, one(body.password) ?? '');
    if (outcome.kind !== 'ok') {
      if (outcome.kind === 'wait') reply.header('retry-after', String(outcome.seconds));
      return accountSignInPage(reply, { csrf: csrfToken(req, reply, secure), formOrigin, error: outcome.message, email, status: outcome.kind === 'wait' ? 429 : 200, ...nextOf(body) });
    }
    await startSession(db, reply, outcome.user.id, clock, secure);
    return back(reply, nextOf(body).next);
  });

  app.post('/account/sign-out', async (req, reply) => {
    const form = await formUser(req, reply);
    if (!form) return reply;
    await endSession(db, req, reply, secure);
    return back(reply);
  });

  /** A form post about one connected app: the form's checks, then the grant (a 404 page when it is not the user's). */
  async function grantForm(req: FastifyRequest<{ Params: { grantId: string } }>, reply: FastifyReply) {
    const form = await formUser(req, reply);
    if (!form) return undefined;
    const grant = await ownGrant(form.user.id, req.params.grantId);
    if (!grant) {
      await errorPage(reply, 404, 'Not found', 'This application is not connected to your account.');
      return undefined;
    }
    return { ...form, grant };
  }

  app.post<{ Params: { grantId: string } }>('/account/apps/:grantId/categories', async (req, reply) => {
    const form = await grantForm(req, reply);
    if (!form) return reply;
    const { grant } = form;
    const { categories, readOnly, send } = grantChoice(form.body);
    if (categories.length === 0) return errorPage(reply, 400, 'No category ticked', 'Tick at least one category, or revoke the application instead.');
    await setGrantCategories(db, grant.id, categories, clock, readOnly, send);
    return back(reply);
  });

  app.post<{ Params: { grantId: string } }>('/account/apps/:grantId/revoke', async (req, reply) => {
    const form = await grantForm(req, reply);
    if (!form) return reply;
    await revokeGrant(db, form.grant.id, clock);
    return back(reply);
  });
}
