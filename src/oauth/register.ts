import type { FastifyInstance } from 'fastify';
import { createLimiter } from '../core/rate-limit.js';
import { registerClient } from './clients.js';
import { noStore, OAuthError } from './errors.js';
import { allowAnyOrigin } from './metadata.js';

/** Spec limit: 10 registrations per 60 seconds per IP address. */
export const REGISTRATION_LIMIT = { points: 10, durationSeconds: 60 } as const;

/** RFC 7591 dynamic client registration: open, no approval. */
export function registerRegistrationRoute(app: FastifyInstance) {
  const { clock, database, redis } = app.deps;
  const limiter = createLimiter({ name: 'oauth-register', ...REGISTRATION_LIMIT }, redis);

  app.post('/oauth/register', async (req, reply) => {
    allowAnyOrigin(reply);
    // Every attempt counts, valid or not, so the limit also caps probing.
    const verdict = await limiter.consume(req.ip);
    if (!verdict.allowed) {
      throw new OAuthError('rate_limited', `Too many registrations from this address; retry in ${verdict.retryAfter} s`, 429, { 'retry-after': String(verdict.retryAfter) });
    }
    const client = await registerClient(database.db, req.body, clock);
    return noStore(reply).code(201).send(client);
  });
}
