import { eq, sql, type SQL } from 'drizzle-orm';
import type { Db, DbOrTx } from '../../db/client.js';
import { channels } from '../../db/schema.js';
import { recordEvents } from '../events/events.recorder.js';
import { CommittedWork } from '../events/events.signal.js';
import { MAILBOX_ERROR_PREFIX, PROVIDER_ERROR_PREFIX, RELAY_ERROR_PREFIX, SYNC_TIME_GRANULARITY_S, type ChannelRow, type ChannelSide } from './channels.repository.js';

const SIDE_PREFIX: Record<ChannelSide, string> = { mailbox: MAILBOX_ERROR_PREFIX, relay: RELAY_ERROR_PREFIX, provider: PROVIDER_ERROR_PREFIX };

/** How one attempt of one side of a channel ended. `fix` says what to change (each kind or provider names its own: `EMAIL_CREDENTIALS_FIX`, a text provider's `credentialsFix`). */
/**
 * How the channel's events show it: its kind's JSON (`toJson` of its kind; the caller passes it, so that the
 * kinds' own code reaches this file without the registry, which lists that code).
 */
export type ChannelView = (row: ChannelRow) => Record<string, unknown>;

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
  opts: { view: ChannelView; work?: CommittedWork; relay?: RelayState; worthWhen?: SQL },
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
  const recorded = await recordEvents(tx, { type: 'system', id: null, depth: 0 }, [{ type, organizationId: row!.organizationId, resourceId: channelId, data: opts.view(row!) }]);
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
 * A received message's success on a channel whose health needs only its `lastSyncAt` brought up to date (no
 * receiving error to clear: that is a change of status, with its event, and stays in the transaction of the
 * message that clears it), written on its own and committed at once: the messages arriving together at a channel
 * whose `lastSyncAt` is due (a new channel, or one not written for `SYNC_TIME_GRANULARITY_S`) then wait for one
 * short update of its row instead of for each other's transactions, each of which held the row to its commit.
 */
export async function touchReceivingTime(db: Db, channelId: string): Promise<void> {
  const at = new Date().toISOString();
  await db.execute(sql`UPDATE channels SET last_sync_at = ${at}::timestamptz, updated_at = now()
    WHERE id = ${channelId} AND deleted_at IS NULL AND NOT coalesce(last_error LIKE ${`${MAILBOX_ERROR_PREFIX}%`}, false)
      AND (last_sync_at IS NULL OR last_sync_at < ${at}::timestamptz - interval '${sql.raw(String(SYNC_TIME_GRANULARITY_S))} seconds')`);
}

/**
 * `recordChannelOutcome` for a worker that holds no transaction: in one of its own, its events announced after
 * the commit. A failure to record is logged by the caller (it never stops the worker).
 */
export async function showChannelOutcome(db: Db, channelId: string, outcome: ChannelOutcome, opts: { view: ChannelView; relay?: RelayState; worthWhen?: SQL }) {
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

