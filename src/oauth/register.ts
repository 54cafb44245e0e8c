import type { FastifyInstance } from 'fastify';
import { createLimiter, createOutcomeLimiter } from '../core/rate-limit.js';
import { registerClient } from './clients.js';
import { noStore, OAuthError } from './errors.js';
import { ANY_ORIGIN_POST } from '../http/cors.js';

/** Spec limit: 10 registrations per 60 seconds per IP address. */
export const REGISTRATION_LIMIT = { points: 10, durationSeconds: 60 } as const;
/** Open registration must not let one address fill the database: at most this many new clients per IP per day. */
export const REGISTRATION_DAILY_LIMIT = { points: 100, durationSeconds: 24 * 60 * 60 } as const;

/** RFC 7591 dynamic client registration: open, no approval. */
export function registerRegistrationRoute(app: FastifyInstance) {
  const { clock, database, redis } = app.deps;
  const limiter = createLimiter({ name: 'oauth-register', ...REGISTRATION_LIMIT }, redis);
  const daily = createOutcomeLimiter({ name: 'oauth-register-daily', ...REGISTRATION_DAILY_LIMIT }, redis);
  const tooMany = (seconds: number, what: string) =>
    new OAuthError('rate_limited', `Too many registrations from this address${what}; retry in ${seconds} s`, 429, { 'retry-after': String(seconds) });

  // Browser-based clients register cross-origin; the endpoint carries no cookies, so any origin may.
  app.route({
    ...ANY_ORIGIN_POST,
    url: '/oauth/register',
    handler: async (req, reply) => {
      // Every attempt counts, valid or not, so the limit also caps probing.
      const verdict = await limiter.consume(req.ip);
      if (!verdict.allowed) throw tooMany(verdict.retryAfter, '');
      // The daily cap counts the clients created, not the attempts (those are capped per minute above).
      const wait = await daily.retryAfter(req.ip);
      if (wait > 0) throw tooMany(wait, ` today (${REGISTRATION_DAILY_LIMIT.points} per day)`);
      const client = await registerClient(database.db, req.body, clock);
      await daily.count(req.ip);
      return noStore(reply).code(201).send(client);
    },
  });
}
