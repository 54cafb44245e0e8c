import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { AppError } from '../core/errors.js';
import { createLimiter, createOutcomeLimiter } from '../core/rate-limit.js';
import { sendError } from './errors.js';
import type { OperationRunner } from '../modules/channels/runner.js';
import { hookUrl, loadSmsChannel } from '../modules/channels/sms/sms.repository.js';
import { applyHookResults } from '../modules/channels/sms/sms.hooks.js';
import { providerDefinition } from '../modules/channels/sms/providers/index.js';
import { ipKey } from '../workers/smtp-addresses.js';

/**
 * The provider webhooks of text channels, one route for every provider: `POST /hooks/sms/{channelId}` (a
 * text arrived) and `POST /hooks/sms/{channelId}/status` (a delivery report). No API key: the channel comes
 * from the path, and its provider's file (channels/sms/providers/) verifies the call's signature (Twilio:
 * `X-Twilio-Signature` with the auth token; SignalWire: `X-SignalWire-Signature` with the signing key) and
 * parses it into typed results, which `applyHookResults` writes through the operation runner. A call that is
 * not the provider's is a 403 that writes nothing. The provider's answer (Twilio's empty TwiML) comes only
 * once everything is committed, so a provider that got no 200 delivers again, and the same id is one message.
 *
 * Limits: only signed webhooks spend the channel's rate (`rateLimit` a minute), so that nobody else can use
 * it up; refused ones (no such channel, a missing or wrong signature) count per client address on their own
 * (`failureLimit` a minute), past which that address is answered 429 before anything is looked up.
 */

const BODY_LIMIT = 64 * 1024;
const ChannelIdParam = z.uuid();

type Params = Record<string, string | string[]>;

function formParams(body: string): Params {
  const out: Params = {};
  for (const [name, value] of new URLSearchParams(body)) {
    const seen = out[name];
    out[name] = seen === undefined ? value : Array.isArray(seen) ? [...seen, value] : [seen, value];
  }
  return out;
}

export interface SmsHooksOptions {
  run: OperationRunner;
  publicUrl: string;
  /** Signed webhooks per channel per minute. */
  rateLimit: number;
  /** Refused webhooks per client address (an IPv6 /64) per minute. */
  failureLimit: number;
}

export async function registerSmsHooks(app: FastifyInstance, opts: SmsHooksOptions) {
  const limiter = createLimiter({ name: 'sms-hooks', points: opts.rateLimit, durationSeconds: 60 }, app.deps.redis);
  const refusals = createOutcomeLimiter({ name: 'sms-hooks-refused', points: opts.failureLimit, durationSeconds: 60 }, app.deps.redis);
  const origin = opts.publicUrl.replace(/(?<!\/)\/+$/, '');
  await app.register(async (hooks) => {
    hooks.removeAllContentTypeParsers();
    hooks.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: BODY_LIMIT }, (_req, body, done) => done(null, formParams(body as string)));
    hooks.addContentTypeParser('*', { parseAs: 'string', bodyLimit: BODY_LIMIT }, (_req, _body, done) => done(new AppError('BAD_REQUEST', 'Provider webhooks are form posts (application/x-www-form-urlencoded)'), undefined));

    const handle = (kind: 'inbound' | 'status') => async (req: FastifyRequest, reply: FastifyReply) => {
      const { channelId } = req.params as { channelId: string };
      const client = ipKey(req.ip);
      const wait = await refusals.retryAfter(client);
      if (wait > 0) throw new AppError('RATE_LIMITED', 'Too many refused webhooks from this address; retry later', undefined, wait);
      /** A refusal, counted against the client's address. */
      const refused = async (error: AppError) => (await refusals.count(client), error);
      if (!ChannelIdParam.safeParse(channelId).success) throw await refused(new AppError('NOT_FOUND', 'No such channel'));
      const db = app.deps.database.db;
      const channel = await loadSmsChannel(db, channelId);
      const webhook = channel && providerDefinition(channel.provider.kind).webhook;
      if (!channel || !webhook) throw await refused(new AppError('NOT_FOUND', 'No such channel'));
      const query = req.query as { m?: unknown };
      const call = {
        hook: kind === 'inbound' ? ('message' as const) : ('status' as const),
        // The URL the provider signed: the public origin, then the path and query exactly as requested.
        url: `${origin}${req.url}`,
        headers: req.headers,
        params: (req.body ?? {}) as Params,
        messageId: typeof query.m === 'string' && ChannelIdParam.safeParse(query.m).success ? query.m : undefined,
      };
      if (!webhook.verify(call, channel.provider.secret)) {
        throw await refused(new AppError('FORBIDDEN', `Missing or wrong ${webhook.signatureHeader} (signed URL expected: ${hookUrl(channelId, kind === 'status')}…)`));
      }
      const limited = await limiter.consume(channelId);
      if (!limited.allowed) throw new AppError('RATE_LIMITED', 'Too many webhooks for this channel; retry later', undefined, limited.retryAfter);
      const results = webhook.parse(call);
      if (!Array.isArray(results)) throw new AppError('VALIDATION_ERROR', results.error, { errors: [], properties: { [results.field]: { errors: ['Required'] } } });
      await applyHookResults(opts.run, db, channel, results);
      return reply.code(200).type(webhook.answer.contentType).send(webhook.answer.body);
    };

    const errors = (err: unknown, req: FastifyRequest, reply: FastifyReply) => sendError(err, req, reply);
    hooks.setErrorHandler(errors);
    hooks.post('/hooks/sms/:channelId', handle('inbound'));
    hooks.post('/hooks/sms/:channelId/status', handle('status'));
  });
}
