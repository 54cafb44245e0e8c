import { createHash, randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { and, eq, exists, inArray, isNull, sql } from 'drizzle-orm';
import type { FastifyBaseLogger } from 'fastify';
import type { ImapFlow } from 'imapflow';
import type { Clock } from '../core/clock.js';
import { isDatabaseUnavailable } from '../core/errors.js';
import type { Db, DbOrTx } from '../db/client.js';
import { channels, channelSyncStates } from '../db/schema.js';
import { assertMailHostAllowed, describeError, imapOptions } from '../modules/channels/channels.connect.js';
import { ChannelGone, loadChannelCredentials, type ChannelCredentials } from '../modules/channels/channels.repository.js';
import { showChannelOutcome, type ChannelOutcome } from '../modules/channels/channel-health.js';
import { toChannel } from '../modules/channels/kinds.js';
import { EMAIL_CREDENTIALS_FIX } from '../modules/channels/email/email.channels.js';
import { databaseErrorReason, failureReason, MailBusy, MailRefused, receiveEmail, type InboundChannel, type InboundDeps, type ReceiveResult } from '../modules/channels/email/inbound.js';
import { MAX_ATTEMPTS, recordInboundFailure } from '../modules/channels/email/inbound-failures.js';
import { channelLeases, reconcileConnections, stopConnections, wakeOnChannelChanges } from './channel-leases.js';
import { createWorkerLoop, type WorkerLoop } from './loop.js';

/**
 * How long a process's claim on a channel lasts without renewal (renewed every third of it); a killed
 * process's channels are taken over after it, by another process's next pass (within 30 s in all). The
 * default of `CHANNEL_LEASE_MS`, which sets it for every channel one process holds (a mailbox, a text
 * channel's bind) alike.
 */
export const LEASE_MS = 20_000;
/** Waits before reconnecting after the 1st, 2nd, … failure in a row (the last repeats), ±10% jitter. */
export const RECONNECT_DELAYS_MS = [1_000, 5_000, 15_000, 60_000, 5 * 60_000];
/** UIDs whose sizes are asked for at once. */
const SIZE_BATCH = 500;
/** Message bytes fetched by one FETCH (a larger message comes alone): bounds the memory a sync takes. */
const FETCH_BYTES = 8 * 1024 * 1024;
const FETCH_MAX_MESSAGES = 100;
const DAY_MS = 24 * 60 * 60 * 1000;

/** Writes one fetched email as a message; `inTransaction` runs inside the message's own transaction. */
export type ReceiveFn = (channel: InboundChannel, raw: Buffer, inTransaction: (tx: DbOrTx) => Promise<void>) => Promise<ReceiveResult>;

export interface ImapSyncDeps {
  db: Db;
  clock: Clock;
  log: Pick<FastifyBaseLogger, 'error' | 'warn' | 'info'>;
  /** The first sync of a mailbox takes the messages of this many last days (IMAP_INITIAL_DAYS). */
  initialDays: number;
  /** Without IDLE, how often the mailbox is looked at; with IDLE, the longest IDLE before a look anyway (ms). */
  pollMs: number;
  /** CHANNELS_ALLOW_PRIVATE: mail servers on private and loopback addresses. */
  allowPrivate: boolean;
  /** Everything `receiveEmail` takes besides the database (the DNS resolver of the authentication checks, …). */
  inbound?: Omit<InboundDeps, 'db'>;
  /** Default: `receiveEmail`, with the checkpoint in the message's transaction. */
  receive?: ReceiveFn;
  /** This process's name on its leases; default host, pid and a random part. */
  owner?: string;
  leaseMs?: number;
  /** Channels one process syncs at most (each holds one IMAP connection). */
  maxChannels?: number;
  reconnectDelaysMs?: number[];
  random?: () => number;
}

type StateRow = typeof channelSyncStates.$inferSelect;

/** The checkpoint's write found the lease gone (another process took the channel, or it was deleted): the write rolls back. */
class LeaseLost extends Error {
  constructor() {
    super('The channel is no longer synced by this process (another process took it, or it was deleted)');
  }
}

export interface SyncOutcome {
  /** Messages written (not counting duplicates). */
  received: number;
  /** Fetched messages that were already there (same Message-ID on the channel). */
  duplicates: number;
}

/** What decides a session's connection: when it changes (server, user, password, mailbox) the session restarts. */
const fingerprint = (row: { inbound: unknown; inboundSecret: string | null }) =>
  createHash('sha256').update(JSON.stringify([row.inbound, row.inboundSecret])).digest('hex');

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });

