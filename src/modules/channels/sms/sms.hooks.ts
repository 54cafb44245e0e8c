import { z } from 'zod';
import { defineOperation, type Actor, type Operation } from '../../../core/operation.js';
import { Uuid } from '../../../core/schemas.js';
import type { Db } from '../../../db/client.js';
import { recordEvents } from '../../events/events.recorder.js';
import { CommittedWork } from '../../events/events.signal.js';
import type { ChannelRow } from '../channels.repository.js';
import type { OperationRunner } from '../runner.js';
import type { HookResult, StatusReport } from './provider.js';
import { receiveText } from './sms.inbound.js';
import { addOptOut, announceFailed, applyStatus } from './sms.repository.js';

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
