import { Readable } from 'node:stream';
import { eq, sql } from 'drizzle-orm';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../core/clock.js';
import { AppError, toAppError } from '../core/errors.js';
import { ForbiddenAddressError } from '../core/outbound.js';
import type { Db } from '../db/client.js';
import { channels, mailOutbox, messages } from '../db/schema.js';
import { assertMailHostAllowed, describeError, tlsOptions, tlsRequired, type MailTarget } from '../modules/channels/channels.connect.js';
import { loadChannelCredentials, type ChannelCredentials } from '../modules/channels/channels.repository.js';
import { recordChannelOutcome, showChannelOutcome } from '../modules/channels/channel-health.js';
import { toChannel } from '../modules/channels/kinds.js';
import { signingKeyFor } from '../modules/domains/dkim.js';
import { CommittedWork } from '../modules/events/events.signal.js';
import { attachmentBytes } from '../modules/messages/messages.repository.js';
import { EMAIL_CREDENTIALS_FIX } from '../modules/channels/email/email.channels.js';
import { composeMail, envelopeRecipients } from '../modules/channels/email/outgoing-mail.js';
import { createQueue, messageOutbox, messageQueue } from '../modules/outbox.js';
import { createOutboxWorker, type OutboxWorker, type QueueWork } from './outbox-worker.js';

/**
 * Sends the outgoing email the sending operations queued (the `mail_outbox` table), through each
 * channel's SMTP relay, with nodemailer's SMTP client.
 *
 * Exactly one send per message, with any number of processes and across crashes:
 * - an attempt is claimed through the queue engine (`src/modules/outbox.ts`: `FOR UPDATE SKIP LOCKED`, a
 *   lease longer than the attempt can last), so two processes never send the same message at once; at most
 *   `PER_CHANNEL` attempts per channel and `PER_ORGANIZATION` per organization are under way (over all
 *   processes), the channels and organizations taking turns, so one organization's slow or dead relays hold
 *   at most its own share of a process's `MAX_IN_FLIGHT` attempts, each until its deadline;
 * - every attempt sends the same bytes but for the DKIM signature: the Message-ID and Date were fixed when
 *   the message was queued;
 * - the message data is streamed to the relay, and before the stream ends (the relay accepts a message only
 *   at the end of its data) the attempt records `transmitted_at` and commits. A process that dies before
 *   that point leaves nothing the relay could deliver, and the message is sent again when the lease runs
 *   out. A process that dies after it leaves a message the relay may or may not have accepted: it is never
 *   sent again, but marked failed with a reason that says so. At most once in that window (one round trip
 *   long), exactly once everywhere else: a customer never receives the same email twice.
 */

/** Waits before attempts 2, 3, …; a temporary failure after the last gives up. */
export const SEND_RETRY_DELAYS_MS = [30_000, 2 * 60_000, 10 * 60_000, 30 * 60_000, 60 * 60_000, 2 * 60 * 60_000, 4 * 60 * 60_000, 8 * 60 * 60_000];
export const MAX_SEND_ATTEMPTS = SEND_RETRY_DELAYS_MS.length + 1;
/** Attempts under way at once in one process, over all channels. */
export const MAX_IN_FLIGHT = 32;
/** Attempts under way at once per channel (over all processes, as the database counts them). */
export const PER_CHANNEL = 4;
/** Attempts under way at once per organization (over all processes, as the database counts them). */
export const PER_ORGANIZATION = 8;
/** After 1, 2, 3, … relay failures in a row, a channel sends nothing to its relay for this long. */
export const CHANNEL_PAUSE_MS = [0, 15_000, 60_000, 5 * 60_000, 15 * 60_000];
export const channelPause = (failures: number) => CHANNEL_PAUSE_MS[Math.min(failures, CHANNEL_PAUSE_MS.length) - 1] ?? 0;

export const UNKNOWN_OUTCOME =
  'Delivery outcome unknown: the sending stopped after the relay had received the whole message but before it confirmed. ' +
  'It is not sent again, so that it cannot arrive twice; the relay most likely delivered it.';

export interface MailSenderDeps {
  db: Db;
  clock: Clock;
  log: Pick<FastifyBaseLogger, 'error' | 'warn'>;
  /** Relays on private and loopback addresses may be reached (CHANNELS_ALLOW_PRIVATE). */
  allowPrivate: boolean;
  /** The longest an attempt may take (connection, greeting, authentication, transfer, answer); the lease is twice it. */
  sendTimeoutMs: number;
  /** The name the client gives in EHLO; default the machine's host name. */
  hostname?: string | undefined;
  pollMs?: number;
  random?: () => number;
}

