import { and, eq, isNull, sql } from 'drizzle-orm';
import { AppError, fieldError, pgErrorCode } from '../../../core/errors.js';
import type { DbOrTx } from '../../../db/client.js';
import { channels, type ChannelInboundSettings, type ChannelOutboundSettings } from '../../../db/schema.js';
import { definedOnly } from '../../../db/scoped.js';
import { assertMayReceiveAt, assertMaySendAs } from '../../domains/verification.js';
import { channelPolicy } from '../channels.connect.js';
import { channelRows, duplicateAddress, RELAY_ERROR_PREFIX, sealSecret, type ChannelRow } from '../channels.repository.js';
import type { ChannelCreate, ChannelUpdate } from './email.schemas.js';
import { toEmailChannel } from './email.view.js';

/** Creating and changing email channels: the right to the address (verified domains), TLS, passwords. */

/** `tls: "none"` and `verifyCertificate: false` are for a LAN server only: CHANNELS_ALLOW_PRIVATE. */
function assertTlsAllowed(settings: { tls?: string; verifyCertificate?: boolean } | null | undefined, side: 'inbound' | 'outbound') {
  if (!settings || channelPolicy().allowPrivate) return;
  const at = (field: string, text: string) =>
    new AppError('VALIDATION_ERROR', 'The request is invalid', { errors: [], properties: { [side]: { errors: [], properties: { [field]: { errors: [text] } } } } });
  if (settings.tls === 'none') throw at('tls', 'A server without TLS is allowed only when the service runs with CHANNELS_ALLOW_PRIVATE=true (a mail server on a private network)');
  if (settings.verifyCertificate === false) {
    throw at('verifyCertificate', "Not checking a server's certificate is allowed only with CHANNELS_ALLOW_PRIVATE=true; give the certificate to trust as `ca` instead");
  }
}

/** Encrypts a password given in a write; 400 at its field when the server may not store secrets. */
const seal = (password: string | undefined, path: [string, string]): string | undefined => (password === undefined ? undefined : sealSecret(password, path));

function inboundSettings(inbound: ChannelCreate['inbound'] | NonNullable<ChannelUpdate['inbound']>): ChannelInboundSettings {
  if (inbound.mode === 'smtp') return { mode: 'smtp' };
  const { password: _password, ...settings } = inbound;
  return settings;
}

function outboundSettings(outbound: NonNullable<ChannelCreate['outbound']>): ChannelOutboundSettings {
  const { password: _password, ...settings } = outbound;
  return { ...settings, username: settings.username ?? null, from: settings.from ?? null };
}

const smtpTaken = () =>
  fieldError('address', 'This address already receives mail through the SMTP receiver (a channel of another organization); an address has one inbound-SMTP channel');

/**
 * An address is unique among the organization's live channels, and among all organizations' live
 * inbound-SMTP channels: the receiver must know whose mail it is, and no organization may claim another's.
 */
async function assertAddressFree(db: DbOrTx, orgId: string, address: string, mode: ChannelInboundSettings['mode'], exceptId?: string) {
  const other = exceptId ? sql`${channels.id} <> ${exceptId}` : undefined;
  const taken = await db
    .select({ id: channels.id })
    .from(channels)
    .where(channelRows.live(orgId, eq(channels.address, address), other))
    .limit(1);
  if (taken.length > 0) throw duplicateAddress();
  if (mode !== 'smtp') return;
  const claimed = await db
    .select({ id: channels.id })
    .from(channels)
    .where(and(eq(channels.address, address), isNull(channels.deletedAt), sql`${channels.inbound}->>'mode' = 'smtp'`, other))
    .limit(1);
  if (claimed.length > 0) throw smtpTaken();
}

const uniqueAddress = async <T>(write: Promise<T>): Promise<T> => {
  try {
    return await write;
  } catch (err) {
    // Two concurrent writes of one address: the partial unique indexes decide.
    if (pgErrorCode(err) === '23505') throw constraintOf(err) === 'channels_smtp_address' ? smtpTaken() : duplicateAddress();
    throw err;
  }
};

function constraintOf(err: unknown): string | undefined {
  for (let e: unknown = err, i = 0; e && i < 5; e = (e as { cause?: unknown }).cause, i++) {
    const c = (e as { constraint?: unknown }).constraint;
    if (typeof c === 'string') return c;
  }
  return undefined;
}

/** What to change when a mail server refuses the channel's login, for `lastError`'s `fix`. */
export const EMAIL_CREDENTIALS_FIX = {
  imap: 'the IMAP server refused the login: check inbound.username and inbound.password (PATCH /v1/channels/{id})',
  relay: 'the relay refused the login: check outbound.username and outbound.password (PATCH /v1/channels/{id})',
} as const;

