import { and, eq, gt, lt } from 'drizzle-orm';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Clock } from '../core/clock.js';
import { randomToken, safeEqual, sha256 } from '../core/secrets.js';
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

/** The CSRF token of a signed-in browser: derived one-way from its session, so it changes at every sign-in and ends with the session. */
const sessionCsrf = (sessionId: string) => sha256(`csrf:${sessionId}`);

/**
 * The CSRF token for the forms of this page. A signed-in browser's is derived from its session
 * (`session`: the id just started, `null` right after signing out, absent: the one the request presents);
 * before sign-in it is a double-submit token (an HttpOnly cookie and the same value in the form), created
 * on first sight. A cross-site page can neither read the cookies nor, with `__Host-`, overwrite them.
 */
export function csrfToken(req: FastifyRequest, reply: FastifyReply, secure: boolean, session?: string | null): string {
  const sessionId = session === null ? undefined : (session ?? presentedSession(req, secure));
  if (sessionId) return sessionCsrf(sessionId);
  const name = cookieNames(secure).csrf;
  const existing = readCookie(req, name);
  if (existing && TOKEN_SHAPE.test(existing)) return existing;
  const token = randomToken(24);
  setCookie(reply, name, token, { secure });
  return token;
}

/** With a session, only the token derived from it is valid; without one, the double-submit pair. */
export function csrfValid(req: FastifyRequest, secure: boolean, submitted: string | undefined): boolean {
  const sessionId = presentedSession(req, secure);
  if (sessionId) return !!submitted && safeEqual(submitted, sessionCsrf(sessionId));
  const cookie = readCookie(req, cookieNames(secure).csrf);
  return !!cookie && !!submitted && TOKEN_SHAPE.test(cookie) && safeEqual(cookie, submitted);
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
