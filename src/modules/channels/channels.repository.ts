import { and, eq, isNull, sql, type SQL } from 'drizzle-orm';
import { canStoreSecrets, decryptSecret, encryptSecret, missingKeyError } from '../../core/encryption.js';
import { AppError, fieldError, notFound, pgErrorCode } from '../../core/errors.js';
import { assertMayReceiveAt, assertMaySendAs } from '../domains/verification.js';
import { channelPolicy } from './channels.connect.js';
import type { Page, PageInput } from '../../core/pagination.js';
import type { Db, DbOrTx } from '../../db/client.js';
import { recordEvents } from '../events/events.recorder.js';
import { CommittedWork } from '../events/events.signal.js';
import { channels, type ChannelInboundSettings, type ChannelOutboundSettings } from '../../db/schema.js';
import { definedOnly, scopedRepository } from '../../db/scoped.js';
import type { ChannelCreate, ChannelUpdate } from './channels.schemas.js';
import { toSmsChannel } from '../sms/sms.repository.js';

export const channelRows = scopedRepository(channels, 'Channel');
export type ChannelRow = typeof channels.$inferSelect;

/** A channel as the API answers it: settings without passwords, and whether each is set. */
export function toChannel(row: ChannelRow) {
  if (row.type === 'sms') return toSmsChannel(row);
  const { inboundSecret, outboundSecret, inbound, outbound, sendFailures: _failures, sendPausedUntil: _paused, ...rest } = row;
  return {
    ...rest,
    inbound: inbound.mode === 'imap' ? { ...inbound, ...tlsOf(inbound), passwordSet: inboundSecret !== null } : { ...inbound, passwordSet: inboundSecret !== null },
    outbound: outbound
      ? { host: outbound.host, port: outbound.port, secure: outbound.secure, username: outbound.username ?? null, from: outbound.from ?? null, ...tlsOf(outbound), passwordSet: outboundSecret !== null }
      : null,
    warnings: channelWarnings(row),
  };
}

/** A server's TLS settings as they apply (a channel stored before they existed: required, checked). */
export const tlsOf = (s: Pick<ChannelOutboundSettings, 'tls' | 'ca' | 'verifyCertificate'>) => ({
  tls: s.tls ?? ('required' as const),
  ca: s.ca ?? null,
  verifyCertificate: s.verifyCertificate ?? true,
});

/** What weakens the channel's security, for a person to see (`warnings`). */
export function channelWarnings(row: Pick<ChannelRow, 'inbound' | 'outbound'>): string[] {
  const warnings: string[] = [];
  const servers: [string, ChannelInboundSettings | ChannelOutboundSettings | null | undefined][] = [
    ['IMAP server', row.inbound.mode === 'imap' ? row.inbound : undefined],
    ['SMTP relay', row.outbound],
  ];
  for (const [what, settings] of servers) {
    if (!settings) continue;
    const { tls, verifyCertificate } = tlsOf(settings);
    if (tls === 'none') warnings.push(`The ${what} is reached without requiring TLS (tls "none"): its password and mail may travel in clear`);
    if (!verifyCertificate) warnings.push(`The ${what}'s certificate is not checked (verifyCertificate false): anyone on the path can pose as it`);
  }
  return warnings;
}

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

/** Whether a channel's address is an email address (the checks of domains apply to those). */
const isEmail = (type: string) => type === 'email';

const duplicate = () => fieldError('address', 'A channel with this address already exists in the organization');

/** Encrypts a password given in a write; 400 at its field when the server may not store secrets. */
function seal(password: string | undefined, path: [string, string]): string | undefined {
  if (password === undefined) return undefined;
  if (!canStoreSecrets()) throw missingKeyError(path);
  return encryptSecret(password);
}

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
  if (taken.length > 0) throw duplicate();
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
    if (pgErrorCode(err) === '23505') throw constraintOf(err) === 'channels_smtp_address' ? smtpTaken() : duplicate();
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