export async function createEmailChannel(db: DbOrTx, orgId: string, input: ChannelCreate) {
  if (input.inbound.mode === 'imap') assertTlsAllowed(input.inbound, 'inbound');
  assertTlsAllowed(input.outbound, 'outbound');
  // The right to receive at the address and to send as `from`.
  await assertMayReceiveAt(db, orgId, input.address, input.inbound.mode);
  await assertMaySendAs(db, orgId, input.address, input.outbound?.from);
  await assertAddressFree(db, orgId, input.address, input.inbound.mode);
  const inboundSecret = input.inbound.mode === 'imap' ? seal(input.inbound.password, ['inbound', 'password']) : undefined;
  const outboundSecret = input.outbound ? seal(input.outbound.password, ['outbound', 'password']) : undefined;
  const row = await uniqueAddress(
    channelRows.insert(db, {
      organizationId: orgId,
      type: input.type,
      name: input.name,
      address: input.address,
      inbound: inboundSettings(input.inbound),
      outbound: input.outbound ? outboundSettings(input.outbound) : null,
      inboundSecret: inboundSecret ?? null,
      outboundSecret: outboundSecret ?? null,
    }),
  );
  return toEmailChannel(row);
}


/**
 * PATCH: each field present replaces the stored one. An IMAP or relay password left out is kept while the
 * server settings stay in the same mode; a change of mode to smtp or `outbound: null` drops the password.
 */
export async function updateEmailChannel(db: DbOrTx, orgId: string, current: ChannelRow, patch: Omit<ChannelUpdate, 'id'>) {
  const id = current.id;
  const address = patch.address ?? current.address;
  const mode = (patch.inbound?.mode ?? current.inbound.mode) as 'smtp' | 'imap';
  if (patch.inbound?.mode === 'imap') assertTlsAllowed(patch.inbound, 'inbound');
  assertTlsAllowed(patch.outbound, 'outbound');
  // Receiving at a new address, or in another mode, needs the right to it; a change of `from` (or of the
  // address it may equal) needs the right to send as it.
  if (address !== current.address || mode !== current.inbound.mode) await assertMayReceiveAt(db, orgId, address, mode);
  if (patch.outbound || (patch.address !== undefined && patch.outbound !== null)) {
    await assertMaySendAs(db, orgId, address, patch.outbound ? patch.outbound.from : current.outbound?.from);
  }
  if (address !== current.address || mode !== current.inbound.mode) await assertAddressFree(db, orgId, address, mode, id);
  const values: Partial<typeof channels.$inferInsert> = definedOnly({ name: patch.name, address: patch.address });
  if (patch.inbound !== undefined) {
    values.inbound = inboundSettings(patch.inbound);
    if (patch.inbound.mode === 'smtp') values.inboundSecret = null;
    else if (patch.inbound.password !== undefined) values.inboundSecret = seal(patch.inbound.password, ['inbound', 'password'])!;
    else if (current.inbound.mode !== 'imap' || current.inboundSecret === null) throw fieldError('inbound', 'An IMAP channel needs a password: give `inbound.password`');
  }
  if (patch.outbound === null) {
    values.outbound = null;
    values.outboundSecret = null;
  } else if (patch.outbound !== undefined) {
    values.outbound = outboundSettings(patch.outbound);
    if (patch.outbound.password !== undefined) values.outboundSecret = seal(patch.outbound.password, ['outbound', 'password'])!;
  }
  // New server settings start afresh: a change of inbound mode ends the mailbox side's error, new relay
  // settings the relay side's (and its backoff); the next failure sets them again.
  const relayError = current.lastError?.startsWith(RELAY_ERROR_PREFIX) ?? false;
  if (patch.inbound !== undefined && patch.inbound.mode !== current.inbound.mode && current.lastError !== null && !relayError) {
    values.lastError = null;
    if (current.status === 'error') values.status = 'active';
  }
  if (patch.outbound !== undefined) {
    values.sendFailures = 0;
    values.sendPausedUntil = null;
    if (relayError) {
      values.lastError = null;
      if (current.status === 'error') values.status = 'active';
    }
  }
  if (patch.status !== undefined) {
    values.status = patch.status;
    // A person re-activating a channel clears the last error; the next failure sets it again.
    if (patch.status === 'active') values.lastError = null;
  }
  const row = await uniqueAddress(channelRows.update(db, orgId, id, values));
  return toEmailChannel(row);
}

/**
 * The email channel an automation's notice goes through (`{{mailChannel}}`): a live email channel of the
 * organization with a relay, active ones first, one other than `except` (the channel a `channel.error` is
 * about) when there is another, the oldest first; null when the organization has none.
 */
export async function noticeChannelOf(db: DbOrTx, orgId: string, except: string | null): Promise<string | null> {
  const [row] = await db
    .select({ id: channels.id })
    .from(channels)
    .where(and(eq(channels.organizationId, orgId), isNull(channels.deletedAt), eq(channels.type, 'email'), sql`${channels.outbound} IS NOT NULL`, sql`${channels.status} <> 'disabled'`))
    .orderBy(
      sql`${except ? sql`${channels.id} = ${except}` : sql`false`}`,
      sql`${channels.status} <> 'active'`,
      channels.createdAt,
    )
    .limit(1);
  return row?.id ?? null;
}
