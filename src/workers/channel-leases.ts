import { and, eq, inArray, notInArray, sql, type SQL } from 'drizzle-orm';
import type { Db } from '../db/client.js';
import { channels, channelSyncStates } from '../db/schema.js';
import { onEventsCommitted } from '../modules/events/events.signal.js';

/**
 * The lease that makes one process at a time hold a channel's connection (the IMAP sync's session, an SMPP
 * bind): a row per channel in `channel_sync_states`, claimed with `FOR UPDATE SKIP LOCKED`, renewed by its
 * holder's passes, released on stop; a killed process's leases run out and another process's next pass
 * claims the channels.
 */

/** Which channels a kind of connection is for: IMAP mailboxes, SMPP binds. */
const KINDS = {
  imap: {
    live: sql`${channels.deletedAt} IS NULL AND ${channels.status} <> 'disabled' AND ${channels.inbound}->>'mode' = 'imap'`,
    seed: sql`
      INSERT INTO channel_sync_states (channel_id, organization_id, mailbox)
      SELECT c.id, c.organization_id, COALESCE(c.inbound->>'mailbox', 'INBOX') FROM channels c
      WHERE c.deleted_at IS NULL AND c.status <> 'disabled' AND c.inbound->>'mode' = 'imap'
        AND NOT EXISTS (SELECT 1 FROM channel_sync_states s WHERE s.channel_id = c.id)
      ON CONFLICT DO NOTHING`,
  },
  smpp: {
    live: sql`${channels.deletedAt} IS NULL AND ${channels.status} <> 'disabled' AND ${channels.type} = 'sms' AND ${channels.sms}->'provider'->>'kind' = 'smpp'`,
    seed: sql`
      INSERT INTO channel_sync_states (channel_id, organization_id, mailbox)
      SELECT c.id, c.organization_id, 'smpp' FROM channels c
      WHERE c.deleted_at IS NULL AND c.status <> 'disabled' AND c.type = 'sms' AND c.sms->'provider'->>'kind' = 'smpp'
        AND NOT EXISTS (SELECT 1 FROM channel_sync_states s WHERE s.channel_id = c.id)
      ON CONFLICT DO NOTHING`,
  },
} satisfies Record<string, { live: SQL; seed: SQL }>;

export interface ChannelLeases {
  /**
   * Gives every live channel of the kind its state row, then claims free ones up to `limit` (leaving out
   * `held`); answers the claimed ids. Fair per organization: the free channels are taken round-robin over the
   * organizations, those with fewer channels held now (by any process) first, so one organization's many
   * channels never keep another's from being served.
   */
  claim(limit: number, now: Date, held?: string[]): Promise<string[]>;
  /** Renews this process's leases; answers the ids still held. */
  renew(ids: string[], now: Date): Promise<Set<string>>;
  /** Gives up this process's leases on these channels (all of them when no ids are given). */
  release(ids?: string[]): Promise<void>;
  /** Gives up the lease on a failing channel: nobody claims it before `delayMs` have passed. */
  backOff(channelId: string, delayMs: number, now: Date): Promise<void>;
}

export function channelLeases(db: Db, kind: keyof typeof KINDS, owner: string, leaseMs: number): ChannelLeases {
  const { live, seed } = KINDS[kind];
  return {
    async claim(limit, now, held = []) {
      await db.execute(seed);
      if (limit <= 0) return [];
      const free = and(
        sql`(${channelSyncStates.leaseUntil} IS NULL OR ${channelSyncStates.leaseUntil} <= ${now} OR ${channelSyncStates.leaseOwner} = ${owner})`,
        held.length ? notInArray(channelSyncStates.channelId, held) : undefined,
      );
      return db.transaction(async (tx) => {
        // Channels of this kind held now, per organization (another kind's leases do not count).
        const busy = tx
          .select({ organizationId: channelSyncStates.organizationId, n: sql<number>`count(*)`.as('n') })
          .from(channelSyncStates)
          .innerJoin(channels, eq(channels.id, channelSyncStates.channelId))
          .where(and(sql`${channelSyncStates.leaseOwner} IS NOT NULL`, sql`${channelSyncStates.leaseUntil} > ${now}`, sql`${live}`))
          .groupBy(channelSyncStates.organizationId)
          .as('busy');
        const ranked = await tx
          .select({
            id: channelSyncStates.channelId,
            turn: sql<number>`row_number() OVER (PARTITION BY ${channelSyncStates.organizationId} ORDER BY ${channelSyncStates.leaseUntil} NULLS FIRST, ${channelSyncStates.channelId}) + coalesce(${busy.n}, 0)`.as('turn'),
          })
          .from(channelSyncStates)
          .innerJoin(channels, eq(channels.id, channelSyncStates.channelId))
          .leftJoin(busy, eq(busy.organizationId, channelSyncStates.organizationId))
          .where(and(sql`${live}`, free))
          .orderBy(sql`turn`, channelSyncStates.channelId)
          .limit(limit * 2);
        if (ranked.length === 0) return [];
        const locked = await tx
          .select({ id: channelSyncStates.channelId })
          .from(channelSyncStates)
          .where(and(inArray(channelSyncStates.channelId, ranked.map((r) => r.id)), free))
          .for('update', { skipLocked: true });
        const lockedIds = new Set(locked.map((l) => l.id));
        const ids = ranked.map((r) => r.id).filter((id) => lockedIds.has(id)).slice(0, limit);
        if (ids.length === 0) return [];
        await tx
          .update(channelSyncStates)
          .set({ leaseOwner: owner, leaseUntil: new Date(now.getTime() + leaseMs) })
          .where(inArray(channelSyncStates.channelId, ids));
        return ids;
      });
    },
    async renew(ids, now) {
      if (ids.length === 0) return new Set();
      const rows = await db
        .update(channelSyncStates)
        .set({ leaseUntil: new Date(now.getTime() + leaseMs) })
        .where(and(inArray(channelSyncStates.channelId, ids), eq(channelSyncStates.leaseOwner, owner)))
        .returning({ id: channelSyncStates.channelId });
      return new Set(rows.map((r) => r.id));
    },
    async release(ids) {
      if (ids?.length === 0) return;
      await db
        .update(channelSyncStates)
        .set({ leaseOwner: null, leaseUntil: null })
        .where(and(ids ? inArray(channelSyncStates.channelId, ids) : undefined, eq(channelSyncStates.leaseOwner, owner)));
    },
    async backOff(channelId, delayMs, now) {
      await db
        .update(channelSyncStates)
        .set({ leaseOwner: null, leaseUntil: new Date(now.getTime() + delayMs) })
        .where(and(eq(channelSyncStates.channelId, channelId), eq(channelSyncStates.leaseOwner, owner)));
    },
  };
}

