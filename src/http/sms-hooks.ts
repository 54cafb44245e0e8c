import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { AppError } from '../core/errors.js';
import { createLimiter, createOutcomeLimiter } from '../core/rate-limit.js';
import { sendError } from './errors.js';
import { CommittedWork } from '../modules/events/events.signal.js';
import type { OperationRunner } from '../modules/channels/email/inbound.js';
import { applyStatus, addOptOut, announceFailed, hookUrl, loadSmsChannel } from '../modules/channels/sms/sms.repository.js';
import { parseTwilioInbound, parseTwilioStatus, validTwilioSignature } from '../modules/channels/sms/providers/twilio.js';
import { receiveText } from '../modules/channels/sms/sms.inbound.js';
import { ipKey } from '../workers/smtp-addresses.js';

/**
 * The provider webhooks of Twilio-compatible text channels: `POST /hooks/sms/{channelId}` (a text arrived)
 * and `POST /hooks/sms/{channelId}/status` (a delivery report). No API key: the channel comes from the path
 * and the request must carry a valid `X-Twilio-Signature` (HMAC-SHA1 with the channel's auth token over
 * PUBLIC_URL + path + query and the sorted parameters); anything else is a 403 that writes nothing. The
 * answer (an empty TwiML `<Response/>`) comes only once the message and its events are committed, so a
 * provider that got no 200 delivers again, and the same MessageSid is one message.
 *
 * Limits: only signed webhooks spend the channel's rate (`rateLimit` a minute), so that nobody else can use
 * it up; refused ones (no such channel, a missing or wrong signature) count per client address on their own
 * (`failureLimit` a minute), past which that address is answered 429 before anything is looked up.
 */

const TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response/>';
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
      if (!channel || channel.provider.kind !== 'twilio') throw await refused(new AppError('NOT_FOUND', 'No such channel'));
      const params = (req.body ?? {}) as Params;
      // The URL the provider signed: the public origin, then the path and query exactly as requested.
      const signed = `${origin}${req.url}`;
      if (!validTwilioSignature(channel.provider.secret, signed, params, req.headers['x-twilio-signature'] as string | undefined)) {
        throw await refused(new AppError('FORBIDDEN', `Missing or wrong X-Twilio-Signature (signed URL expected: ${hookUrl(channelId, kind === 'status')}…)`));
      }
      const limited = await limiter.consume(channelId);
      if (!limited.allowed) throw new AppError('RATE_LIMITED', 'Too many webhooks for this channel; retry later', undefined, limited.retryAfter);
      if (kind === 'inbound') {
        const incoming = parseTwilioInbound(params);
        if (!incoming) throw new AppError('VALIDATION_ERROR', 'The webhook names no MessageSid', { errors: [], properties: { MessageSid: { errors: ['Required'] } } });
        // A disabled channel receives nothing: the text is acknowledged and dropped (the provider keeps its log).
        if (channel.status !== 'disabled') await receiveText(opts.run, db, channel, incoming);
      } else {
        const report = parseTwilioStatus(params);
        if (report) {
          const query = req.query as { m?: unknown };
          const messageId = typeof query.m === 'string' && ChannelIdParam.safeParse(query.m).success ? query.m : undefined;
          const work = new CommittedWork();
          await db.transaction(async (tx) => {
            const matched = await applyStatus(tx, channel, report, messageId, work);
            // Twilio's 21610: the recipient unsubscribed (texted STOP to the carrier); nothing more goes to it.
            // The recipient of the channel's outgoing text the report names (never the `To` it states), and only
            // when the report moves that text forward: a report replayed later opts nobody out again.
            const to = matched?.forward ? matched.recipient : undefined;
            if (report.errorCode === '21610' && to?.startsWith('+')) {
              const { failed } = await addOptOut(tx, channel.organizationId, channel.id, to, 'provider');
              await announceFailed(tx, channel.organizationId, { type: 'system', id: null, depth: 0 }, failed, work);
            }
          });
          work.announce();
        }
      }
      return reply.code(200).type('text/xml; charset=utf-8').send(TWIML);
    };

    const errors = (err: unknown, req: FastifyRequest, reply: FastifyReply) => sendError(err, req, reply);
    hooks.setErrorHandler(errors);
    hooks.post('/hooks/sms/:channelId', handle('inbound'));
    hooks.post('/hooks/sms/:channelId/status', handle('status'));
  });
}