/** A sync's failure as the channel shows it: a refused login says which settings to check. */
const imapFailure = (err: unknown, error: string): ChannelOutcome => ({
  ok: false,
  side: 'mailbox',
  error: `IMAP: ${error}`,
  ...((err as { authenticationFailed?: unknown })?.authenticationFailed ? { fix: EMAIL_CREDENTIALS_FIX.imap } : {}),
});

/**
 * The IMAP sync of inbound-IMAP channels. Each channel is synced by exactly one process at a time: a lease
 * in `channel_sync_states` claimed with `FOR UPDATE SKIP LOCKED`, renewed by every pass of this worker's
 * loop, and checked by every checkpoint write, so several processes on one PostgreSQL share the channels
 * and a crashed process's channels are taken over when its leases run out.
 *
 * A channel's session logs in, opens the mailbox read-only, fetches what is new since the checkpoint (the
 * first time: the last `initialDays` days), writes each email through `receiveEmail` with the checkpoint
 * (UIDVALIDITY and the UID) in the same transaction, then waits in IDLE (or polls where the server has no
 * IDLE) and goes again. A lost connection reconnects with backoff; the channel shows `status` `error` and
 * `lastError` meanwhile, and `active` with `lastSyncAt` once it syncs again. A changed UIDVALIDITY starts
 * the mailbox over from the initial window: Message-IDs already received on the channel are not written twice.
 */
