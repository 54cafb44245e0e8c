import { z } from 'zod';
import { AppError } from '../../../core/errors.js';
import { defineOperation, type Operation } from '../../../core/operation.js';
import { Uuid } from '../../../core/schemas.js';
import type { Db } from '../../../db/client.js';
import { CommittedWork } from '../../events/events.signal.js';
import type { HookAnswer, HookCall, KindHook } from '../kind.js';
import type { OperationRunner } from '../runner.js';
import { receiveWhatsApp } from './whatsapp.inbound.js';
import { applyWhatsAppStatus, loadWhatsAppChannel, routeByPhoneNumberId, sendAwaitingAnswer, SYSTEM, type WhatsAppChannel } from './whatsapp.repository.js';
import { parseWebhook, subscriptionChallenge, UnreadableWebhook, validMetaSignature, WEBHOOK_BODY_LIMIT, type WhatsAppStatus } from './webhook.js';

/**
 * Meta's webhook of a WhatsApp channel, whatever serves HTTP: the subscription handshake (GET) and the
 * deliveries (POST). A delivery is checked (signature over the raw bytes, before anything is parsed), read
 * whole, routed by `phone_number_id`, and applied through the operation runner, as every write from outside:
 * each message (`messages.receive`), each change's statuses together (`messages.report`). The caller answers 200 only when this resolves, i.e. once all of it is
 * committed; anything thrown makes Meta deliver the batch again, and what was already stored is recognized
 * by its `wamid`.
 */

/** What a delivery did: messages stored (new and already known) and statuses applied. */
export interface HookSummary {
  received: number;
  duplicates: number;
  statuses: number;
  ignoredChanges: number;
}

/** The refusals of the hook: no such channel (404), a wrong verify token (403), a missing or wrong signature (401). */
export const hookRefusals = {
  noChannel: () => new AppError('NOT_FOUND', 'No such channel'),
  badToken: () => new AppError('FORBIDDEN', 'Wrong hub.verify_token or hub.mode'),
  badSignature: () => new AppError('UNAUTHORIZED', 'Missing or wrong X-Hub-Signature-256 (HMAC-SHA256 of the raw body with the app secret)'),
};

const short = (max: number) => z.string().max(max).nullable();
const ReportInput = z.strictObject({
  channelId: Uuid,
  statuses: z
    .array(z.strictObject({ wamid: z.string().min(1).max(200), status: z.string().max(40), timestamp: short(40), recipientId: short(200), errorCode: short(40), errorTitle: short(1000) }))
    .max(10_000),
});
const Reported = z.object({ applied: z.number().int(), unmatched: z.number().int() });

/**
 * A change's status reports, applied in one transaction (`applyWhatsAppStatus`: forward only, each step with
 * its events); answers how many moved a message and how many named no message of the channel (yet).
 */
const reportOperation = (channel: WhatsAppChannel, work: CommittedWork): Operation =>
  defineOperation({
    id: 'messages.report',
    method: 'POST',
    event: () => [],
    path: '/messages/report',
    summary: 'Apply WhatsApp status reports',
    input: ReportInput,
    output: Reported,
    handler: async (input, ctx) => {
      let applied = 0;
      let unmatched = 0;
      for (const s of input.statuses) {
        const status: WhatsAppStatus = { ...s, timestamp: s.timestamp === null ? null : new Date(s.timestamp) };
        const out = await applyWhatsAppStatus(ctx.db, channel, status, work);
        if (out?.forward) applied++;
        if (!out) unmatched++;
      }
      return { applied, unmatched };
    },
  });

/** The channel a hook request is for, with its secrets; 404 otherwise. */
export async function hookChannel(db: Db, channelId: string): Promise<WhatsAppChannel> {
  const channel = await loadWhatsAppChannel(db, channelId);
  if (!channel) throw hookRefusals.noChannel();
  return channel;
}

/** GET: the subscription handshake. 200 with the challenge as text, or 403. */
export function answerSubscription(channel: WhatsAppChannel, query: Record<string, unknown>): HookAnswer {
  const challenge = subscriptionChallenge(query, channel.whatsapp.verifyToken);
  if (challenge === undefined) throw hookRefusals.badToken();
  return { status: 200, contentType: 'text/plain; charset=utf-8', body: challenge };
}