type OutboxRow = typeof mailOutbox.$inferSelect;

/** How an attempt ended. */
type Outcome =
  | { kind: 'sent'; response: string; rejected: string[] }
  | { kind: 'retry'; error: string; relay?: boolean; login?: boolean }
  | { kind: 'failed'; error: string; relay?: boolean; login?: boolean }
  /** The process is stopping: the attempt gave its claim back before the relay had the whole message. */
  | { kind: 'released' };

/** An SMTP error with a status code: 5xx is a permanent refusal, 4xx a temporary one. */
const responseCodeOf = (err: unknown) => {
  const code = (err as { responseCode?: unknown })?.responseCode;
  return typeof code === 'number' ? code : undefined;
};

/** The SMTP client for one attempt through a channel's relay (every connection option in one place). */
async function relayConnection(
  outbound: NonNullable<ChannelCredentials['outbound']>,
  target: MailTarget,
  opts: { hostname?: string | undefined; sendTimeoutMs: number },
) {
  const stepMs = Math.min(15_000, Math.max(1000, Math.floor(opts.sendTimeoutMs / 2)));
  const { default: SMTPConnection } = await import('nodemailer/lib/smtp-connection'); // loaded on first use
  return new SMTPConnection({
    host: target.address,
    port: outbound.port,
    secure: outbound.secure,
    servername: target.servername,
    requireTLS: tlsRequired(outbound),
    tls: tlsOptions(outbound, target),
    ...(opts.hostname ? { name: opts.hostname } : {}),
    connectionTimeout: stepMs,
    greetingTimeout: stepMs,
    socketTimeout: opts.sendTimeoutMs,
    logger: false,
  });
}

