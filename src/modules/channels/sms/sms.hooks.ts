import { LRUCache } from 'lru-cache';
import { z } from 'zod';
import { AppError } from '../../../core/errors.js';
import { defineOperation, type Actor, type Operation } from '../../../core/operation.js';
import { Uuid } from '../../../core/schemas.js';
import type { Db } from '../../../db/client.js';
import { recordEvents } from '../../events/events.recorder.js';
import { CommittedWork } from '../../events/events.signal.js';
import type { ChannelRow } from '../channels.repository.js';
import { HookRefused, type HookAnswer, type HookCall, type HookRoute, type KindHook } from '../kind.js';
import type { OperationRunner } from '../runner.js';
import type { HookResult, ProviderWebhook, ProviderWithSecret, StatusReport, WebhookCall } from './provider.js';
import { providerDefinition } from './providers/index.js';
import { ChannelToRead, receiveText } from './sms.inbound.js';
import { addOptOut, announceFailed, applyStatus, hookUrl, loadVersionedSmsChannel } from './sms.repository.js';

/**
 * What a provider's webhook said, applied: whichever provider it came from (its file verified and parsed the
 * call), each result is written through the operation runner, like a received message: a received text
 * (`receiveText`), a delivery report, an opt-out the provider reports. A disabled channel receives nothing
 * (the text is acknowledged and dropped; the provider keeps its log); its reports still apply.
 */

const SYSTEM: Actor = { type: 'system', id: null, depth: 0 };

const ReportInput = z.strictObject({
  channelId: Uuid,
  messageId: Uuid.optional(),
  providerMessageId: z.string().min(1).max(1000),
  status: z.enum(['queued', 'sent', 'delivered', 'failed']),
  errorCode: z.string().max(1000).nullable(),
  raw: z.string().max(1000),
  unsubscribed: z.boolean(),
});
const OptOutInput = z.strictObject({ channelId: Uuid, phoneNumber: z.string().min(1).max(64) });
const Applied = z.object({ messageId: z.string().nullable() });

/** A delivery report: the message moves forward (`applyStatus`); with `unsubscribed`, its recipient opts out. */
const reportOperation = (channel: ChannelRow, work: CommittedWork): Operation =>
  defineOperation({
    id: 'messages.report',
    method: 'POST',
    event: () => [],
    path: '/messages/report',
    summary: 'Apply a delivery report',
    input: ReportInput,
    output: Applied,
    handler: async (input, ctx) => {
      const report: StatusReport = { providerMessageId: input.providerMessageId, status: input.status, errorCode: input.errorCode, raw: input.raw };
      const matched = await applyStatus(ctx.db, channel, report, input.messageId, work);
      // The recipient of the channel's outgoing text the report names (never a number the report states), and
      // only when the report moves that text forward: a report replayed later opts nobody out again.
      const to = matched?.forward ? matched.recipient : undefined;
      if (input.unsubscribed && to?.startsWith('+')) {
        const { failed } = await addOptOut(ctx.db, channel.organizationId, channel.id, to, 'provider');
        await announceFailed(ctx.db, channel.organizationId, SYSTEM, failed, work);
      }
      return { messageId: matched?.id ?? null };
    },
  });

/** An opt-out the provider reports for a number. */
const optOutOperation = (channel: ChannelRow, work: CommittedWork): Operation =>
  defineOperation({
    id: 'channels.report_opt_out',
    method: 'POST',
    event: () => [],
    path: '/channels/{id}/opt-outs/report',
    summary: 'Apply an opt-out a provider reported',
    input: OptOutInput,
    output: Applied,
    handler: async (input, ctx) => {
      const { optOut, created, failed } = await addOptOut(ctx.db, channel.organizationId, channel.id, input.phoneNumber, 'provider');
      if (created) {
        const recorded = await recordEvents(ctx.db, SYSTEM, [{ type: 'channel.opt_out.created', organizationId: channel.organizationId, resourceId: optOut.id, data: optOut }]);
        work.add({ ...recorded, types: ['channel.opt_out.created'] });
      }
      await announceFailed(ctx.db, channel.organizationId, SYSTEM, failed, work);
      return { messageId: null };
    },
  });

/** Applies a webhook's results, in order, each in its own transaction; the events are announced after each commit. */
export async function applyHookResults(run: OperationRunner, db: Db, channel: ChannelRow, results: HookResult[]): Promise<void> {
  const caller = { orgId: channel.organizationId, actor: SYSTEM, permissions: ['*'], db };
  for (const result of results) {
    if (result.type === 'incoming') {
      if (channel.status !== 'disabled') await receiveText(run, db, channel, result.text);
      continue;
    }
    const work = new CommittedWork();
    if (result.type === 'status') {
      const { report } = result;
      await run(reportOperation(channel, work), { channelId: channel.id, messageId: result.messageId, ...report, unsubscribed: result.unsubscribed }, caller);
    } else {
      await run(optOutOperation(channel, work), { channelId: channel.id, phoneNumber: result.number }, caller);
    }
    work.announce();
  }
}

// ------------------------------------------------------------------ the hook

type Params = Record<string, string | string[]>;

function formParams(body: string): Params {
  const out: Params = {};
  for (const [name, value] of new URLSearchParams(body)) {
    const seen = out[name];
    out[name] = seen === undefined ? value : Array.isArray(seen) ? [...seen, value] : [seen, value];
  }
  return out;
}

const MessageIdParam = z.uuid();

