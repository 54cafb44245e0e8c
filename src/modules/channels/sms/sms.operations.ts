import { notFound } from '../../../core/errors.js';
import { defineOperation, type Operation } from '../../../core/operation.js';
import { Pagination } from '../../../core/pagination.js';
import { kindOf } from '../kinds.js';
import { addOptOut, announceFailed, listOptOuts, removeOptOut, smsChannelOf } from './sms.repository.js';
import { OptOut, OptOutCreateInput, OptOutDeleteInput, OptOutListInput } from './sms.schemas.js';

/** The opt-outs of a text channel: numbers nothing is sent to (CONTRACT §9). */
export const smsOperations: Operation[] = [
  defineOperation({
    id: 'channels.list_opt_outs',
    kind: 'list',
    method: 'GET',
    path: '/channels/{id}/opt-outs',
    summary: "List a text channel's opt-outs",
    description: 'The numbers that texted STOP (or that the provider reported unsubscribed, or that were added here), oldest first. Nothing is sent to them on this channel.',
    input: Pagination.extend(OptOutListInput).strict(),
    output: OptOut,
    handler: ({ id, ...page }, ctx) => listOptOuts(ctx.db, ctx.orgId, id, page),
  }),
  defineOperation({
    id: 'channels.create_opt_out',
    method: 'POST',
    event: 'channel.opt_out.created',
    path: '/channels/{id}/opt-outs',
    summary: 'Add an opt-out',
    description: 'Stops texts to a number on this channel, as if it had texted STOP: sending to it answers 409 `RECIPIENT_OPTED_OUT`, and the channel\'s messages to it still queued fail at once. Adding a number already opted out answers the existing opt-out.',
    input: OptOutCreateInput,
    output: OptOut,
    handler: async ({ id, phoneNumber }, ctx) => {
      const channel = await smsChannelOf(ctx.db, ctx.orgId, id);
      const { optOut, failed } = await addOptOut(ctx.db, ctx.orgId, id, phoneNumber, 'api', kindOf(channel).failQueuedTo ?? (async () => []));
      await announceFailed(ctx.db, ctx.orgId, ctx.actor, failed);
      return optOut;
    },
  }),
  defineOperation({
    id: 'channels.delete_opt_out',
    method: 'DELETE',
    event: 'channel.opt_out.deleted',
    path: '/channels/{id}/opt-outs/{number}',
    summary: 'Remove an opt-out',
    description: 'Texts may go to the number again (as when it texts START). Only remove an opt-out the person asked to remove: carriers require STOP to be honoured.',
    input: OptOutDeleteInput,
    output: OptOut,
    handler: async ({ id, number }, ctx) => {
      await smsChannelOf(ctx.db, ctx.orgId, id);
      const removed = await removeOptOut(ctx.db, ctx.orgId, id, number);
      if (!removed) throw notFound('Opt-out');
      return removed;
    },
  }),
];

