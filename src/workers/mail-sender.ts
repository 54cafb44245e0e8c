import { Readable } from 'node:stream';
import { and, eq, gt, inArray, sql } from 'drizzle-orm';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../core/clock.js';
import { AppError, toAppError } from '../core/errors.js';
import type { ActorType } from '../core/operation.js';
import { ForbiddenAddressError } from '../core/outbound.js';
import type { Db, DbOrTx } from '../db/client.js';
import { channels, mailOutbox, messages } from '../db/schema.js';
import { assertMailHostAllowed, describeError, tlsOptions, tlsRequired } from '../modules/channels/channels.connect.js';
import { loadChannelCredentials, type ChannelCredentials } from '../modules/channels/channels.repository.js';
import { signingKeyFor } from '../modules/domains/dkim.js';
import { recordEvents } from '../modules/events/events.recorder.js';
import { CommittedWork, onEventsCommitted } from '../modules/events/events.signal.js';
import { getMessage } from '../modules/messages/messages.repository.js';
import { composeMail, envelopeRecipients } from '../modules/messages/outgoing-mail.js';
import { sendingOperations } from '../modules/messages/sending.operations.js';
import { createWorkerLoop, type WorkerLoop } from './loop.js';

/** The operations that queue mail: a commit of one wakes the sender (other writes leave it to its polling). */
const QUEUEING = new Set<string>(sendingOperations.map((op) => op.id));

/**
 * Sends the outgoing email the sending operations queued (the `mail_outbox` table), through each
 * channel's SMTP relay, with nodemailer's SMTP client.
 *
 * Exactly one send per message, with any number of processes and across crashes:
 * - an attempt is claimed in the database (`FOR UPDATE SKIP LOCKED`, a lease longer than the attempt can
 *   last), so two processes never send the same message at once;
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
const BATCH = 16;

export const UNKNOWN_OUTCOME =
  'Delivery outcome unknown: the sending stopped after the relay had received the whole message but before it confirmed. ' +
  'It is not sent again, so that it cannot arrive twice; the relay most likely delivered it.';

export function sendRetryDelay(attempt: number, random: () => number = Math.random): number {
  const base = SEND_RETRY_DELAYS_MS[attempt - 1] ?? SEND_RETRY_DELAYS_MS.at(-1)!;
  return Math.round(base * (0.9 + 0.2 * random()));
}

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
  | { kind: 'retry'; error: string; relay?: boolean }
  | { kind: 'failed'; error: string; relay?: boolean };

/** An SMTP error with a status code: 5xx is a permanent refusal, 4xx a temporary one. */
const responseCodeOf = (err: unknown) => {
  const code = (err as { responseCode?: unknown })?.responseCode;
  return typeof code === 'number' ? code : undefined;
};

