import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { AppError } from '../core/errors.js';
import { createLimiter, createOutcomeLimiter } from '../core/rate-limit.js';
import { channelHooks } from '../modules/channels/kinds.js';
import { HookRefused, type HookRoute, type KindHook } from '../modules/channels/kind.js';
import type { OperationRunner } from '../modules/channels/runner.js';
import { ipKey } from '../workers/smtp-addresses.js';
import { sendError } from './errors.js';

/**
 * The providers' webhooks of every channel kind, one route: `/hooks/{segment}/{channelId}{suffix}` for each
 * route a kind's hook declares (its kind's `hook` in the registry, `channels/kinds.ts`: e.g. a text provider's
 * `/hooks/{segment}/{id}` and `/status` below it). No API key: the channel comes from the path, and the kind says
 * whether the call is its provider's (a signature over what was received, kept as bytes) and what it means.
 * A call that is not the provider's writes nothing; the answer comes once everything is committed, so a
 * provider that got no 200 delivers again, and what was stored is recognized by its id.
 *
 * Limits: bodies at most the kind's `bodyLimit` (413). Only verified calls spend the channel's rate
 * (`rateLimit` a minute), so that nobody else can use it up; refused ones (no such channel, a missing or wrong
 * signature or token) count per client address on their own (`failureLimit` a minute), past which that
 * address is answered 429 before anything is looked up.
 */

const ChannelIdParam = z.uuid();

export interface ChannelHooksOptions {
  run: OperationRunner;
  publicUrl: string;
  /** Verified calls per channel per minute. */
  rateLimit: number;
  /** Refused calls per client address (an IPv6 /64) per minute. */
  failureLimit: number;
}

const contentTypeOf = (req: FastifyRequest) => String(req.headers['content-type'] ?? '');

export async function registerChannelHooks(app: FastifyInstance, opts: ChannelHooksOptions) {
  const limiter = createLimiter({ name: 'channel-hooks', points: opts.rateLimit, durationSeconds: 60 }, app.deps.redis);
  const refusals = createOutcomeLimiter({ name: 'channel-hooks-refused', points: opts.failureLimit, durationSeconds: 60 }, app.deps.redis);
  const origin = opts.publicUrl.replace(/(?<!\/)\/+$/, '');

  const handle = (hook: KindHook, route: HookRoute) => async (req: FastifyRequest, reply: FastifyReply) => {
    if (hook.contentType && req.method === 'POST' && !hook.contentType.pattern.test(contentTypeOf(req))) throw new AppError('BAD_REQUEST', hook.contentType.refusal);
    const client = ipKey(req.ip);
    const wait = await refusals.retryAfter(client);
    if (wait > 0) throw new AppError('RATE_LIMITED', 'Too many refused webhooks from this address; retry later', undefined, wait);
    /** A refusal, counted against the client's address. */
    const refused = async (error: AppError) => (await refusals.count(client), error);
    const { channelId } = req.params as { channelId: string };
    if (!ChannelIdParam.safeParse(channelId).success) throw await refused(new AppError('NOT_FOUND', 'No such channel'));
    const call = {
      channelId,
      url: `${origin}${req.url}`,
      query: req.query as Record<string, unknown>,
      headers: req.headers,
      rawBody: Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0),
    };
    let verified;
    try {
      verified = await route.verify(app.deps.database.db, call);
    } catch (err) {
      throw err instanceof AppError ? await refused(err) : err;
    }
    if (verified.rateKey !== undefined) {
      const limited = await limiter.consume(verified.rateKey);
      if (!limited.allowed) throw new AppError('RATE_LIMITED', 'Too many webhooks for this channel; retry later', undefined, limited.retryAfter);
    }
    let answer;
    try {
      answer = await verified.apply(opts.run);
    } catch (err) {
      throw err instanceof HookRefused ? await refused(err.error) : err;
    }
    return reply.code(answer.status).type(answer.contentType).send(answer.body);
  };

  await app.register(async (hooks) => {
    hooks.removeAllContentTypeParsers();
    // Any content type, kept as bytes: a signature is over them, and the kind reads them once it holds.
    hooks.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
    hooks.setErrorHandler((err: unknown, req: FastifyRequest, reply: FastifyReply) => sendError(err, req, reply));
    for (const hook of channelHooks()) {
      for (const route of hook.routes) {
        hooks.route({ method: route.method, url: `/hooks/${hook.segment}/:channelId${route.suffix}`, bodyLimit: hook.bodyLimit, handler: handle(hook, route) });
      }
    }
  });
}