export async function createChannel(db: DbOrTx, orgId: string, input: ChannelCreate) {
  if (input.inbound.mode === 'imap') assertTlsAllowed(input.inbound, 'inbound');
  assertTlsAllowed(input.outbound, 'outbound');
  // Email addresses: the right to receive at the address and to send as `from` (other kinds have their own rules).
  if (isEmail(input.type)) {
    await assertMayReceiveAt(db, orgId, input.address, input.inbound.mode);
    await assertMaySendAs(db, orgId, input.address, input.outbound?.from);
  }
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
  return toChannel(row);
}

export async function listChannels(db: DbOrTx, orgId: string, page: PageInput): Promise<Page<ReturnType<typeof toChannel>>> {
  const found = await channelRows.list(db, orgId, page, { withTotal: true });
  return { ...found, items: found.items.map(toChannel) };
}

export const getChannel = async (db: DbOrTx, orgId: string, id: string) => toChannel(await channelRows.get(db, orgId, id));

/**
 * PATCH: each field present replaces the stored one. An IMAP or relay password left out is kept while the
 * server settings stay in the same mode; a change of mode to smtp or `outbound: null` drops the password.
 */
export async function updateChannel(db: DbOrTx, orgId: string, id: string, patch: Omit<ChannelUpdate, 'id'>) {
  const current = await channelRows.get(db, orgId, id);
  const address = patch.address ?? current.address;
  const mode = patch.inbound?.mode ?? current.inbound.mode;
  if (patch.inbound?.mode === 'imap') assertTlsAllowed(patch.inbound, 'inbound');
  assertTlsAllowed(patch.outbound, 'outbound');
  // Receiving at a new address, or in another mode, needs the right to it; a change of `from` (or of the
  // address it may equal) needs the right to send as it.
  if (isEmail(current.type) && mode !== 'sms' && (address !== current.address || mode !== current.inbound.mode)) await assertMayReceiveAt(db, orgId, address, mode);
  if (isEmail(current.type) && (patch.outbound || (patch.address !== undefined && patch.outbound !== null))) {
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
  return toChannel(row);
}

export const deleteChannel = async (db: DbOrTx, orgId: string, id: string) => toChannel(await channelRows.softDelete(db, orgId, id));

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
const SIDE_PREFIX: Record<ChannelSide, string> = { mailbox: MAILBOX_ERROR_PREFIX, relay: RELAY_ERROR_PREFIX, provider: PROVIDER_ERROR_PREFIX };

/** What to change when a side refuses the channel's credentials, for `lastError`'s `fix`. */
export const CREDENTIALS_FIX = {
  imap: 'the IMAP server refused the login: check inbound.username and inbound.password (PATCH /v1/channels/{id})',
  relay: 'the relay refused the login: check outbound.username and outbound.password (PATCH /v1/channels/{id})',
  twilio: "the provider refused the credentials: check provider.accountSid and provider.authToken (PATCH /v1/channels/{id}), or the account's status in the provider's console",
  smpp: 'the SMSC refused the bind: check provider.systemId, provider.password and provider.systemType (PATCH /v1/channels/{id})',
} as const;

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
 * Checks, in the caller's transaction, that the channel is not deleted, and keeps it so until the commit (a
 * share lock on its row): a DELETE committed before is seen here (`ChannelGone`, the write rolls back), and
 * one sent meanwhile waits for this transaction. So whatever a process stores for a channel it has not yet
 * noticed is deleted, nothing commits after the DELETE has answered. A write calls it after any update of the
 * channel's own row (`recordChannelOutcome`): two writers that took the share lock first and then both
 * updated the row would wait on each other.
 */
export async function assertChannelLive(db: DbOrTx, channelId: string): Promise<void> {
  const live = await db.select({ id: channels.id }).from(channels).where(and(eq(channels.id, channelId), isNull(channels.deletedAt))).for('share');
  if (live.length === 0) throw new ChannelGone();
}

