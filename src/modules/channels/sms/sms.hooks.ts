import { z } from 'zod';
import { AppError } from '../../../core/errors.js';
import { defineOperation, type Actor, type Operation } from '../../../core/operation.js';
import { Uuid } from '../../../core/schemas.js';
import type { Db } from '../../../db/client.js';
import { recordEvents } from '../../events/events.recorder.js';
import { CommittedWork } from '../../events/events.signal.js';
import type { ChannelRow } from '../channels.repository.js';
import type { HookCall, HookRoute, KindHook } from '../kind.js';
import type { OperationRunner } from '../runner.js';
import type { HookResult, StatusReport } from './provider.js';
import { providerDefinition } from './providers/index.js';
import { receiveText } from './sms.inbound.js';
import { addOptOut, announceFailed, applyStatus, hookUrl, loadSmsChannel } from './sms.repository.js';

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

/**
 * A route of the text channels' hook: the channel's provider file (channels/sms/providers/) verifies the call's
 * signature (Twilio: `X-Twilio-Signature` with the auth token; SignalWire: `X-SignalWire-Signature` with the
 * signing key) and parses it into typed results, which `applyHookResults` writes through the operation runner.
 */
const smsRoute = (kind: 'inbound' | 'status'): HookRoute => ({
  method: 'POST',
  suffix: kind === 'status' ? '/status' : '',
  async verify(db, call: HookCall) {
    const channel = await loadSmsChannel(db, call.channelId);
    const webhook = channel && providerDefinition(channel.provider.kind).webhook;
    if (!channel || !webhook) throw new AppError('NOT_FOUND', 'No such channel');
    const m = call.query.m;
    const providerCall = {
      hook: kind === 'inbound' ? ('message' as const) : ('status' as const),
      url: call.url,
      headers: call.headers,
      params: formParams(call.rawBody.toString('utf8')),
      messageId: typeof m === 'string' && MessageIdParam.safeParse(m).success ? m : undefined,
    };
    if (!webhook.verify(providerCall, channel.provider.secret)) {
      throw new AppError('FORBIDDEN', `Missing or wrong ${webhook.signatureHeader} (signed URL expected: ${hookUrl(call.channelId, kind === 'status')}…)`);
    }
    return {
      rateKey: channel.id,
      async apply(run) {
        const results = webhook.parse(providerCall);
        if (!Array.isArray(results)) throw new AppError('VALIDATION_ERROR', results.error, { errors: [], properties: { [results.field]: { errors: ['Required'] } } });
        await applyHookResults(run, db, channel, results);
        return { status: 200, ...webhook.answer };
      },
    };
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
