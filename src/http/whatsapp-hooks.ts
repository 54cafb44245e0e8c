import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { AppError } from '../core/errors.js';
import { createLimiter, createOutcomeLimiter } from '../core/rate-limit.js';
import type { OperationRunner } from '../modules/channels/runner.js';
import { answerSubscription, applyDelivery, assertSigned, hookChannel } from '../modules/channels/whatsapp/whatsapp.hooks.js';
import { WEBHOOK_BODY_LIMIT } from '../modules/channels/whatsapp/webhook.js';
import { ipKey } from '../workers/smtp-addresses.js';
import { sendError } from './errors.js';

/**
 * Meta's webhook of WhatsApp channels: `GET /hooks/whatsapp/{channelId}` (the subscription handshake) and
 * `POST /hooks/whatsapp/{channelId}` (messages and statuses). No API key: the channel comes from the path, the
 * POST must carry `X-Hub-Signature-256` over its raw bytes (kept as received: Meta's escaping would not survive
 * a re-serialization). Bodies are bounded (1 MiB). Only signed deliveries spend the channel's rate (`rateLimit`
 * a minute); refused requests count per client address (`failureLimit` a minute), past which that address is
 * answered 429 before anything is looked up. The answer comes once everything is committed.
 */

const ChannelIdParam = z.uuid();

export interface WhatsAppHooksOptions {
  run: OperationRunner;
  /** Signed deliveries per channel per minute. */
  rateLimit: number;
  /** Refused requests per client address (an IPv6 /64) per minute. */
  failureLimit: number;
}

export async function registerWhatsAppHooks(app: FastifyInstance, opts: WhatsAppHooksOptions) {
  const limiter = createLimiter({ name: 'whatsapp-hooks', points: opts.rateLimit, durationSeconds: 60 }, app.deps.redis);
  const refusals = createOutcomeLimiter({ name: 'whatsapp-hooks-refused', points: opts.failureLimit, durationSeconds: 60 }, app.deps.redis);
  await app.register(async (hooks) => {
    hooks.removeAllContentTypeParsers();
    // Any content type: the bytes are kept whole for the signature, and read as JSON only once it holds.
    hooks.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: WEBHOOK_BODY_LIMIT }, (_req, body, done) => done(null, body));

    const guarded = (handle: (req: FastifyRequest, reply: FastifyReply, refused: (e: AppError) => Promise<AppError>) => Promise<unknown>) => async (req: FastifyRequest, reply: FastifyReply) => {
      const client = ipKey(req.ip);
      const wait = await refusals.retryAfter(client);
      if (wait > 0) throw new AppError('RATE_LIMITED', 'Too many refused webhooks from this address; retry later', undefined, wait);
      const refused = async (error: AppError) => (await refusals.count(client), error);
      const { channelId } = req.params as { channelId: string };
      if (!ChannelIdParam.safeParse(channelId).success) throw await refused(new AppError('NOT_FOUND', 'No such channel'));
      return handle(req, reply, refused);
    };

    hooks.setErrorHandler((err: unknown, req: FastifyRequest, reply: FastifyReply) => sendError(err, req, reply));

    hooks.get(
      '/hooks/whatsapp/:channelId',
      guarded(async (req, reply, refused) => {
        const channel = await hookChannel(app.deps.database.db, (req.params as { channelId: string }).channelId).catch(async (e: AppError) => Promise.reject(await refused(e)));
        let answer;
        try {
          answer = answerSubscription(channel, req.query as Record<string, unknown>);
        } catch (e) {
          throw await refused(e as AppError);
        }
        return reply.code(answer.status).type(answer.contentType).send(answer.body);
      }),
    );

    hooks.post(
      '/hooks/whatsapp/:channelId',
      guarded(async (req, reply, refused) => {
        const db = app.deps.database.db;
        const channel = await hookChannel(db, (req.params as { channelId: string }).channelId).catch(async (e: AppError) => Promise.reject(await refused(e)));
        const rawBody = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
        try {
          assertSigned(channel, { headers: req.headers, rawBody });
        } catch (e) {
          throw await refused(e as AppError);
        }
        const limited = await limiter.consume(channel.id);
        if (!limited.allowed) throw new AppError('RATE_LIMITED', 'Too many webhooks for this channel; retry later', undefined, limited.retryAfter);
        await applyDelivery({ run: opts.run, db }, channel, rawBody);
        return reply.code(200).type('text/plain; charset=utf-8').send('EVENT_RECEIVED');
      }),
    );
  });
}