/** How one attempt of one side of a channel ended. `fix` says what to change (see `CREDENTIALS_FIX`). */
export type ChannelOutcome = { ok: true; side: ChannelSide; at?: Date } | { ok: false; side: ChannelSide; error: string; fix?: string };

/** What the sender changes on the channel beside its status: its relay's failure count and pause. */
interface RelayState {
  sendFailures?: number;
  sendPausedUntil?: Date | null;
}

/**
 * The health of a channel, in one place for every kind and side: records the outcome of an attempt (a sync,
 * a received message, a send, a bind) on the channel. A failure sets `status` `error` (a disabled channel
 * stays disabled) and `lastError` (the side's prefix, what failed and what to fix); a success of the same
 * side clears that error and makes the channel `active` again (the mailbox side also keeps `lastSyncAt`).
 * A change of status is an event, in the same transaction: `channel.error` when an active channel fails,
 * `channel.recovered` when a channel in error works again (webhooks and automations see both); `work`
 * collects them for the caller to announce after its commit. Run it in a transaction (it sends a second
 * statement only when the status changed).
 *
 * A success that changes nothing (the channel fine, `lastSyncAt` recent) writes nothing: no row lock held to
 * the end of every receiving transaction, which would serialise a busy channel's deliveries.
 */
export async function recordChannelOutcome(
  tx: DbOrTx,
  channelId: string,
  outcome: ChannelOutcome,
  opts: { work?: CommittedWork; relay?: RelayState; worthWhen?: SQL } = {},
): Promise<'error' | 'recovered' | undefined> {
  const { prefix, sideError, live } = outcomeSql(channelId, outcome);
  const relay = opts.relay ?? {};
  const relaySets = sql.join(
    [
      ...(relay.sendFailures !== undefined ? [sql`send_failures = ${relay.sendFailures}`] : []),
      ...(relay.sendPausedUntil !== undefined ? [sql`send_paused_until = ${relay.sendPausedUntil?.toISOString() ?? null}::timestamptz`] : []),
      sql`updated_at = now()`,
    ],
    sql`, `,
  );
  let changed: { id: string }[];
  if (outcome.ok) {
    const at = (outcome.at ?? new Date()).toISOString();
    const synced = outcome.side === 'mailbox' ? sql`last_sync_at = ${at}::timestamptz, ` : sql``;
    changed = rowsOf(
      await tx.execute(sql`WITH recovered AS (
          UPDATE channels SET ${synced}status = 'active', last_error = NULL, ${relaySets}
           WHERE ${live} AND status = 'error' AND ${sideError}
          RETURNING id
        ), touched AS (
          UPDATE channels SET ${synced}last_error = CASE WHEN ${sideError} THEN NULL ELSE last_error END, ${relaySets}
           WHERE ${live} AND NOT (status = 'error' AND coalesce(${sideError}, false)) AND (${successWorthWriting(outcome, sideError, opts.worthWhen)})
          RETURNING id
        )
        SELECT id FROM recovered`),
    );
  } else {
    const lastError = `${prefix}${outcome.error}${outcome.fix ? ` (${outcome.fix.replace('{id}', channelId)})` : ''}`.slice(0, 1000);
    changed = rowsOf(
      await tx.execute(sql`WITH failed AS (
          UPDATE channels SET status = 'error', last_error = ${lastError}, ${relaySets}
           WHERE ${live} AND status = 'active'
          RETURNING id
        ), still AS (
          UPDATE channels SET last_error = ${lastError}, ${relaySets}
           WHERE ${live} AND status <> 'active'
          RETURNING id
        )
        SELECT id FROM failed`),
    );
  }
  if (changed.length === 0) return undefined;
  const type = outcome.ok ? 'channel.recovered' : 'channel.error';
  const [row] = await tx.select().from(channels).where(eq(channels.id, channelId));
  const recorded = await recordEvents(tx, { type: 'system', id: null, depth: 0 }, [{ type, organizationId: row!.organizationId, resourceId: channelId, data: toChannel(row!) }]);
  opts.work?.add({ ...recorded, types: [type] });
  return outcome.ok ? 'recovered' : 'error';
}

