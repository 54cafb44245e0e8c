import { createHash, randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { inArray } from 'drizzle-orm';
import type { FastifyBaseLogger } from 'fastify';
import type smpp from 'smpp';
import type { Clock } from '../core/clock.js';
import { createLimiter } from '../core/rate-limit.js';
import type { Db } from '../db/client.js';
import { channels } from '../db/schema.js';
import { describeError } from '../modules/channels/channels.connect.js';
import { showChannelOutcome } from '../modules/channels/channel-health.js';
import { toChannel } from '../modules/channels/kinds.js';
import { notifyEventsCommitted } from '../modules/events/events.signal.js';
import { databaseErrorReason } from '../modules/channels/email/inbound.js';
import type { OperationRunner } from '../modules/channels/runner.js';
import { closeBind, messageIdForms, openBind, smppDefinition, smppSettingsOf, ping, registerSmppLink, submitText, unregisterSmppLink, type SmppLink } from '../modules/channels/sms/providers/smpp.js';
import { deleteStaleParts, PART_TTL_MS, receiveDeliverSm, type RecentSubmits } from '../modules/channels/sms/smpp.receive.js';
import { loadSmsChannel } from '../modules/channels/sms/sms.repository.js';
import { channelLeases, reconcileConnections, stopConnections, wakeOnChannelChanges } from './channel-leases.js';
import { LEASE_MS, RECONNECT_DELAYS_MS } from './imap-sync.js';
import { createWorkerLoop, type WorkerLoop } from './loop.js';

/**
 * The SMPP binds of text channels. Each active SMPP channel is bound by exactly one process at a time: the
 * same lease as the IMAP sync (a row in `channel_sync_states`, claimed with `FOR UPDATE SKIP LOCKED`,
 * renewed by every pass, released on stop; a killed process's lease runs out and another process's next
 * pass takes the channel over).
 *
 * The holder keeps one transceiver bind open: the text sender submits the channel's queued texts over it
 * (`boundSmppChannels`), and what the SMSC delivers (texts, parts of long texts, delivery receipts) is written
 * by `receiveDeliverSm`, each deliver_sm answered only after its write is committed; a database failure is
 * answered ESME_RX_T_APPN (a temporary error: the SMSC delivers it again). What one SMSC delivers is bounded
 * before it reaches the database: at most `deliverWindow` writes at once per bind (past it the bind stops
 * reading, and TCP holds the SMSC back until a write is answered), and at most `deliverRateLimit` deliver_sm
 * a minute per channel (past it they are answered ESME_RTHROTTLED: the SMSC delivers them again later). A
 * dropped connection, or a session that met a PDU it could not read (the `smpp` package stops reading then),
 * is bound again at once; a bind that fails puts the channel in `status` `error` with the reason in
 * `lastError` (it turns `active` again once a bind succeeds) and gives the lease up for a backoff (1 s, 5 s,
 * 15 s, 1 min, 5 min), after which a process's pass binds it again. enquire_link every 30 s finds a dead
 * connection.
 */

export const ENQUIRE_LINK_MS = 30_000;
/** Receipts' ids remembered per bind from the submits (a receipt may come before the send's answer is committed). */
const RECENT_IDS = 2000;
/**
 * deliver_sm written at once per bind; past it the bind reads no more until one is answered. A few on
 * PostgreSQL, whose pool serves other requests meanwhile; one on the embedded database, whose one connection
 * runs on the main thread, so that every write in flight is a wait for everybody else.
 */
export const deliverWindowOf = (database: 'pglite' | 'postgres') => (database === 'pglite' ? 1 : 4);
/** Receipts a bind holds at most while they wait for their submit's answer (outside the window). */
const MAX_HELD_RECEIPTS = 64;

export interface SmppBindsDeps {
  db: Db;
  clock: Clock;
  log: Pick<FastifyBaseLogger, 'error' | 'warn' | 'info'>;
  /** The operation runner received texts are written with. */
  run: OperationRunner;
  /** CHANNELS_ALLOW_PRIVATE: SMSCs on private and loopback addresses. */
  allowPrivate: boolean;
  /** The longest a connection, a bind or a submit may take (ms). */
  timeoutMs: number;
  /** deliver_sm one channel may deliver per minute; past it they are answered ESME_RTHROTTLED (SMPP_DELIVER_RATE_LIMIT). */
  deliverRateLimit: number;
  /** deliver_sm written at once per bind (`deliverWindowOf` the database). */
  deliverWindow: number;
  owner?: string;
  leaseMs?: number;
  maxChannels?: number;
  reconnectDelaysMs?: number[];
  enquireLinkMs?: number;
  random?: () => number;
}

/** What decides a bind: when it changes (host, credentials, …) the bind is made again. */
const fingerprint = (row: { sms: unknown; outboundSecret: string | null }) => createHash('sha256').update(JSON.stringify([row.sms && (row.sms as { provider: unknown }).provider, row.outboundSecret])).digest('hex');

/** A bind the SMSC refused for its credentials (a wrong system id or password, or a bind refused outright). */
const refusedBind = (error: string) => /ESME_RINVPASWD|ESME_RINVSYSID|ESME_RBINDFAIL|ESME_RINVSYSTYP/.test(error);

/** A database failure: answered with a temporary error, so that the SMSC delivers again. */
const TEMPORARY_ERROR = 0x64; // ESME_RX_T_APPN
/** Past the channel's rate: the SMSC delivers again later. */
const THROTTLED = 0x58; // ESME_RTHROTTLED

export function createSmppBinds(deps: SmppBindsDeps): WorkerLoop & {
  /** The channels this process holds the lease of. */
  held(): string[];
  /** Runs one pass now (tests). */
  runOnce(): Promise<void>;
} {
  const { db, clock, log } = deps;
  const owner = deps.owner ?? `${hostname()}:${process.pid}:smpp:${randomUUID().slice(0, 8)}`;
  const leaseMs = deps.leaseMs ?? LEASE_MS;
  const maxChannels = deps.maxChannels ?? 100;
  const delays = deps.reconnectDelaysMs ?? RECONNECT_DELAYS_MS;
  const random = deps.random ?? Math.random;
  const deliverWindow = deps.deliverWindow;
  // In this process's memory: one process holds a channel's bind.
  const deliverLimiter = createLimiter({ name: 'smpp-deliver', points: deps.deliverRateLimit, durationSeconds: 60 });

  const leases = channelLeases(db, 'smpp', owner, leaseMs);
  const { backOff } = leases;
  /** Failed binds in a row per channel (in this process), for the backoff. */
  const failuresOf = new Map<string, number>();

  /** One channel's bind: bind, serve, bind again after a drop (with backoff), until stopped. */
  class Bind {
    readonly abort = new AbortController();
    readonly done: Promise<void>;
    session: smpp.Session | undefined;
    /** Waits for the pending parts of long texts: they are written one after another. */
    private parts: Promise<unknown> = Promise.resolve();
    private readonly recent = new Map<string, { messageId: string; smscId: string }>();
    /** Submits sent and not answered yet, and the receipts waiting for their answers. */
    private submitting = 0;
    private readonly waiting = new Set<() => void>();
    /** When the channel was last throttled here (logged once a minute). */
    private throttledAt = 0;

    constructor(
      readonly channelId: string,
      readonly fingerprint: string,
    ) {
      this.done = this.run();
    }

    async stop() {
      this.abort.abort();
      this.wake();
      await this.done;
    }

    /** A submit was answered (or gave up): the receipts waiting for one look again. */
    private wake() {
      for (const resume of [...this.waiting]) resume();
    }

    private remember(smscId: string, messageId: string) {
      for (const form of messageIdForms(smscId)) this.recent.set(form, { messageId, smscId });
      while (this.recent.size > RECENT_IDS * 8) this.recent.delete(this.recent.keys().next().value!);
    }

    private readonly lookup = (forms: string[]) => {
      for (const f of forms) {
        const hit = this.recent.get(f);
        if (hit) return hit;
      }
      return undefined;
    };

    /**
     * Waits while submits are unanswered until one names `forms`, at most a third of the submit timeout: an
     * SMSC that answers nothing else until its receipt is answered then still answers the submit in time.
     */
    private async answerOf(forms: string[]) {
      const end = Date.now() + deps.timeoutMs / 3;
      while (this.submitting > 0 && !this.abort.signal.aborted && !this.lookup(forms)) {
        const left = end - Date.now();
        if (left <= 0) break;
        await new Promise<void>((resolve) => {
          const resume = () => {
            clearTimeout(timer);
            this.waiting.delete(resume);
            resolve();
          };
          const timer = setTimeout(resume, left);
          this.waiting.add(resume);
        });
      }
      return this.lookup(forms);
    }

    private async run() {
      const signal = this.abort.signal;
      while (!signal.aborted) {
        let session: smpp.Session | undefined;
        try {
          const channel = await loadSmsChannel(db, this.channelId);
          if (!channel || channel.provider.kind !== 'smpp') break;
          session = await openBind(smppSettingsOf(channel.provider), { allowPrivate: deps.allowPrivate, timeoutMs: deps.timeoutMs });
          if (signal.aborted) {
            await closeBind(session);
            break;
          }
          this.session = session;
          failuresOf.delete(this.channelId);
          await showChannelOutcome(db, this.channelId, { ok: true, side: 'provider' }, { view: toChannel });
          log.info({ channelId: this.channelId }, 'SMPP bound');
          await this.serve(session, channel);
          // A dropped connection is bound again at once; a bind that then fails backs off below.
          if (!signal.aborted) log.warn({ channelId: this.channelId }, 'SMPP connection lost; binding again');
        } catch (err) {
          if (signal.aborted) break;
          const failures = (failuresOf.get(this.channelId) ?? 0) + 1;
          failuresOf.set(this.channelId, failures);
          const error = databaseErrorReason(err) ?? describeError(err);
          log.warn({ channelId: this.channelId, error, failures }, 'SMPP bind failed; retrying later');
          await showChannelOutcome(db, this.channelId, { ok: false, side: 'provider', error: `SMPP: ${error}`, ...(refusedBind(error) ? { fix: smppDefinition.credentialsFix } : {}) }, { view: toChannel }).catch((e: unknown) =>
            log.warn({ err: e, channelId: this.channelId }, 'could not record the SMPP failure on the channel'),
          );
          // As the IMAP sync does: a failing channel gives its lease up until its next attempt (after the
          // backoff), so that it holds no slot meanwhile; whichever process claims it then binds it.
          const base = delays[Math.min(failures, delays.length) - 1]!;
          await backOff(this.channelId, Math.round(base * (0.9 + 0.2 * random())), clock()).catch(() => {});
          break;
        } finally {
          this.session = undefined;
          session?.destroy();
        }
      }
      if (binds.get(this.channelId) === this) binds.delete(this.channelId);
    }

    /** Serves a bound session until it closes or the bind stops (then unbinds). */
    private async serve(session: smpp.Session, channel: NonNullable<Awaited<ReturnType<typeof loadSmsChannel>>>) {
      const signal = this.abort.signal;
      const link: SmppLink = {
        submit: async (text, timeoutMs) => {
          this.submitting++;
          try {
            return await submitText(session, text, timeoutMs, (smscId) => {
              if (text.messageId) this.remember(smscId, text.messageId);
              this.wake();
            });
          } finally {
            this.submitting--;
            this.wake();
          }
        },
      };
      const closed = new Promise<void>((resolve) => session.once('close', () => resolve()));
      // The package stops reading a session after a PDU it cannot read: the connection is dropped and bound again.
      session.on('error', (err: Error) => {
        log.warn({ channelId: this.channelId, error: describeError(err) }, 'SMPP session error; binding again');
        session.destroy();
      });
      /** Writes under way: answered before an unbind. */
      const inflight = new Set<Promise<unknown>>();
      // The window: deliver_sm being written (receipts held for their submit's answer excepted, so that the
      // answer can still be read), and whether reading stopped for them. Reading resumes on the next turn of
      // the event loop, never inside the write that ended: the embedded database answers without one, so
      // PDUs read there would start their writes before anything else (an HTTP request) gets a turn.
      let writing = 0;
      let held = 0;
      let paused = false;
      const flow = () => {
        const full = writing >= deliverWindow;
        if (full === paused) return;
        paused = full;
        if (full) session.pause();
        else setImmediate(() => void (paused || session.resume()));
      };
      const recent: RecentSubmits = {
        find: this.lookup,
        awaitAnswers: async (forms) => {
          if (held >= MAX_HELD_RECEIPTS) return this.lookup(forms);
          held++;
          writing--;
          flow();
          try {
            return await this.answerOf(forms);
          } finally {
            held--;
            writing++;
            flow();
          }
        },
      };
      const deliver = async (pdu: smpp.PDU): Promise<number> => {
        if (!(await deliverLimiter.consume(this.channelId)).allowed) {
          if (Date.now() - this.throttledAt > 60_000) {
            this.throttledAt = Date.now();
            log.warn({ channelId: this.channelId }, 'SMPP: the SMSC delivers faster than the channel may (SMPP_DELIVER_RATE_LIMIT); answering ESME_RTHROTTLED');
          }
          return THROTTLED;
        }
        const write = () => receiveDeliverSm(deps.run, db, channel, pdu, recent);
        // Parts of long texts one after another (the last one joins them); texts and receipts at once.
        const isPart = (Number(pdu.esm_class) & 0x40) !== 0 || pdu.sar_total_segments !== undefined;
        await (isPart ? (this.parts = this.parts.then(write, write)) : write());
        return 0;
      };
      session.on('deliver_sm', (pdu: smpp.PDU) => {
        writing++;
        flow();
        const done = deliver(pdu);
        inflight.add(done);
        void done
          .then(
            (status) => session.send(pdu.response(status ? { command_status: status } : {})),
            (err: unknown) => {
              log.warn({ channelId: this.channelId, error: databaseErrorReason(err) ?? describeError(err) }, 'SMPP: a deliver_sm could not be written; answered with a temporary error');
              session.send(pdu.response({ command_status: TEMPORARY_ERROR }));
            },
          )
          .finally(() => {
            inflight.delete(done);
            writing--;
            flow();
          })
          .catch(() => {});
      });
      session.on('enquire_link', (pdu: smpp.PDU) => void session.send(pdu.response()));
      session.on('unbind', (pdu: smpp.PDU) => {
        session.send(pdu.response());
        session.close();
      });
      // A connection whose SMSC stops answering is dead (no close may ever come): it is dropped and bound again.
      // One that delivered meanwhile is alive, and while the window is full the answer may be there unread.
      let lastRead = Date.now();
      session.on('pdu', () => (lastRead = Date.now()));
      const keepAlive = setInterval(() => {
        const sent = Date.now();
        void ping(session, deps.timeoutMs).then((alive) => {
          if (!alive && !paused && lastRead < sent) session.destroy();
        });
      }, deps.enquireLinkMs ?? ENQUIRE_LINK_MS);
      registerSmppLink(this.channelId, link);
      // Every handler is in place: what the SMSC sent since the bind's answer is read now.
      session.resume();
      // The text sender may send this channel's texts from now on.
      notifyEventsCommitted();
      // Stopped already (while the bind was being recorded), or later.
      const stopped = new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true })));
      try {
        await Promise.race([closed, stopped]);
      } finally {
        clearInterval(keepAlive);
        unregisterSmppLink(this.channelId, link);
      }
      if (signal.aborted) {
        // What is being written is answered before the unbind.
        await Promise.allSettled([...inflight]);
        await closeBind(session);
      }
    }
  }

  const binds = new Map<string, Bind>();

  const read = (ids: string[]) =>
    db
      .select({ id: channels.id, sms: channels.sms, outboundSecret: channels.outboundSecret, status: channels.status, deletedAt: channels.deletedAt, type: channels.type })
      .from(channels)
      .where(inArray(channels.id, ids));

  async function pass() {
    const now = clock();
    await deleteStaleParts(db, new Date(now.getTime() - PART_TTL_MS)).catch(() => 0);
    await reconcileConnections<Awaited<ReturnType<typeof read>>[number], Bind>(leases, binds, now, maxChannels, {
      read,
      live: (row) => row.deletedAt === null && row.status !== 'disabled' && row.type === 'sms' && row.sms?.provider.kind === 'smpp',
      fingerprint,
      open: (row) => new Bind(row.id, fingerprint(row)),
    });
  }

  // Woken by this process's channel changes (a channel created or changed here is bound within a second).
  const loop = createWorkerLoop({ name: 'SMPP binds', pass, intervalMs: Math.max(200, Math.floor(leaseMs / 3)), wake: wakeOnChannelChanges, log });

  return {
    ...loop,
    async stop() {
      await loop.stop();
      // Another process binds the channels at its next pass rather than when the leases run out.
      await stopConnections(leases, binds);
    },
    held: () => [...binds.keys()],
    runOnce: pass,
  };
}
