import { and, eq, gt, lt } from 'drizzle-orm';
import CSRF from '@fastify/csrf';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Clock } from '../core/clock.js';
import { randomToken, sha256 } from '../core/secrets.js';
import type { DbOrTx } from '../db/client.js';
import { oauthSessions } from '../db/schema.js';

/** How long a sign-in on the consent page is remembered in this browser. */
export const SESSION_TTL_S = 12 * 60 * 60;

/**
 * Cookie names. With an https PUBLIC_URL they carry the `__Host-` prefix (Secure, Path=/, no Domain: the
 * browser refuses to let a sibling host or plain http set them); on http the prefix is not allowed.
 */
export function cookieNames(secure: boolean) {
  const prefix = secure ? '__Host-' : '';
  return { session: `${prefix}sb_session`, csrf: `${prefix}sb_csrf` };
}

// Cookies are parsed and written by @fastify/cookie (registered with the authorization server's routes).
const readCookie = (req: FastifyRequest, name: string): string | undefined => req.cookies[name];

/** HttpOnly, SameSite=Lax, Path=/, Secure on https; `maxAge` undefined = until the browser closes. */
function setCookie(reply: FastifyReply, name: string, value: string, opts: { secure: boolean; maxAge?: number }) {
  void reply.setCookie(name, value, { path: '/', httpOnly: true, sameSite: 'lax', secure: opts.secure, ...(opts.maxAge !== undefined ? { maxAge: opts.maxAge } : {}) });
}

const TOKEN_SHAPE = /^[A-Za-z0-9_-]{20,100}$/;

/** The session id a browser presents (its cookie, well-formed), or undefined. */
function presentedSession(req: FastifyRequest, secure: boolean): string | undefined {
  const id = readCookie(req, cookieNames(secure).session);
  return id && TOKEN_SHAPE.test(id) ? id : undefined;
}

/**
 * CSRF tokens by `@fastify/csrf`: each token is a fresh salt and a hash over the browser's secret (an
 * HttpOnly cookie, created on first sight) and the session it is bound to, checked in constant time. A
 * page never shows the secret, nor the same token twice; a cross-site page can neither read the cookies
 * nor, with `__Host-`, overwrite them. Binding the session makes a token change at every sign-in and end
 * with the session; a token is good for as long as a session lasts at most.
 */
const csrf: CSRF.TokensUserinfo = CSRF({ userInfo: true, validity: SESSION_TTL_S * 1000 });

/** What a token is bound to: the session (one-way, so the page shows nothing of its id), or being signed out. */
const csrfBinding = (sessionId: string | undefined) => (sessionId ? `session:${sha256(sessionId)}` : 'signed-out');

/**
 * The CSRF token for the forms of this page, bound to `session` (the id just started, `null` right after
 * signing out; absent: the one the request presents).
 */
export function csrfToken(req: FastifyRequest, reply: FastifyReply, secure: boolean, session?: string | null): string {
  const sessionId = session === null ? undefined : (session ?? presentedSession(req, secure));
  const name = cookieNames(secure).csrf;
  let secret = readCookie(req, name);
  if (!secret || !TOKEN_SHAPE.test(secret)) {
    secret = csrf.secretSync();
    setCookie(reply, name, secret, { secure });
  }
  return csrf.create(secret, csrfBinding(sessionId));
}

/** Whether the submitted token was made for this browser's secret and the session it presents now. */
export function csrfValid(req: FastifyRequest, secure: boolean, submitted: string | undefined): boolean {
  const secret = readCookie(req, cookieNames(secure).csrf);
  return !!secret && TOKEN_SHAPE.test(secret) && csrf.verify(secret, submitted ?? '', csrfBinding(presentedSession(req, secure)));
}

/** Starts a session for a user who just signed in; the cookie value is stored only as its SHA-256. */
export async function startSession(db: DbOrTx, reply: FastifyReply, userId: string, clock: Clock, secure: boolean): Promise<string> {
  const now = clock();
  const id = randomToken(32);
  // Expired sessions are swept here, so the table does not grow with abandoned sign-ins.
  await db.delete(oauthSessions).where(lt(oauthSessions.expiresAt, now));
  await db.insert(oauthSessions).values({ idHash: sha256(id), userId, createdAt: now, expiresAt: new Date(now.getTime() + SESSION_TTL_S * 1000) });
  setCookie(reply, cookieNames(secure).session, id, { secure, maxAge: SESSION_TTL_S });
  return id;
}

/** The signed-in user's id, or undefined when there is no live session. */
export async function sessionUserId(db: DbOrTx, req: FastifyRequest, clock: Clock, secure: boolean): Promise<string | undefined> {
  const id = readCookie(req, cookieNames(secure).session);
  if (!id || !TOKEN_SHAPE.test(id)) return undefined;
  const [row] = await db
    .select({ userId: oauthSessions.userId })
    .from(oauthSessions)
    .where(and(eq(oauthSessions.idHash, sha256(id)), gt(oauthSessions.expiresAt, clock())))
    .limit(1);
  return row?.userId;
}

export async function endSession(db: DbOrTx, req: FastifyRequest, reply: FastifyReply, secure: boolean) {
  const name = cookieNames(secure).session;
  const id = readCookie(req, name);
  if (id) await db.delete(oauthSessions).where(eq(oauthSessions.idHash, sha256(id)));
  setCookie(reply, name, '', { secure, maxAge: 0 });
}