export function createImapSync(deps: ImapSyncDeps): WorkerLoop & {
  runOnce(): Promise<SyncOutcome & { channels: number }>;
  /** The channels this process holds a lease on. */
  held(): string[];
} {
  const { db, clock, log } = deps;
  const owner = deps.owner ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  const leaseMs = deps.leaseMs ?? LEASE_MS;
  const maxChannels = deps.maxChannels ?? 100;
  const delays = deps.reconnectDelaysMs ?? RECONNECT_DELAYS_MS;
  const random = deps.random ?? Math.random;
  const receive: ReceiveFn =
    deps.receive ?? ((channel, raw, inTransaction) => receiveEmail({ ...deps.inbound, db }, channel, raw, 'imap', undefined, { inTransaction }));

  /** Checkpoint and other writes of the sync state, only while this process holds the lease and the channel is not deleted. */
  async function writeState(tx: DbOrTx, channelId: string, values: Partial<Pick<StateRow, 'mailbox' | 'uidValidity' | 'lastUid' | 'initialDone'>>) {
    const rows = await tx
      .update(channelSyncStates)
      .set({ ...values, updatedAt: clock() })
      .where(and(eq(channelSyncStates.channelId, channelId), eq(channelSyncStates.leaseOwner, owner), exists(db.select({ one: sql`1` }).from(channels).where(and(eq(channels.id, channelId), isNull(channels.deletedAt))))))
      .returning({ id: channelSyncStates.channelId });
    if (rows.length === 0) throw new LeaseLost();
  }

  const leases = channelLeases(db, 'imap', owner, leaseMs);
  const { claim, backOff: giveUp } = leases;

  async function connect(creds: ChannelCredentials): Promise<ImapFlow> {
    const target = await assertMailHostAllowed(creds.inbound.host ?? '', { channelsAllowPrivate: deps.allowPrivate });
    // The session looks at the mailbox every pollMs: a quiet connection must outlive that wait (IDLE or not).
    const { ImapFlow } = await import('imapflow'); // loaded on first use: a process without IMAP channels does not hold it
    const client = new ImapFlow({ ...imapOptions(creds.inbound, target), socketTimeout: deps.pollMs + 60_000 });
    // Errors also reject the command under way; the listener keeps an 'error' event from being fatal.
    client.on('error', () => {});
    await client.connect();
    return client;
  }

  /**
   * Fetches what is new in the channel's mailbox since its checkpoint and writes it, each message with its
   * checkpoint in one transaction. The mailbox is open (read-only) on `client`.
   */
  async function syncMailbox(client: ImapFlow, creds: ChannelCredentials, signal: AbortSignal): Promise<SyncOutcome> {
    const mailbox = creds.inbound.mailbox ?? 'INBOX';
    const box = client.mailbox && client.mailbox.path === mailbox ? client.mailbox : await client.mailboxOpen(mailbox, { readOnly: true });
    const uidValidity = Number(box.uidValidity);
    const uidNextAtOpen = box.uidNext;
    const [state] = await db.select().from(channelSyncStates).where(eq(channelSyncStates.channelId, creds.id)).limit(1);
    if (!state || state.leaseOwner !== owner) throw new LeaseLost();
    let { lastUid, initialDone } = state;
    if (state.uidValidity !== uidValidity || state.mailbox !== mailbox) {
      // The first sync, another mailbox, or a mailbox the server renumbered: start over from the initial window.
      // What was already received keeps its message (the same Message-ID on the channel is never written twice).
      if (state.uidValidity !== null) log.warn({ channelId: creds.id, mailbox, was: state.uidValidity, now: uidValidity }, 'IMAP UIDVALIDITY changed: syncing the mailbox again');
      lastUid = 0;
      initialDone = false;
      await writeState(db, creds.id, { mailbox, uidValidity, lastUid, initialDone });
    }

    const from = `${lastUid + 1}:*`;
    const query = initialDone ? { uid: from } : { uid: from, since: new Date(clock().getTime() - deps.initialDays * DAY_MS) };
    const found = (await client.search(query, { uid: true })) || [];
    // `n:*` names the last message even when its UID is below n: only what is past the checkpoint counts.
    const uids = [...new Set(found)].filter((u) => u > lastUid).sort((a, b) => a - b);

    const channel: InboundChannel = { id: creds.id, organizationId: creds.organizationId, address: creds.address };
    const outcome: SyncOutcome = { received: 0, duplicates: 0 };
    for (const batch of await fetchGroups(client, uids, signal)) {
      if (signal.aborted) break;
      const fetched = await client.fetchAll(batch.join(','), { uid: true, source: true }, { uid: true });
      const byUid = new Map(fetched.map((m) => [m.uid, m]));
      for (const uid of batch) {
        if (signal.aborted) break;
        const source = byUid.get(uid)?.source;
        const checkpoint = (tx: DbOrTx) => writeState(tx, creds.id, { uidValidity, lastUid: uid });
        if (!source) {
          // Expunged between SEARCH and FETCH: nothing to write, but no reason to look at it again.
          await checkpoint(db);
          continue;
        }
        const result = await receiveOrGiveUp(channel, source, uid, uidValidity, checkpoint);
        if (!result) {
          lastUid = uid;
          continue;
        }
        if (result.duplicate) {
          // The write rolled back with its checkpoint: the message exists already, so move past it.
          await checkpoint(db);
          outcome.duplicates++;
        } else outcome.received++;
        lastUid = uid;
      }
    }
    if (!initialDone && !signal.aborted) {
      // Everything older than the window is left out for good: later syncs start after what the mailbox held.
      await writeState(db, creds.id, { uidValidity, lastUid: Math.max(lastUid, uidNextAtOpen - 1), initialDone: true });
    }
    return outcome;
  }

  /**
   * Receives one fetched email; when that fails, counts the failure (`inbound_failures`). An email that
   * failed the same way MAX_ATTEMPTS times (or was refused for good) is not importable: the checkpoint moves
   * past it and this answers undefined. Otherwise the failure is thrown, as a reason without SQL or content,
   * and the session tries again after its backoff.
   */
  async function receiveOrGiveUp(channel: InboundChannel, source: Buffer, uid: number, uidValidity: number, checkpoint: (tx: DbOrTx) => Promise<void>): Promise<ReceiveResult | undefined> {
    try {
      return await receive(channel, source, checkpoint);
    } catch (err) {
      if (err instanceof LeaseLost || err instanceof ChannelGone || err instanceof MailBusy || isDatabaseUnavailable(err)) throw err;
      const reason = failureReason(err);
      const failure = await recordInboundFailure(db, { organizationId: channel.organizationId, channelId: channel.id, provider: 'imap', fingerprint: `imap:${uidValidity}:${uid}`, reason, raw: source, permanent: err instanceof MailRefused && err.permanent });
      if (!failure.notImportable) throw new Error(`A message could not be imported (attempt ${failure.attempts} of ${MAX_ATTEMPTS}): ${reason}`);
      log.warn({ channelId: channel.id, uid, reason }, 'IMAP sync: a message is not importable; moving past it');
      await writeState(db, channel.id, { uidValidity, lastUid: uid });
      return undefined;
    }
  }

  /** The UIDs in groups of at most FETCH_BYTES (by the sizes the server reports) and FETCH_MAX_MESSAGES. */
  async function fetchGroups(client: ImapFlow, uids: number[], signal: AbortSignal): Promise<number[][]> {
    const groups: number[][] = [];
    let group: number[] = [];
    let bytes = 0;
    for (let i = 0; i < uids.length && !signal.aborted; i += SIZE_BATCH) {
      const part = uids.slice(i, i + SIZE_BATCH);
      const sizes = new Map((await client.fetchAll(part.join(','), { uid: true, size: true }, { uid: true })).map((m) => [m.uid, m.size ?? 0]));
      for (const uid of part) {
        const size = sizes.get(uid) ?? 0;
        if (group.length > 0 && (bytes + size > FETCH_BYTES || group.length >= FETCH_MAX_MESSAGES)) {
          groups.push(group);
          group = [];
          bytes = 0;
        }
        group.push(uid);
        bytes += size;
      }
    }
    if (group.length > 0) groups.push(group);
    return groups;
  }

  /** One channel's connection: sync, IDLE (or poll), sync again, … until stopped; reconnects with backoff. */
  class Session {
    readonly abort = new AbortController();
    readonly done: Promise<void>;
    client: ImapFlow | undefined;

    constructor(
      readonly channelId: string,
      readonly fingerprint: string,
    ) {
      this.done = this.run();
    }

    async stop() {
      this.abort.abort();
      this.client?.close();
      await this.done;
    }

    private async run() {
      const signal = this.abort.signal;
      while (!signal.aborted) {
        try {
          const creds = await loadChannelCredentials(db, this.channelId);
          this.client = await connect(creds);
          await this.live(this.client, creds, () => failuresOf.delete(this.channelId));
        } catch (err) {
          if (signal.aborted) break;
          if (err instanceof LeaseLost) {
            log.warn({ channelId: this.channelId }, 'IMAP sync: the channel is no longer synced by this process');
            break;
          }
          // Deleted while a message was being written (by this process or another): nothing was stored.
          if (err instanceof ChannelGone) break;
          const failures = (failuresOf.get(this.channelId) ?? 0) + 1;
          failuresOf.set(this.channelId, failures);
          // Never a statement or its values in lastError and the log: a database error is named by its SQLSTATE.
          const error = databaseErrorReason(err) ?? describeError(err);
          log.warn({ channelId: this.channelId, error, failures }, 'IMAP sync failed; retrying later');
          await showChannelOutcome(db, this.channelId, imapFailure(err, error), { view: toChannel }).catch((e: unknown) => log.warn({ err: e, channelId: this.channelId }, 'could not record the IMAP failure on the channel'));
          // A failing channel gives its lease up until its next attempt (after the backoff), so that it holds
          // no slot meanwhile: the next attempt is whichever process claims it then.
          const base = delays[Math.min(failures, delays.length) - 1]!;
          await backOff(this.channelId, Math.round(base * (0.9 + 0.2 * random()))).catch(() => {});
          break;
        } finally {
          this.client?.close();
          this.client = undefined;
        }
      }
      if (sessions.get(this.channelId) === this) sessions.delete(this.channelId);
    }

    private async live(client: ImapFlow, creds: ChannelCredentials, connected: () => void) {
      const signal = this.abort.signal;
      let poke: (() => void) | undefined;
      // A message announced while a sync runs sends the loop round again without waiting.
      let pending = false;
      const closed = new Promise<void>((resolve) => client.once('close', () => resolve()));
      client.on('exists', () => {
        pending = true;
        poke?.();
      });
      const canIdle = client.capabilities.has('IDLE');
      while (!signal.aborted) {
        pending = false;
        await syncMailbox(client, creds, signal);
        await showChannelOutcome(db, creds.id, { ok: true, side: 'mailbox', at: clock() }, { view: toChannel });
        connected();
        if (!client.usable) throw new Error('The IMAP connection closed');
        if (pending) continue;
        const woken = new Promise<void>((resolve) => (poke = resolve));
        // IDLE until the server announces a message (or pollMs passes): the next command ends it.
        if (canIdle) void client.idle().catch(() => {});
        const wait = new AbortController();
        const stop = () => wait.abort();
        signal.addEventListener('abort', stop, { once: true });
        await Promise.race([woken, closed, sleep(deps.pollMs, wait.signal)]);
        // The timer goes with the wait: a busy mailbox must not pile up a timer per round.
        wait.abort();
        signal.removeEventListener('abort', stop);
        poke = undefined;
        if (!client.usable) throw new Error('The IMAP connection closed');
      }
    }
  }

  const sessions = new Map<string, Session>();
  /** Failed attempts in a row per channel (in this process), for the backoff. */
  const failuresOf = new Map<string, number>();

  /** Gives up the lease on a failing channel: nobody claims it before `delayMs` have passed. */
  const backOff = (channelId: string, delayMs: number) => giveUp(channelId, delayMs, clock());

  const read = (ids: string[]) =>
    db
      .select({ id: channels.id, inbound: channels.inbound, inboundSecret: channels.inboundSecret, status: channels.status, deletedAt: channels.deletedAt })
      .from(channels)
      .where(inArray(channels.id, ids));

  /** Renews held leases, ends sessions of channels gone, disabled, changed or taken, and starts sessions for newly claimed ones. */
  const pass = () =>
    reconcileConnections<Awaited<ReturnType<typeof read>>[number], Session>(leases, sessions, clock(), maxChannels, {
      read,
      live: (row) => row.deletedAt === null && row.status !== 'disabled' && row.inbound.mode === 'imap',
      fingerprint,
      open: (row) => new Session(row.id, fingerprint(row)),
    });

  // Woken by this process's writes too: a channel created or changed here is picked up within a second, a
  // deleted one's session closes when its DELETE commits.
  const loop = createWorkerLoop({ name: 'IMAP sync', pass, intervalMs: Math.max(1000, Math.floor(leaseMs / 3)), wake: wakeOnChannelChanges, log });

  return {
    ...loop,
    async stop() {
      await loop.stop();
      // Another process takes the channels over at its next pass rather than when the leases run out.
      await stopConnections(leases, sessions);
    },
    held: () => [...sessions.keys()],
    /**
     * Claims the channels it can and syncs each once (connect, fetch what is new, log out), without IDLE;
     * answers how many channels were synced and what they brought. The lease stays with this process until it
     * runs out or `stop()`.
     */
    async runOnce() {
      const ids = (await claim(maxChannels, clock())).filter((id) => !sessions.has(id));
      const total = { channels: 0, received: 0, duplicates: 0 };
      for (const id of ids) {
        let client: ImapFlow | undefined;
        try {
          const creds = await loadChannelCredentials(db, id);
          client = await connect(creds);
          const outcome = await syncMailbox(client, creds, new AbortController().signal);
          await showChannelOutcome(db, id, { ok: true, side: 'mailbox', at: clock() }, { view: toChannel });
          total.channels++;
          total.received += outcome.received;
          total.duplicates += outcome.duplicates;
        } catch (err) {
          if (err instanceof LeaseLost || err instanceof ChannelGone) continue;
          await showChannelOutcome(db, id, imapFailure(err, describeError(err)), { view: toChannel });
        } finally {
          await client?.logout().catch(() => client?.close());
        }
      }
      return total;
    },
  };
}