/** The SQL an outcome reads the channel with: its side's `lastError` prefix, and the live channel. */
function outcomeSql(channelId: string, outcome: ChannelOutcome) {
  const prefix = SIDE_PREFIX[outcome.side];
  // A text channel's SMPP errors were written as "SMPP: …" before the sides had prefixes.
  const sideError = outcome.side === 'provider' ? sql`(last_error LIKE ${prefix + '%'} OR last_error LIKE 'SMPP: %')` : sql`last_error LIKE ${prefix + '%'}`;
  return { prefix, sideError, live: sql`id = ${channelId} AND deleted_at IS NULL` };
}

/** When a success is worth a write: the side's error to clear, a stale `lastSyncAt` (mailbox), or what the caller says. */
function successWorthWriting(outcome: Extract<ChannelOutcome, { ok: true }>, sideError: SQL, worthWhen: SQL | undefined): SQL {
  const at = (outcome.at ?? new Date()).toISOString();
  return sql.join(
    [
      sideError,
      ...(outcome.side === 'mailbox' ? [sql`last_sync_at IS NULL`, sql`last_sync_at < ${at}::timestamptz - interval '${sql.raw(String(SYNC_TIME_GRANULARITY_S))} seconds'`] : []),
      ...(worthWhen ? [worthWhen] : []),
    ],
    sql` OR `,
  );
}

const rowsOf = (result: unknown) => (result as { rows: { id: string }[] }).rows;

/**
 * `successWorthWriting` read in Node from a channel row just loaded: true when a success on `side` would
 * write nothing (no error of the side to clear, `lastSyncAt` recent), so a writer that holds one statement
 * only (a received text) may leave `recordChannelOutcome` out. A row that changed since it was read costs at
 * most a stale `lastSyncAt` or an error cleared at the next success.
 */
export function successChangesNothing(row: Pick<ChannelRow, 'lastError' | 'lastSyncAt'>, side: ChannelSide, at = new Date()): boolean {
  const prefix = SIDE_PREFIX[side];
  const sideError = row.lastError !== null && (row.lastError.startsWith(prefix) || (side === 'provider' && row.lastError.startsWith('SMPP: ')));
  if (sideError) return false;
  return side !== 'mailbox' || (row.lastSyncAt !== null && row.lastSyncAt.getTime() >= at.getTime() - SYNC_TIME_GRANULARITY_S * 1000);
}

/**
 * `recordChannelOutcome` for a worker that holds no transaction: in one of its own, its events announced after
 * the commit. A failure to record is logged by the caller (it never stops the worker).
 */
export async function showChannelOutcome(db: Db, channelId: string, outcome: ChannelOutcome, opts: { relay?: RelayState; worthWhen?: SQL } = {}) {
  // The common case, a success on a channel that is fine, costs one read and no transaction (a worker's next
  // step, e.g. serving a new SMPP bind, waits for this).
  if (outcome.ok) {
    const { sideError, live } = outcomeSql(channelId, outcome);
    const found = await db.execute(sql`SELECT 1 FROM channels WHERE ${live} AND (${successWorthWriting(outcome, sideError, opts.worthWhen)})`);
    if (rowsOf(found).length === 0) return undefined;
  }
  const work = new CommittedWork();
  const changed = await db.transaction((tx) => recordChannelOutcome(tx, channelId, outcome, { ...opts, work }));
  work.announce();
  return changed;
}

/** `lastSyncAt` is exact to this many seconds. */
export const SYNC_TIME_GRANULARITY_S = 10;