/** Mail to send, as a queue of the queue engine: the claim, and the transmit step through the channel's relay. */
export function mailSending(deps: MailSenderDeps): QueueWork<OutboxRow> {
  const { db, clock } = deps;
  const queue = createQueue(db, messageQueue(mailOutbox, { leaseMs: deps.sendTimeoutMs * 2, retryDelaysMs: SEND_RETRY_DELAYS_MS, maxAttempts: MAX_SEND_ATTEMPTS }), deps.random);

  const outbox = messageOutbox(db, queue, clock, { unknownOutcome: UNKNOWN_OUTCOME });
  const fail = (row: OutboxRow, error: string) => outbox.fail([{ row, reason: error }]);

  /**
   * A relay that cannot be reached, fails its TLS or refuses the login puts the channel in `error`, with
   * `lastError` "relay: Sending through …" and, after repeated failures, a pause before the channel's next
   * attempt (`CHANNEL_PAUSE_MS`): its queued mail waits instead of each message trying a dead relay. The next
   * successful send makes the channel `active` again and clears the error (only a relay error: a failure of the
   * mailbox side stays until the mailbox works).
   */
  async function showOnChannel(channel: ChannelCredentials, outcome: Exclude<Outcome, { kind: 'released' }>) {
    if (outcome.kind !== 'sent' && !outcome.relay) return;
    const now = clock();
    if (outcome.kind === 'sent') {
      await showChannelOutcome(db, channel.id, { ok: true, side: 'relay', at: now }, { view: toChannel, relay: { sendFailures: 0, sendPausedUntil: null }, worthWhen: sql`send_failures > 0` });
      return;
    }
    const work = new CommittedWork();
    await db.transaction(async (tx) => {
      const [row] = await tx
        .update(channels)
        .set({ sendFailures: sql`${channels.sendFailures} + 1`, updatedAt: now } as never)
        .where(eq(channels.id, channel.id))
        .returning({ failures: channels.sendFailures });
      if (!row) return;
      const pauseMs = channelPause(row.failures);
      const until = pauseMs > 0 ? new Date(now.getTime() + pauseMs) : null;
      const note = row.failures > 1 ? ` (${row.failures} attempts in a row failed${until ? `; the next after ${until.toISOString()}` : ''})` : '';
      const error = `Sending through ${channel.outbound!.host}: ${outcome.error}`.slice(0, 700) + note;
      await recordChannelOutcome(tx, channel.id, { ok: false, side: 'relay', error, ...(outcome.login ? { fix: EMAIL_CREDENTIALS_FIX.relay } : {}) }, { view: toChannel, relay: { sendPausedUntil: until }, work });
    });
    work.announce();
  }

  /** Attempts under way in this process, and how to end each (for a stop). */
  let stopping = false;
  const open = new Set<() => void>();

  /** Commits "the whole message is with the relay" while this attempt still holds its lease; false when it lost it. */
  async function markTransmitted(row: OutboxRow): Promise<boolean> {
    return (await queue.markTransmitted(clock(), [row])).has(row.id);
  }

  /** The bytes of the message's attachments, by id (read when sending: the outbox row holds only their ids). */
  async function attachmentContents(row: OutboxRow): Promise<Map<string, Buffer>> {
    return attachmentBytes(db, row.messageId, (row.mail.attachments ?? []).map((a) => a.id));
  }

  /** One SMTP transaction through the channel's relay. */
  async function transmit(row: OutboxRow, channel: ChannelCredentials): Promise<Outcome> {
    const outbound = channel.outbound!;
    let target;
    try {
      target = await assertMailHostAllowed(outbound.host, { channelsAllowPrivate: deps.allowPrivate });
    } catch (err) {
      if (err instanceof ForbiddenAddressError) return { kind: 'failed', error: err.message, relay: true };
      return { kind: 'retry', error: `Could not resolve ${outbound.host}: ${describeError(err)}`, relay: true };
    }
    const domain = row.mail.from.email.slice(row.mail.from.email.lastIndexOf('@') + 1);
    let raw: Buffer;
    try {
      raw = await composeMail(row.mail, await signingKeyFor(db, row.organizationId, domain), await attachmentContents(row));
    } catch (err) {
      // The DKIM key cannot be read (its secrets key is gone) or cannot sign: no attempt would do better.
      if (toAppError(err).code === 'SERVICE_UNAVAILABLE') throw err;
      return { kind: 'failed', error: `DKIM signing failed for ${domain}: ${describeError(err)}` };
    }

    const connection = await relayConnection(outbound, target, { hostname: deps.hostname, sendTimeoutMs: deps.sendTimeoutMs });
    let transmitted = false;
    /** Until the login succeeded, a failure is the relay's (its address, TLS, credentials), not this message's. */
    let relayStage = true;
    // The whole attempt is bounded: when the time is up, the connection is closed and every step still
    // waiting fails at once (whether or not the client library calls back after a close).
    let expire!: (err: Error) => void;
    const expired = new Promise<never>((_resolve, reject) => (expire = reject));
    expired.catch(() => {});
    const step = <T>(work: Promise<T>) => Promise.race([work, expired]);
    const deadline = setTimeout(() => {
      expire(Object.assign(new Error(`The relay did not finish within ${deps.sendTimeoutMs} ms`), { code: 'ETIMEDOUT' }));
      connection.close();
    }, deps.sendTimeoutMs);
    // A refused connection or a failed TLS handshake is reported only as an `error` event (the callback of
    // `connect` is never called): it ends the attempt at once, with its real cause.
    connection.on('error', (err: Error) => expire(err));
    // A stop ends an attempt that has not handed over the whole message (see `stop`).
    const abort = () => {
      if (transmitted) return;
      expire(new Error('The service is stopping'));
      connection.close();
    };
    open.add(abort);
    try {
      await step(new Promise<void>((resolve, reject) => connection.connect((err) => (err ? reject(err) : resolve()))));
      if (outbound.username) {
        await step(
          new Promise<void>((resolve, reject) => connection.login({ user: outbound.username!, pass: outbound.password ?? '' }, (err) => (err ? reject(err) : resolve()))),
        );
      }
      relayStage = false;
      // The data, and before its end the commit of `transmitted_at`: see the comment at the top.
      let sentBody = false;
      const data = new Readable({
        read() {
          if (!sentBody) {
            sentBody = true;
            this.push(raw);
            return;
          }
          markTransmitted(row).then(
            (held) => {
              if (!held) return this.destroy(new Error('The attempt lost its claim before the end of the data; it was not completed'));
              transmitted = true;
              this.push(null);
            },
            (err: unknown) => this.destroy(err instanceof Error ? err : new Error(String(err))),
          );
        },
      });
      const info = await step(
        new Promise<{ response: string; rejected: string[] }>((resolve, reject) =>
          connection.send({ from: row.mail.from.email, to: envelopeRecipients(row.mail) }, data, (err, result) => (err || !result ? reject(err ?? new Error('No answer')) : resolve(result))),
        ),
      );
      connection.quit();
      return { kind: 'sent', response: info.response, rejected: info.rejected };
    } catch (err) {
      connection.close();
      if (stopping && !transmitted) return { kind: 'released' };
      const code = responseCodeOf(err);
      const error = code ? `The relay answered ${describeError(err)}` : describeError(err);
      const relay = relayStage;
      // The relay refused the login (535, or nodemailer's EAUTH): the channel's credentials are what to fix.
      const login = relay && (code === 535 || (err as { code?: unknown })?.code === 'EAUTH');
      if (code !== undefined && code >= 500) return { kind: 'failed', error, relay, login };
      if (code !== undefined) return { kind: 'retry', error, relay, login };
      if (transmitted) return { kind: 'failed', error: `${UNKNOWN_OUTCOME} (${error})` };
      return { kind: 'retry', error, relay };
    } finally {
      clearTimeout(deadline);
      open.delete(abort);
    }
  }

  async function attempt(row: OutboxRow): Promise<void> {
    const [message] = await db.select({ deletedAt: messages.deletedAt }).from(messages).where(eq(messages.id, row.messageId)).limit(1);
    // Deleting a queued message cancels its sending.
    if (!message || message.deletedAt) return fail(row, 'The message was deleted before it was sent');
    let channel: ChannelCredentials | undefined;
    try {
      channel = await loadChannelCredentials(db, row.channelId);
    } catch (err) {
      if (err instanceof AppError && err.code === 'NOT_FOUND') return fail(row, 'The channel was deleted before the message could be sent');
      throw err;
    }
    if (!channel.outbound) return fail(row, 'The channel has no outbound relay any more');
    if (channel.status === 'disabled') return fail(row, 'The channel is disabled');
    const outcome = await transmit(row, channel);
    if (outcome.kind === 'released') return release(row);
    await showOnChannel(channel, outcome);
    if (outcome.kind === 'sent') {
      const refused = outcome.rejected.length ? `Refused by the relay for ${outcome.rejected.join(', ')}` : null;
      return outbox.sent([{ row, providerMessageId: row.mail.messageId, note: refused }]);
    }
    if (outcome.kind === 'failed') return fail(row, outcome.error);
    await retryLater(row, outcome.error);
  }

  /** A temporary failure: the next attempt after the backoff, or failed once the attempts are used up. */
  const retryLater = (row: OutboxRow, error: string) => outbox.retryLater([row], error);

  /** Gives the claim of an attempt that has not transmitted back (pending again, the attempt not counted). */
  const release = (row: OutboxRow) => queue.release(clock(), [row]);

  /** One attempt; an unexpected failure is retried later. */
  const guarded = (row: OutboxRow) =>
    attempt(row).catch(async (err: unknown) => {
      if (toAppError(err).code === 'SERVICE_UNAVAILABLE') return; // the database is away: the lease brings the attempt back
      deps.log.error({ err, outboxId: row.id }, 'mail send attempt failed');
      await retryLater(row, 'The attempt failed unexpectedly').catch(() => {});
    });

  return {
    name: 'mail send',
    table: 'mail_outbox',
    maxInFlight: MAX_IN_FLIGHT,
    claim: (now, limit) =>
      queue.claim(now, {
        limit,
        mode: 'slots',
        perLane: PER_CHANNEL,
        perOrganization: PER_ORGANIZATION,
        // None for a channel whose relay is paused.
        where: sql`NOT EXISTS (SELECT 1 FROM ${channels} WHERE ${channels.id} = ${mailOutbox.channelId} AND ${channels.sendPausedUntil} > ${now})`,
      }),
    laneOf: (row) => row.channelId,
    // Each attempt at its relay's pace: a slow or dead relay holds only its own attempts, each until its deadline.
    run: async (rows) => void (await Promise.all(rows.map(guarded))),
    recover: outbox.recover,
    /** Attempts whose process died after the data was transmitted: the outcome is unknown, so they are not sent again. */
    settleAbandoned: (now) => outbox.settleAbandoned(now, 16),
    start() {
      stopping = false;
    },
    // Ends the attempts under way that have not handed the relay the whole message (their claims are given
    // back, so another process sends them at once); the others' answers are waited for.
    stop() {
      stopping = true;
      for (const close of open) close();
    },
    stopWaitMs: deps.sendTimeoutMs + 1000,
  };
}

export function createMailSender(deps: MailSenderDeps): OutboxWorker & { runOnce(): Promise<number> } {
  const worker = createOutboxWorker({ name: 'mail sender', db: deps.db, clock: deps.clock, log: deps.log, pollMs: deps.pollMs ?? 1000, queues: [mailSending(deps)] });
  return {
    ...worker,
    /** A pass that also waits for the attempts it started (tests, and the command line). */
    async runOnce() {
      const total = await worker.pass();
      await worker.idle();
      return total;
    },
  };
}
