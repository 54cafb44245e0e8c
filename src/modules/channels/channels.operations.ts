import { z } from 'zod';
import { fieldError } from '../../core/errors.js';
import { components } from '../../core/schemas.js';
import { defineOperation, type Operation } from '../../core/operation.js';
import { Pagination } from '../../core/pagination.js';
import { channelPolicy, testChannel } from './channels.connect.js';
import { channelRows, createChannel, deleteChannel, getChannel, listChannels, updateChannel, withSecrets } from './channels.repository.js';
import { signSample } from './email/email.sign.js';
import { ChannelCreateInput, ChannelId, ChannelTestResult, ChannelUpdateInput } from './channels.schemas.js';
import { createSmsChannel, updateSmsChannel } from './sms/sms.repository.js';
import { AnyChannel as Channel, SmsChannelCreateInput, SmsChannelUpdateFields } from './sms/sms.schemas.js';
import { routedObject, type Routed } from './routed.js';
import { testSmsChannel } from './sms/sms.test-channel.js';

/** An email channel's body, or a text channel's (`type` "sms"): each checked by its own shape. */
const AnyChannelCreateInput = routedObject(
  { schema: ChannelCreateInput, shape: ChannelCreateInput.shape },
  { schema: SmsChannelCreateInput, shape: SmsChannelCreateInput.shape },
  (v) => (v.type === 'sms' ? 'second' : 'first'),
  { type: 'email', name: 'Support', address: 'support@acme.example', inbound: { mode: 'smtp' } },
);
const AnyChannelUpdateInput = ChannelUpdateInput.extend(SmsChannelUpdateFields);
const AnyChannelTestResult = ChannelTestResult.extend({
  inbound: z.union([ChannelTestResult.shape.inbound, ChannelTestResult.shape.inbound.extend({ mode: z.literal('sms') })]).describe(ChannelTestResult.shape.inbound.description ?? 'Receiving'),
});
components.add(AnyChannelTestResult, { id: 'ChannelTestResult' });

const PASSWORDS = 'Passwords are write-only (stored encrypted, never answered; `passwordSet` tells). With PostgreSQL a password needs the server\'s SECRETS_KEY (400 otherwise).';

export const channelsOperations: Operation[] = [
  defineOperation({
    id: 'channels.list',
    kind: 'list',
    method: 'GET',
    path: '/channels',
    summary: 'List channels',
    description: 'The channels of the organization: the email addresses and phone numbers it receives and sends as.',
    input: Pagination.strict(),
    output: Channel,
    handler: (input, ctx) => listChannels(ctx.db, ctx.orgId, input),
  }),
  defineOperation({
    id: 'channels.create',
    errors: ['CONFLICT'],
    method: 'POST',
    event: 'channel.created',
    path: '/channels',
    summary: 'Add an email or text channel',
    description:
      'An address mail arrives at, through the built-in SMTP receiver (`inbound.mode` "smtp": point an MX record or forwarding at it) or an IMAP mailbox (`inbound.mode` "imap"), ' +
      `and optionally sent from through an SMTP relay (\`outbound\`). ${PASSWORDS} Mail servers must be on public addresses unless CHANNELS_ALLOW_PRIVATE=true. ` +
      'A text channel: `type` "sms", `address` its number (E.164), `provider`; paste the answer\'s `inbound.webhookUrl` and `statusUrl` into the provider\'s console.',
    input: AnyChannelCreateInput,
    output: Channel,
    handler: (raw, ctx) => {
      const input = raw as unknown as Routed<typeof ChannelCreateInput, typeof SmsChannelCreateInput>;
      return input.variant === 'second' ? createSmsChannel(ctx.db, ctx.orgId, input) : createChannel(ctx.db, ctx.orgId, input);
    },
  }),
  defineOperation({
    id: 'channels.get',
    method: 'GET',
    path: '/channels/{id}',
    summary: 'Get a channel',
    input: ChannelId,
    output: Channel,
    handler: (input, ctx) => getChannel(ctx.db, ctx.orgId, input.id),
  }),
  defineOperation({
    id: 'channels.update',
    errors: ['CONFLICT'],
    method: 'PATCH',
    event: 'channel.updated',
    path: '/channels/{id}',
    summary: "Change a channel's name, address, servers or status",
    description: `Each field present replaces the stored one; \`inbound\` and \`outbound\` are replaced whole, but a password left out is kept. ${PASSWORDS}`,
    input: AnyChannelUpdateInput,
    output: Channel,
    handler: async ({ id, provider, rate, helpText, ...patch }, ctx) => {
      const current = await channelRows.get(ctx.db, ctx.orgId, id);
      if (current.type === 'sms') return updateSmsChannel(ctx.db, ctx.orgId, current, { ...patch, provider, rate, helpText });
      if (provider !== undefined || rate !== undefined || helpText !== undefined) throw fieldError(provider !== undefined ? 'provider' : rate !== undefined ? 'rate' : 'helpText', 'Only text channels have this setting');
      return updateChannel(ctx.db, ctx.orgId, id, patch);
    },
  }),
  defineOperation({
    id: 'channels.delete',
    method: 'DELETE',
    event: 'channel.deleted',
    path: '/channels/{id}',
    summary: 'Delete a channel',
    description: 'Soft delete: the channel gets `deletedAt`, stops receiving and syncing, and disappears from lists and gets. Its messages stay.',
    input: ChannelId,
    output: Channel,
    handler: (input, ctx) => deleteChannel(ctx.db, ctx.orgId, input.id),
  }),
  defineOperation({
    id: 'channels.test',
    method: 'POST',
    status: 200,
    path: '/channels/{id}/test',
    summary: "Check a channel's mail servers",
    description:
      'Connects to the configured servers now: the IMAP server (resolve, login, mailbox) and the SMTP relay (sign: a sample signed with the sender domain\'s DKIM key, when it has one; resolve, greeting, STARTTLS, authentication). ' +
      'Answers what worked and what failed, step by step; a failure is an answer (`ok` false), not an error. Changes nothing.',
    effects: { openWorld: true },
    input: ChannelId,
    output: AnyChannelTestResult,
    handler: async (input, ctx) => {
      const row = await channelRows.get(ctx.db, ctx.orgId, input.id);
      return row.type === 'sms' ? testSmsChannel(row) : testChannel(withSecrets(row), channelPolicy().allowPrivate, () => signSample(ctx.db, ctx.orgId, row));
    },
  }),
];
