import { and, eq, isNull, sql } from 'drizzle-orm';
import { canStoreSecrets, decryptSecret, encryptSecret, missingKeyError } from '../../core/encryption.js';
import { AppError, fieldError, notFound } from '../../core/errors.js';
import type { DbOrTx } from '../../db/client.js';
import { channels, type ChannelInboundSettings, type ChannelOutboundSettings } from '../../db/schema.js';
import { scopedRepository } from '../../db/scoped.js';

/**
 * The channel store every kind shares: the rows, the channel a message may leave through, the credentials the
 * workers connect with, whether a channel is live, and the sides a channel can fail on. What a kind adds (its
 * settings, its JSON, its create and update) is in its folder; the JSON of any channel is `toChannel`
 * (kinds.ts), its health `recordChannelOutcome` (channel-health.ts).
 */

export const channelRows = scopedRepository(channels, 'Channel');
export type ChannelRow = typeof channels.$inferSelect;

/** Encrypts a secret given in a write (a password, a token); 400 at its field when the server may not store secrets. */
export function sealSecret(secret: string, path: string[]): string {
  if (!canStoreSecrets()) throw missingKeyError(path);
  return encryptSecret(secret);
}

/** The 400 of an address another live channel of the organization has. */
export const duplicateAddress = () => fieldError('address', 'A channel with this address already exists in the organization');


export interface ChannelCredentials {
  id: string;
  organizationId: string;
  type: ChannelRow['type'];
  name: string;
  address: string;
  status: ChannelRow['status'];
  inbound: ChannelInboundSettings & { password?: string };
  outbound: (ChannelOutboundSettings & { password?: string }) | null;
}

/**
 * A live, enabled channel of the organization that a message may leave through, for the sending operations
 * of every kind (mail, texts): a 400 at `field` when there is none; `check` adds the kind's own refusal.
 */
export async function sendingChannelOf(
  db: DbOrTx,
  orgId: string,
  channelId: string,
  field: string,
  check: (channel: ChannelRow) => { field?: string; message: string } | undefined,
): Promise<ChannelRow> {
  const [channel] = await db
    .select()
    .from(channels)
    .where(and(eq(channels.organizationId, orgId), eq(channels.id, channelId), isNull(channels.deletedAt)))
    .limit(1);
  if (!channel) throw fieldError(field, 'No channel with this id exists in the organization');
  const refused = check(channel);
  if (refused) throw fieldError(refused.field ?? field, refused.message);
  if (channel.status === 'disabled') throw fieldError(field, 'The channel is disabled');
  return channel;
}

/**
 * A live channel with its decrypted passwords, for the workers that connect with them (IMAP sync, the
 * sender, the connection test). Not organization-scoped: callers hold the id from a claimed row. 404 when
 * the channel is deleted or missing.
 */
export async function loadChannelCredentials(db: DbOrTx, channelId: string): Promise<ChannelCredentials> {
  const [row] = await db
    .select()
    .from(channels)
    .where(and(eq(channels.id, channelId), isNull(channels.deletedAt)))
    .limit(1);
  if (!row) throw notFound('Channel');
  return withSecrets(row);
}

export function withSecrets(row: ChannelRow): ChannelCredentials {
  return {
    id: row.id,
    organizationId: row.organizationId,
    type: row.type,
    name: row.name,
    address: row.address,
    status: row.status,
    inbound: row.inboundSecret !== null ? { ...row.inbound, password: decryptSecret(row.inboundSecret) } : { ...row.inbound },
    outbound: row.outbound ? (row.outboundSecret !== null ? { ...row.outbound, password: decryptSecret(row.outboundSecret) } : { ...row.outbound }) : null,
  };
}

/**
 * The sides of a channel that can fail, each with what its `lastError` starts with: the mailbox (receiving,
 * IMAP sync), the relay (sending email) and the provider (a text channel's API or SMSC: sending, binding).
 * A failure of one side puts the channel in `error`; a success of the same side (never of another) brings it
 * back to `active`.
 */
export type ChannelSide = 'mailbox' | 'relay' | 'provider';
/** What a failure of the sending side starts `lastError` with ("relay: Sending through …"). */
export const RELAY_ERROR_PREFIX = 'relay: ';
/** What a failure of the receiving side (IMAP mailbox, receiving) starts `lastError` with. */
export const MAILBOX_ERROR_PREFIX = 'mailbox: ';
/** What a failure of a text channel's provider (its API refused the credentials, the SMSC refused the bind) starts `lastError` with. */
export const PROVIDER_ERROR_PREFIX = 'provider: ';

/** A channel that cannot take mail now (in `error` on its mailbox side): the SMTP receiver answers 451 with the message. */
export class ChannelUnavailable extends Error {}

/**
 * Of the live inbound-SMTP channels of one address (an address has at most one per organization), those that
 * take mail now. A disabled channel is never among them; a channel in `error` because of its relay receives as
 * usual; when every one is in `error` on its mailbox side this throws ChannelUnavailable, a temporary refusal
 * (never a permanent one, which would bounce the mail).
 */
export function receivingChannels(found: ChannelRow[]): ChannelRow[] {
  const usable = found.filter((c) => c.status === 'active' || (c.status === 'error' && (c.lastError?.startsWith(RELAY_ERROR_PREFIX) ?? false)));
  if (usable.length === 0 && found.some((c) => c.status === 'error')) throw new ChannelUnavailable('This mailbox cannot take mail right now; try again later');
  return usable;
}

/** The channel was deleted while something was being written for it: that write rolls back, nothing is stored. */
export class ChannelGone extends AppError {
  constructor() {
    super('NOT_FOUND', 'No such channel');
  }
}

/**
 * Checks, in the caller's transaction, that the channel is not deleted, and keeps it so until the commit
 * (`held_channel`: a shared advisory lock keyed on the channel, which the channel's soft delete takes
 * exclusively; no lock on its row, so concurrent writes of one channel never wait on each other): a delete
 * committed before is seen here (`ChannelGone`, the write rolls back), and one made meanwhile waits for this
 * transaction. So whatever a process stores for a channel it has not yet noticed is deleted, nothing commits
 * after the DELETE has answered. A write calls it after any update of the channel's own row
 * (`recordChannelOutcome`): a write that held the channel and then waited for its row could wait on a
 * delete that waits for it.
 */
export async function assertChannelLive(db: DbOrTx, channelId: string): Promise<void> {
  const live = (await db.execute(sql`SELECT 1 AS live FROM held_channel(${channelId}::uuid)`)) as unknown as { rows: unknown[] };
  if (live.rows.length === 0) throw new ChannelGone();
}

/** `lastSyncAt` is exact to this many seconds. */
export const SYNC_TIME_GRANULARITY_S = 10;