/** A connection a process holds on a leased channel (an IMAP session, an SMPP bind), opened from the channel's row. */
export interface HeldConnection {
  /** What the connection was opened with: a change of it opens a new one. */
  readonly fingerprint: string;
  stop(): Promise<void>;
}

/** How a kind of connection reads its channels and opens one. */
export interface ConnectionKind<R extends { id: string }, C extends HeldConnection> {
  /** The channels' rows, with what `live`, `fingerprint` and `open` read. */
  read(ids: string[]): Promise<R[]>;
  /** The channel still takes this kind of connection (not deleted, not disabled, still of the kind). */
  live(row: R): boolean;
  fingerprint(row: R): string;
  open(row: R): C;
}

/**
 * One pass over a process's leased connections: renews the leases held; ends the connections of channels
 * gone, disabled, changed or taken by another process (giving up the lease of those that no longer take the
 * kind, while a changed channel is claimed again with a connection on its new settings); then claims free
 * channels up to `max` and opens a connection on each.
 */
export async function reconcileConnections<R extends { id: string }, C extends HeldConnection>(leases: ChannelLeases, held: Map<string, C>, now: Date, max: number, kind: ConnectionKind<R, C>) {
  const heldIds = [...held.keys()];
  const still = await leases.renew(heldIds, now);
  const byId = new Map((heldIds.length ? await kind.read(heldIds) : []).map((r) => [r.id, r]));
  const gone: string[] = [];
  for (const id of heldIds) {
    const row = byId.get(id);
    const connection = held.get(id)!;
    const live = row !== undefined && kind.live(row);
    if (!still.has(id) || !live || kind.fingerprint(row) !== connection.fingerprint) {
      held.delete(id);
      await connection.stop();
      if (still.has(id) && !live) gone.push(id);
    }
  }
  await leases.release(gone);
  const claimed = await leases.claim(max - held.size, now, [...held.keys()]);
  if (claimed.length === 0) return;
  for (const row of await kind.read(claimed)) if (!held.has(row.id)) held.set(row.id, kind.open(row));
}

/** Stops every connection held and gives up their leases, so another process takes them at its next pass. */
export async function stopConnections(leases: ChannelLeases, held: Map<string, HeldConnection>) {
  await Promise.all([...held.values()].map((c) => c.stop()));
  held.clear();
  await leases.release().catch(() => {});
}

/**
 * Wakes a connection loop (its `wake`) for channel changes committed in this process: at once for a deleted
 * channel, so that its connection (an IMAP session, an SMPP bind) closes when the DELETE commits; after
 * `delayMs` for any other change, so that a burst of changes is one pass. Another process notices at its next
 * pass, and stores nothing meanwhile: every write received for a channel checks in its transaction that the
 * channel is not deleted (`assertChannelLive`).
 */
export function wakeOnChannelChanges(kick: () => void, delayMs = 1000): () => void {
  let timer: NodeJS.Timeout | undefined;
  const later = () => {
    timer ??= setTimeout(() => {
      timer = undefined;
      kick();
    }, delayMs);
  };
  const offNow = onEventsCommitted(kick, (c) => c.types.includes('channel.deleted'));
  const offLater = onEventsCommitted(later, (c) => !c.types.includes('channel.deleted') && c.types.some((t) => t.startsWith('channel.')));
  return () => {
    offNow();
    offLater();
    clearTimeout(timer);
  };
}