export function createMailSender(deps: MailSenderDeps): WorkerLoop & { runOnce(): Promise<number> } {
  const { db, clock } = deps;
  const leaseMs = deps.sendTimeoutMs * 2;

  const mine = (row: OutboxRow) => and(eq(mailOutbox.id, row.id), eq(mailOutbox.status, 'sending'), eq(mailOutbox.attempt, row.attempt));

  /** Records the message's new status and its event (the sender's actor), in `tx`; the event goes to `work`. */
  async function settleMessage(tx: DbOrTx, row: OutboxRow, status: 'sent' | 'failed', reason: string | null, now: Date, work: CommittedWork) {
    await tx
      .update(messages)
      .set({ status, statusReason: reason, updatedAt: now, ...(status === 'sent' ? { providerMessageId: row.mail.messageId } : {}) })
      .where(eq(messages.id, row.messageId));
    const data = await getMessage(tx, row.organizationId, row.messageId).catch(() => null);
    if (!data) return; // deleted meanwhile: no event for a message nobody can read
    const type = status === 'sent' ? 'message.sent' : 'message.failed';
    const recorded = await recordEvents(tx, { type: row.actorType as ActorType, id: row.actorId, depth: row.depth }, [
      { type, organizationId: row.organizationId, resourceId: row.messageId, data },
    ]);
    work.add({ ...recorded, types: [type] });
  }

  async function fail(row: OutboxRow, error: string, where = mine(row)) {
    const now = clock();
    const work = new CommittedWork();
    await db.transaction(async (tx) => {
      const [updated] = await tx
        .update(mailOutbox)
        .set({ status: 'failed', lastError: error, leaseUntil: null, updatedAt: now })
        .where(where)
        .returning({ id: mailOutbox.id });
      if (updated) await settleMessage(tx, row, 'failed', error, now, work);
    });
    work.announce();
  }

  /**
   * A relay that cannot be reached or refuses the login shows on the channel as its `lastError` ("Sending
   * through …"), which the next successful send clears (and only that error). The `status` is left alone:
   * it tells whether the channel receives, and a broken relay does not stop it from receiving.
   */
  async function showOnChannel(channel: ChannelCredentials, outcome: Outcome) {
    const prefix = `Sending through ${channel.outbound!.host}: `;
    if (outcome.kind !== 'sent' && !outcome.relay) return;
    const lastError = outcome.kind === 'sent' ? null : `${prefix}${outcome.error}`.slice(0, 1000);
    await db
      .update(channels)
      .set({ lastError, updatedAt: clock() })
      .where(and(eq(channels.id, channel.id), outcome.kind === 'sent' ? sql`${channels.lastError} LIKE 'Sending through %'` : undefined));
  }

  /** Attempts whose process died after the data was transmitted: the outcome is unknown, so they are not sent again. */
  async function settleAbandoned(now: Date): Promise<number> {
    const rows = await db
      .select()
      .from(mailOutbox)
      .where(and(eq(mailOutbox.status, 'sending'), sql`${mailOutbox.leaseUntil} <= ${now}`, sql`${mailOutbox.transmittedAt} IS NOT NULL`))
      .limit(BATCH);
    for (const row of rows) await fail(row, UNKNOWN_OUTCOME, and(mine(row), sql`${mailOutbox.leaseUntil} <= ${now}`));
    return rows.length;
  }

  async function claim(now: Date): Promise<OutboxRow[]> {
    return db.transaction(async (tx) => {
      const due = await tx
        .select({ id: mailOutbox.id })
        .from(mailOutbox)
        .where(
          sql`((${mailOutbox.status} = 'pending' AND ${mailOutbox.nextAttemptAt} <= ${now})
               OR (${mailOutbox.status} = 'sending' AND ${mailOutbox.leaseUntil} <= ${now} AND ${mailOutbox.transmittedAt} IS NULL))`,
        )
        .orderBy(mailOutbox.nextAttemptAt, mailOutbox.createdAt)
        .limit(BATCH)
        .for('update', { skipLocked: true });
      if (due.length === 0) return [];
      return tx
        .update(mailOutbox)
        .set({ status: 'sending', leaseUntil: new Date(now.getTime() + leaseMs), attempt: sql`${mailOutbox.attempt} + 1`, transmittedAt: null, updatedAt: now })
        .where(inArray(mailOutbox.id, due.map((d) => d.id)))
        .returning();
    });
  }

  /** Commits "the whole message is with the relay" while this attempt still holds its lease; false when it lost it. */
  async function markTransmitted(row: OutboxRow): Promise<boolean> {
    const now = clock();
    const [updated] = await db
      .update(mailOutbox)
      .set({ transmittedAt: now, updatedAt: now })
      .where(and(mine(row), gt(mailOutbox.leaseUntil, now)))
      .returning({ id: mailOutbox.id });
    return Boolean(updated);
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
      raw = await composeMail(row.mail, await signingKeyFor(db, row.organizationId, domain));
    } catch (err) {
      // The DKIM key cannot be read (its secrets key is gone) or cannot sign: no attempt would do better.
      if (toAppError(err).code === 'SERVICE_UNAVAILABLE') throw err;
      return { kind: 'failed', error: `DKIM signing failed for ${domain}: ${describeError(err)}` };
    }

    const stepMs = Math.min(15_000, Math.max(1000, Math.floor(deps.sendTimeoutMs / 2)));
    const { default: SMTPConnection } = await import('nodemailer/lib/smtp-connection'); // loaded on first use
    const connection = new SMTPConnection({
      host: target.address,
      port: outbound.port,
      secure: outbound.secure,
      servername: target.servername,
      requireTLS: tlsRequired(outbound),
      tls: tlsOptions(outbound, target),
      ...(deps.hostname ? { name: deps.hostname } : {}),
      connectionTimeout: stepMs,
      greetingTimeout: stepMs,
      socketTimeout: deps.sendTimeoutMs,
      logger: false,
    });
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
    connection.on('error', () => {}); // reported through the callbacks
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
      const code = responseCodeOf(err);
      const error = code ? `The relay answered ${describeError(err)}` : describeError(err);
      const relay = relayStage;
      if (code !== undefined && code >= 500) return { kind: 'failed', error, relay };
      if (code !== undefined) return { kind: 'retry', error, relay };
      if (transmitted) return { kind: 'failed', error: `${UNKNOWN_OUTCOME} (${error})` };
      return { kind: 'retry', error, relay };
    } finally {
      clearTimeout(deadline);
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
    const now = clock();
    await showOnChannel(channel, outcome);
    if (outcome.kind === 'sent') {
      const refused = outcome.rejected.length ? `Refused by the relay for ${outcome.rejected.join(', ')}` : null;
      const work = new CommittedWork();
      await db.transaction(async (tx) => {
        const [updated] = await tx
          .update(mailOutbox)
          .set({ status: 'sent', sentAt: now, leaseUntil: null, lastError: refused, updatedAt: now })
          .where(mine(row))
          .returning({ id: mailOutbox.id });
        if (updated) await settleMessage(tx, row, 'sent', refused, now, work);
      });
      work.announce();
      return;
    }
    if (outcome.kind === 'failed') return fail(row, outcome.error);
    await retryLater(row, outcome.error);
  }

  /** A temporary failure: the next attempt after the backoff, or failed once the attempts are used up. */
  async function retryLater(row: OutboxRow, error: string) {
    const now = clock();
    if (row.attempt >= MAX_SEND_ATTEMPTS) return fail(row, `Gave up after ${row.attempt} attempts; the last: ${error}`);
    await db
      .update(mailOutbox)
      .set({ status: 'pending', lastError: error, leaseUntil: null, transmittedAt: null, nextAttemptAt: new Date(now.getTime() + sendRetryDelay(row.attempt, deps.random)), updatedAt: now })
      .where(mine(row));
  }

  async function runOnce(): Promise<number> {
    let total = await settleAbandoned(clock());
    for (let round = 0; round < 20; round++) {
      const claimed = await claim(clock());
      if (claimed.length === 0) break;
      await Promise.all(
        claimed.map((row) =>
          attempt(row).catch(async (err: unknown) => {
            if (toAppError(err).code === 'SERVICE_UNAVAILABLE') return; // the database is away: the lease brings the attempt back
            deps.log.error({ err, outboxId: row.id }, 'mail send attempt failed');
            await retryLater(row, 'The attempt failed unexpectedly').catch(() => {});
          }),
        ),
      );
      total += claimed.length;
    }
    return total;
  }

  const loop = createWorkerLoop({ name: 'mail sender', pass: runOnce, intervalMs: deps.pollMs ?? 1000, wake: (kick) => onEventsCommitted(kick, (c) => c.operation !== undefined && QUEUEING.has(c.operation)), wakeDelayMs: 10, log: deps.log });
  return { ...loop, runOnce };
}