type SmsChannel = ChannelRow & { provider: ProviderWithSecret };

/**
 * The text channels this process verified a call of lately, with their provider secret decrypted and their
 * version (`smsChannelVersion`), by id: a provider posts every text of a channel to the same hook, and the
 * channel's read was one of a text's two round trips (a retry's three), its secret decrypted each time. A kept channel
 * is never trusted on its own: a call verified against it writes only through the one statement that checks,
 * under the channel's hold, that the channel's row still has that version (`receiveText` with `keptVersion`).
 * When it does not (the auth token rotated, the channel deleted or disabled) nothing is written, and the call is
 * verified again against the channel as read now: a call signed with the old secret is refused then.
 */
const kept = new LRUCache<string, { channel: SmsChannel; version: string }>({ max: 1000, ttl: 10 * 60_000 });

/** The channel as stored now, and the call verified against its secret (kept for the next calls); else the refusal. */
async function readAndVerify(db: Db, call: HookCall, providerCall: WebhookCall, status: boolean): Promise<{ channel: SmsChannel; webhook: ProviderWebhook }> {
  const found = await loadVersionedSmsChannel(db, call.channelId);
  const webhook = found && providerDefinition(found.channel.provider.kind).webhook;
  if (!found || !webhook) {
    kept.delete(call.channelId);
    throw new AppError('NOT_FOUND', 'No such channel');
  }
  if (!webhook.verify(providerCall, found.channel.provider.secret)) {
    throw new AppError('FORBIDDEN', `Missing or wrong ${webhook.signatureHeader} (signed URL expected: ${hookUrl(call.channelId, status)}…)`);
  }
  kept.set(call.channelId, found);
  return { channel: found.channel, webhook };
}

/** Parses a verified call and applies its results; answers the provider's expected answer. */
async function applyVerified(run: OperationRunner, db: Db, channel: SmsChannel, webhook: ProviderWebhook, providerCall: WebhookCall): Promise<HookAnswer> {
  const results = webhook.parse(providerCall);
  if (!Array.isArray(results)) throw new AppError('VALIDATION_ERROR', results.error, { errors: [], properties: { [results.field]: { errors: ['Required'] } } });
  await applyHookResults(run, db, channel, results);
  return { status: 200, ...webhook.answer };
}

/**
 * A route of the text channels' hook: the channel's provider file (channels/sms/providers/) verifies the call's
 * signature (Twilio: `X-Twilio-Signature` with the auth token; SignalWire: `X-SignalWire-Signature` with the
 * signing key) and parses it into typed results, which `applyHookResults` writes through the operation runner.
 * A received text of a channel kept from an earlier call (`kept`) is verified against the kept secret and
 * written by the one statement that checks the channel's version; anything else reads the channel first.
 */
const smsRoute = (kind: 'inbound' | 'status'): HookRoute => ({
  method: 'POST',
  suffix: kind === 'status' ? '/status' : '',
  async verify(db, call: HookCall) {
    const m = call.query.m;
    const providerCall: WebhookCall = {
      hook: kind === 'inbound' ? 'message' : 'status',
      url: call.url,
      headers: call.headers,
      params: formParams(call.rawBody.toString('utf8')),
      messageId: typeof m === 'string' && MessageIdParam.safeParse(m).success ? m : undefined,
    };
    const status = kind === 'status';
    const known = status ? undefined : kept.get(call.channelId);
    const knownHook = known && providerDefinition(known.channel.provider.kind).webhook;
    if (known && knownHook?.verify(providerCall, known.channel.provider.secret)) {
      return {
        rateKey: known.channel.id,
        async apply(run) {
          const results = knownHook.parse(providerCall);
          const only = Array.isArray(results) && results.length === 1 ? results[0] : undefined;
          if (only?.type === 'incoming' && known.channel.status !== 'disabled') {
            try {
              await receiveText(run, db, known.channel, only.text, { keptVersion: known.version });
              return { status: 200, ...knownHook.answer };
            } catch (err) {
              if (!(err instanceof ChannelToRead)) throw err;
            }
          }
          // Not the one statement, or the channel is no longer as kept: nothing written yet; the call is verified
          // again against the channel as stored now before anything is.
          if (kept.get(call.channelId) === known) kept.delete(call.channelId);
          let fresh;
          try {
            fresh = await readAndVerify(db, call, providerCall, status);
          } catch (err) {
            throw err instanceof AppError ? new HookRefused(err) : err;
          }
          return applyVerified(run, db, fresh.channel, fresh.webhook, providerCall);
        },
      };
    }
    const { channel, webhook } = await readAndVerify(db, call, providerCall, status);
    return { rateKey: channel.id, apply: (run) => applyVerified(run, db, channel, webhook, providerCall) };
  },
});

/**
 * The text channels' hook, one for every provider: `POST /hooks/sms/{channelId}` (a text arrived) and
 * `POST /hooks/sms/{channelId}/status` (a delivery report), form posts of at most 64 KiB. The provider's answer
 * (Twilio's empty TwiML) comes only once everything is committed, so a provider that got no 200 delivers again,
 * and the same id is one message.
 */
export const smsHook: KindHook = {
  segment: 'sms',
  bodyLimit: 64 * 1024,
  contentType: { pattern: /^application\/x-www-form-urlencoded\b/i, refusal: 'Provider webhooks are form posts (application/x-www-form-urlencoded)' },
  routes: [smsRoute('inbound'), smsRoute('status')],
};