/** POST, step one: the signature, over the raw bytes; 401 without it. */
export function assertSigned(channel: WhatsAppChannel, req: Pick<HookCall, 'headers' | 'rawBody'>): void {
  if (!validMetaSignature(channel.appSecret, req.rawBody, req.headers['x-hub-signature-256'])) throw hookRefusals.badSignature();
}

/** POST, step two (signed): every message and status of the batch, applied and committed. */
export async function applyDelivery(deps: { run: OperationRunner; db: Db }, channel: WhatsAppChannel, rawBody: Buffer): Promise<HookSummary> {
  let batch;
  try {
    batch = parseWebhook(rawBody);
  } catch (err) {
    if (err instanceof UnreadableWebhook) throw new AppError('BAD_REQUEST', `Not a WhatsApp webhook: ${err.message}`);
    throw err;
  }
  const summary: HookSummary = { received: 0, duplicates: 0, statuses: 0, ignoredChanges: 0 };
  const unmatched = new Set<string>();
  const routes = await routeByPhoneNumberId(deps.db, channel, batch.changes.map((c) => c.phoneNumberId));
  for (const change of batch.changes) {
    const target = routes.get(change.phoneNumberId);
    // Another organization's number, or one this app secret does not sign for: never stored here.
    // A disabled channel receives nothing: acknowledged and dropped (Meta keeps its own log).
    if (!target || target.status === 'disabled') {
      summary.ignoredChanges++;
      continue;
    }
    for (const message of change.messages) {
      const out = await receiveWhatsApp(deps.run, deps.db, target, message);
      if (out.duplicate) summary.duplicates++;
      else summary.received++;
    }
    if (change.statuses.length > 0) {
      const work = new CommittedWork();
      const statuses = change.statuses.map((s) => ({ ...s, timestamp: s.timestamp?.toISOString() ?? null }));
      const out = await deps.run(reportOperation(target, work), { channelId: target.id, statuses }, { orgId: target.organizationId, actor: SYSTEM, permissions: ['*'], db: deps.db });
      work.announce();
      const reported = out.data as z.output<typeof Reported>;
      summary.statuses += reported.applied;
      if (reported.unmatched > 0) unmatched.add(target.id);
    }
  }
  // A report of a message whose send is still waiting for Meta's answer (the wamid not written yet) would be
  // lost: Meta is asked to deliver again shortly, by when the answer is in (what was stored is known by wamid).
  for (const channelId of unmatched) {
    if (await sendAwaitingAnswer(deps.db, channelId)) throw new AppError('SERVICE_UNAVAILABLE', 'A status names a message whose send is still under way; deliver again shortly', undefined, 5);
  }
  return summary;
}

/**
 * Meta's webhook of WhatsApp channels: `GET /hooks/whatsapp/{channelId}` (the subscription handshake, which
 * spends no rate) and `POST /hooks/whatsapp/{channelId}` (messages and statuses, any content type: the bytes
 * are kept whole for the signature, and read as JSON only once it holds). Bodies at most 1 MiB. The answer
 * comes once everything is committed.
 */
export const whatsappHook: KindHook = {
  segment: 'whatsapp',
  bodyLimit: WEBHOOK_BODY_LIMIT,
  routes: [
    {
      method: 'GET',
      suffix: '',
      async verify(db, call) {
        const answer = answerSubscription(await hookChannel(db, call.channelId), call.query);
        return { apply: async () => answer };
      },
    },
    {
      method: 'POST',
      suffix: '',
      async verify(db, call) {
        const channel = await hookChannel(db, call.channelId);
        assertSigned(channel, call);
        return {
          rateKey: channel.id,
          async apply(run) {
            await applyDelivery({ run, db }, channel, call.rawBody);
            return { status: 200, contentType: 'text/plain; charset=utf-8', body: 'EVENT_RECEIVED' };
          },
        };
      },
    },
  ],
};
