import { defineOperation, type Operation } from '../../core/operation.js';
import { Pagination, type Page } from '../../core/pagination.js';
import { channelRows } from './channels.repository.js';
import { ChannelId } from './channels.schemas.js';
import type { ChannelJson } from './kind.js';
import { Channel, ChannelCreateInput, ChannelTestResult, ChannelUpdateInput, FIRST_KIND, kindNamed, kindOf, refusedField, toChannel } from './kinds.js';

const PASSWORDS = 'Passwords are write-only (stored encrypted, never answered; `passwordSet` tells). With PostgreSQL a password needs the server\'s SECRETS_KEY (400 otherwise).';

/** The channel operations, one set for every kind: each reaches the channel's kind through the registry (kinds.ts). */
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
    handler: async (input, ctx): Promise<Page<ChannelJson>> => {
      const found = await channelRows.list(ctx.db, ctx.orgId, input, { withTotal: true });
      return { ...found, items: found.items.map(toChannel) };
    },
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
    input: ChannelCreateInput,
    output: Channel,
    handler: (input, ctx) => (kindNamed(input.type) ?? FIRST_KIND).create(ctx.db, ctx.orgId, input),
  }),
  defineOperation({
    id: 'channels.get',
    method: 'GET',
    path: '/channels/{id}',
    summary: 'Get a channel',
    input: ChannelId,
    output: Channel,
    handler: async (input, ctx) => toChannel(await channelRows.get(ctx.db, ctx.orgId, input.id)),
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
    handler: async ({ id, ...patch }, ctx) => {
      const current = await channelRows.get(ctx.db, ctx.orgId, id as string);
      const kind = kindOf(current);
      refusedField(kind, patch);
      return kind.update(ctx.db, ctx.orgId, current, patch);
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
    handler: async (input, ctx) => toChannel(await channelRows.softDelete(ctx.db, ctx.orgId, input.id)),
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
      return kindOf(row).test(ctx, row);
    },
  }),
];
