import { defineOperation, type Operation } from '../../core/operation.js';
import { Pagination } from '../../core/pagination.js';
import { channelPolicy, testChannel } from './channels.connect.js';
import { channelRows, createChannel, deleteChannel, getChannel, listChannels, updateChannel, withSecrets } from './channels.repository.js';
import { signSample } from './channels.sign.js';
import { Channel, ChannelCreateInput, ChannelId, ChannelTestResult, ChannelUpdateInput } from './channels.schemas.js';

const PASSWORDS = 'Passwords are write-only (stored encrypted, never answered; `passwordSet` tells). With PostgreSQL a password needs the server\'s SECRETS_KEY (400 otherwise).';

export const channelsOperations: Operation[] = [
  defineOperation({
    id: 'channels.list',
    kind: 'list',
    method: 'GET',
    path: '/channels',
    summary: 'List channels',
    description: 'The email channels of the organization: the addresses it receives and sends as.',
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
    summary: 'Add an email channel',
    description:
      'An address mail arrives at, through the built-in SMTP receiver (`inbound.mode` "smtp": point an MX record or forwarding at it) or an IMAP mailbox (`inbound.mode` "imap"), ' +
      `and optionally sent from through an SMTP relay (\`outbound\`). ${PASSWORDS} Mail servers must be on public addresses unless CHANNELS_ALLOW_PRIVATE=true.`,
    input: ChannelCreateInput,
    output: Channel,
    handler: (input, ctx) => createChannel(ctx.db, ctx.orgId, input),
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
    input: ChannelUpdateInput,
    output: Channel,
    handler: ({ id, ...patch }, ctx) => updateChannel(ctx.db, ctx.orgId, id, patch),
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
    output: ChannelTestResult,
    handler: async (input, ctx) => {
      const row = await channelRows.get(ctx.db, ctx.orgId, input.id);
      return testChannel(withSecrets(row), channelPolicy().allowPrivate, () => signSample(ctx.db, ctx.orgId, row));
    },
  }),
];
