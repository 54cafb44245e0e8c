import type { AddressInfo } from 'node:net';
import type { Readable } from 'node:stream';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { FastifyBaseLogger } from 'fastify';
import type { DnsResolver } from 'mailauth';
import { SMTPServer, type SMTPServerAddress, type SMTPServerSession } from 'smtp-server';
import type { Clock } from '../core/clock.js';
import { isDatabaseUnavailable } from '../core/errors.js';
import { createLimiter } from '../core/rate-limit.js';
import type { Db } from '../db/client.js';
import { ChannelGone, ChannelUnavailable, type ChannelRow } from '../modules/channels/channels.repository.js';
import { failureReason, MailBusy, MailRefused, readReceivedEmail, writeReceivedEmail, type InboundDeps } from '../modules/channels/email/inbound.js';
import { recordInboundFailure, smtpFingerprint } from '../modules/channels/email/inbound-failures.js';
import { reserveParse, type ParsePlace } from '../modules/channels/email/parse-pool.js';
import { runOperation } from '../run-operation.js';
import { createAddressBook, ipKey } from './smtp-addresses.js';
import { createPacer, type PacedTurn, type PacingSettings } from './smtp-pacing.js';

/**
 * The built-in SMTP receiver (`SMTP_PORT`): the service's own MX. It accepts mail only for the addresses
 * of active inbound-SMTP channels (every other recipient is 550: it never relays), bounds message size,
 * connections and messages per IP, offers STARTTLS when given a certificate, and answers 250 only once the
 * message is committed with its events (451 when it cannot be, so that the sending server tries again).
 */

export interface SmtpReceiverOptions {
  db: Db;
  log: Pick<FastifyBaseLogger, 'info' | 'warn' | 'error'>;
  port: number;
  host: string;
  /** The name the receiver greets with and records in authentication results. */
  serverName?: string | undefined;
  maxBytes: number;
  /** PEM certificate and key: STARTTLS is offered when both are given. */
  tls?: { cert: string | Buffer; key: string | Buffer } | undefined;
  maxConnections: number;
  maxConnectionsPerIp: number;
  /** Messages one IP address may send per minute; 0: no limit. */
  ratePerMinute: number;
  attachmentMaxBytes: number;
  resolver?: DnsResolver | undefined;
  clock?: Clock | undefined;
  /** Recipients one message may name. */
  maxRecipients?: number;
  /** The longest reading one message may take (ms); default EMAIL_PARSE_TIMEOUT_MS. */
  parseTimeoutMs?: number | undefined;
  /** RCPT commands one IP address (an IPv6 /64) may give per minute, accepted or refused; 0: no limit (SMTP_RCPT_RATE_LIMIT). */
  rcptPerMinute?: number | undefined;
  /** Refused commands after which the connection is closed (SMTP_MAX_ERRORS); default 20. */
  maxErrors?: number | undefined;
  /** The longest one DATA may take in all (SMTP_DATA_TIMEOUT_MS); default 10 minutes. */
  dataTimeoutMs?: number | undefined;
  /** The slowest DATA waited for, in bytes per second from its start (SMTP_DATA_MIN_RATE); default 500, 0: none. */
  dataMinRate?: number | undefined;
  /** How long DATA may go before the minimum rate applies; default 10 s. */
  dataGraceMs?: number | undefined;
  /**
   * The longest a connection may go between commands that make progress (connect, MAIL, RCPT, the end of a
   * DATA) outside a DATA; default 60 s. A client that trickles its commands a byte at a time keeps the
   * socket's idle timeout from firing, as in DATA.
   */
  commandTimeoutMs?: number | undefined;
  /** How often the live addresses are read again for changes made by other processes; default 10 s. */
  addressRefreshMs?: number | undefined;
  /** How one address's costly mail is paced (`smtp-pacing.ts`); defaults: a quarter of the main thread. */
  pacing?: Partial<PacingSettings> | undefined;
}

export interface SmtpReceiver {
  /** Starts listening; resolves with the bound address (port 0 picks a free one). */
  listen(): Promise<AddressInfo>;
  /** Stops accepting connections and waits (a few seconds at most) for those open. */
  stop(): Promise<void>;
}

/** An SMTP reply as smtp-server sends it: the error's message with its `responseCode`. */
const reply = (code: number, message: string) => Object.assign(new Error(message), { responseCode: code });

interface SessionState {
  channels: Map<string, ChannelRow>;
  /** Refused commands on this connection. */
  errors: number;
  /** When the connection last made progress (see `commandTimeoutMs`). */
  progressAt: number;
  /** A DATA is being received: its own deadline and rate apply. */
  inData: boolean;
  /** The place held in the reading queue for the message announced by the last MAIL FROM. */
  place?: ParsePlace | undefined;
  /** The address's turn taken by the last MAIL FROM (see `smtp-pacing.ts`), given back with its message's cost. */
  turn?: PacedTurn | undefined;
  /** The connection closed. */
  closed?: boolean;
}

/** The client whose emails are read one at a time: its address (an IPv6 address by its /64, as for the rates). */
const readerOf = (session: SMTPServerSession) => `smtp:${ipKey(session.remoteAddress)}`;

/** How often a DATA in progress is checked against its deadline and minimum rate. */
const DATA_CHECK_MS = 250;

export function createSmtpReceiver(opts: SmtpReceiverOptions): SmtpReceiver {
  const perIp = new Map<string, number>();
  /** The sessions counted in `perIp` (smtp-server calls onClose for refused connections too). */
  const counted = new WeakSet<SMTPServerSession>();
  const limiter = opts.ratePerMinute > 0 ? createLimiter({ name: 'smtp', points: opts.ratePerMinute, durationSeconds: 60 }) : undefined;
  const sessions = new WeakMap<SMTPServerSession, SessionState>();
  const stateOf = (session: SMTPServerSession) => {
    let s = sessions.get(session);
    if (!s) sessions.set(session, (s = { channels: new Map(), errors: 0, progressAt: Date.now(), inData: false }));
    return s;
  };
  const maxRecipients = opts.maxRecipients ?? 100;
  const maxErrors = opts.maxErrors ?? 20;
  const dataTimeoutMs = opts.dataTimeoutMs ?? 600_000;
  const dataMinRate = opts.dataMinRate ?? 500;
  const dataGraceMs = opts.dataGraceMs ?? 10_000;
  const commandTimeoutMs = opts.commandTimeoutMs ?? 60_000;
  const progressed = (session: SMTPServerSession) => (stateOf(session).progressAt = Date.now());
  const rcptLimiter = (opts.rcptPerMinute ?? 600) > 0 ? createLimiter({ name: 'smtp-rcpt', points: opts.rcptPerMinute ?? 600, durationSeconds: 60 }) : undefined;
  const pacer = createPacer(opts.pacing);
  const addresses = createAddressBook(opts.db, { refreshMs: opts.addressRefreshMs, onError: (err) => isDatabaseUnavailable(err) || opts.log.error({ reason: failureReason(err) }, 'SMTP receiver: the addresses could not be read') });

  /** A refused command: counted, and the connection closed (421) at the limit, as Postfix's smtpd_hard_error_limit. */
  const refuse = (session: SMTPServerSession, code: number, message: string) => {
    const state = stateOf(session);
    state.errors++;
    return state.errors >= maxErrors ? reply(421, 'Too many refused commands; closing the connection') : reply(code, message);
  };

  /** Ends a connection from outside its commands (a DATA too slow or too long): a 421 closes it. */
  const connections = () => (server as unknown as { connections: Set<{ session: SMTPServerSession; send(code: number, text: string): void }> }).connections;
  const drop = (session: SMTPServerSession, message: string) => {
    for (const c of connections()) if (c.session === session) c.send(421, message);
  };
  /** Closes connections whose commands stalled (see `commandTimeoutMs`); DATA has its own watch. */
  let sweep: NodeJS.Timeout | undefined;
  const sweepStalled = () => {
    const now = Date.now();
    for (const c of [...connections()]) {
      const state = sessions.get(c.session);
      if (state && !state.inData && now - state.progressAt > commandTimeoutMs) c.send(421, `No command completed in ${Math.round(commandTimeoutMs / 1000)} s; closing the connection`);
    }
  };

  const server = new SMTPServer({
    name: opts.serverName,
    banner: 'Switchboard ESMTP',
    size: opts.maxBytes,
    authOptional: true,
    // Nobody logs in to a receiver: it takes mail for its own addresses only.
    disabledCommands: opts.tls ? ['AUTH'] : ['AUTH', 'STARTTLS'],
    ...(opts.tls ? { key: opts.tls.key, cert: opts.tls.cert } : {}),
    secure: false,
    maxClients: opts.maxConnections,
    socketTimeout: 60_000,
    closeTimeout: 1_000, // a stop ends open sessions (421) after this: the whole stop takes at most 3 s
    logger: false,
    // The client's name from reverse DNS is used nowhere, and waiting on it per connection made every
    // client's greeting wait behind one address's flood of connections (the lookups queue at the resolver).
    disableReverseLookup: true,

    onConnect(session, callback) {
      const ip = session.remoteAddress;
      const open = perIp.get(ip) ?? 0;
      if (open >= opts.maxConnectionsPerIp) return callback(reply(421, 'Too many connections from your address; try again later'));
      perIp.set(ip, open + 1);
      counted.add(session);
      progressed(session);
      callback();
    },

    onClose(session) {
      const closing = sessions.get(session);
      if (closing) {
        closing.closed = true;
        closing.place?.release();
        closing.turn?.done(0);
        closing.turn = undefined;
      }
      if (!counted.delete(session)) return;
      const ip = session.remoteAddress;
      const open = (perIp.get(ip) ?? 1) - 1;
      if (open <= 0) perIp.delete(ip);
      else perIp.set(ip, open);
    },

    onMailFrom(_address, session, callback) {
      const state = stateOf(session);
      state.channels.clear();
      state.place?.release();
      state.place = undefined;
      state.turn?.done(0);
      state.turn = undefined;
      progressed(session);
      const admit = (turn: PacedTurn) => {
        // The message's place in the reading queue is taken now, before it is sent: when the queue or the
        // address's share of it is full, the message is refused (451) before any of its bytes are read.
        const place = reserveParse(readerOf(session));
        if (typeof place === 'string') {
          turn.done(0);
          state.turn = undefined;
          return callback(reply(451, `${place}; try again later`));
        }
        state.place = place;
        if (!limiter) return callback();
        limiter.consume(session.remoteAddress).then(
          (res) => {
            if (res.allowed) return callback();
            place.release();
            turn.done(0);
            state.turn = undefined;
            callback(reply(450, `Too many messages from your address; try again in ${res.retryAfter} s`));
          },
          () => callback(),
        );
      };
      // An address whose last message cost the main thread much waits here, before its next one is sent,
      // until its share of the main thread is back (see smtp-pacing.ts); other addresses never wait.
      void pacer.turn(readerOf(session)).then((turn) => {
        if (!turn) return callback(reply(451, 'Your earlier mail is still being handled; try again later'));
        if (state.closed) return turn.done(0);
        state.turn = turn;
        progressed(session);
        admit(turn);
      });
    },

    onRcptTo(address: SMTPServerAddress, session, callback) {
      const state = stateOf(session);
      progressed(session);
      if (state.channels.size >= maxRecipients) return callback(refuse(session, 452, 'Too many recipients'));
      // Every RCPT counts toward the IP's rate, accepted or refused: probing for addresses costs the prober.
      const allowed = rcptLimiter ? rcptLimiter.consume(ipKey(session.remoteAddress)) : Promise.resolve({ allowed: true as const });
      allowed
        .then((rate) => {
          if (!rate.allowed) return callback(refuse(session, 450, `Too many recipients from your address; try again in ${rate.retryAfter} s`));
          return addresses.lookup(address.address).then((found) => {
            if (found.length === 0) return callback(refuse(session, 550, `No mailbox here by that name: ${address.address.slice(0, 320)}`));
            for (const c of found) state.channels.set(c.id, c);
            callback();
          });
        })
        .catch(
        (err: unknown) => {
          if (err instanceof ChannelUnavailable) return callback(reply(451, err.message));
          if (!isDatabaseUnavailable(err)) opts.log.error({ reason: failureReason(err) }, 'SMTP receiver: recipient look-up failed');
          callback(reply(451, 'Temporary failure; try again later'));
        },
      );
    },

    onData(stream: Readable & { sizeExceeded?: boolean }, session, reply250OrError) {
      let answered = false;
      const callback: typeof reply250OrError = (err, message) => {
        if (answered) return;
        answered = true;
        Object.assign(stateOf(session), { inData: false, progressAt: Date.now() });
        reply250OrError(err, message);
      };
      const chunks: Buffer[] = [];
      let size = 0;
      stateOf(session).inData = true;
      // A deadline for the whole DATA and a minimum rate after its first seconds (slow-loris senders hold
      // connection slots otherwise: a byte every 25 s keeps the socket's idle timeout from ever firing).
      const started = Date.now();
      const watch = setInterval(() => {
        const elapsed = Date.now() - started;
        const slow = dataMinRate > 0 && elapsed > dataGraceMs && size < (dataMinRate * elapsed) / 1000;
        if (elapsed <= dataTimeoutMs && !slow) return;
        clearInterval(watch);
        drop(session, slow ? `Data too slow: under ${dataMinRate} bytes per second` : `Data took longer than ${Math.round(dataTimeoutMs / 1000)} s`);
      }, Math.min(DATA_CHECK_MS, dataGraceMs));
      watch.unref();
      stream.on('close', () => clearInterval(watch));
      stream.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size <= opts.maxBytes) chunks.push(chunk);
      });
      // The message's place in the reading queue stays with the session (given back when it closes) until the
      // message is handed to its reading.
      const state = stateOf(session);
      stream.on('error', () => {
        state.place?.release();
        state.turn?.done(pacer.cost(0, size));
        state.turn = undefined;
        callback(reply(451, 'Temporary failure; try again later'));
      });
      stream.on('end', () => {
        clearInterval(watch);
        const place = state.place;
        state.place = undefined;
        const turn = state.turn;
        state.turn = undefined;
        if (size > opts.maxBytes || stream.sizeExceeded) {
          place?.release();
          turn?.done(pacer.cost(0, size));
          return callback(reply(552, `Message too large: at most ${opts.maxBytes} bytes`));
        }
        const raw = Buffer.concat(chunks);
        const channels = [...state.channels.values()];
        deliver(raw, channels, session, place, turn).then(
          (ids) => callback(null, `Message accepted as ${ids.join(', ')}`),
          (err: unknown) => {
            if (err instanceof MailRefused) return callback(reply(err.permanent ? 554 : 451, `${err.message}${err.permanent ? '' : '; try again later'}`));
            callback(reply(451, 'Temporary failure storing the message; try again later'));
          },
        );
      });
    },
  });

  // A broken connection or a client speaking nonsense is that client's problem: logged, never fatal.
  server.on('error', (err) => opts.log.warn({ err }, 'SMTP receiver: connection error'));

  const inbound: InboundDeps = { db: opts.db, run: runOperation, resolver: opts.resolver, clock: opts.clock, attachmentMaxBytes: opts.attachmentMaxBytes, mta: opts.serverName, parseTimeoutMs: opts.parseTimeoutMs };

  /** Reads the message once, then writes it once per channel named; resolves only when all are committed. */
  async function deliver(raw: Buffer, channels: ChannelRow[], session: SMTPServerSession, place: ParsePlace | undefined, turn: PacedTurn | undefined): Promise<string[]> {
    // What the message cost the main thread is its address's to pay: its writes' wall time and its bytes.
    let writeMs = 0;
    try {
      return await deliverPaced(raw, channels, session, place, (ms) => (writeMs += ms));
    } finally {
      turn?.done(pacer.cost(writeMs, raw.length));
    }
  }

  async function deliverPaced(raw: Buffer, channels: ChannelRow[], session: SMTPServerSession, place: ParsePlace | undefined, wrote: (ms: number) => void): Promise<string[]> {
    const envelope = { remoteAddress: session.remoteAddress, helo: session.hostNameAppearsAs, mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : undefined };
    try {
      const read = await readReceivedEmail(inbound, raw, 'smtp', envelope, readerOf(session), place);
      const ids: string[] = [];
      for (const [i, channel] of channels.entries()) {
        // One channel's write at a time, each in its own turn of the event loop: the embedded database runs
        // on this thread and settles its statements at once, so the writes for many channels would otherwise
        // run as one stretch that nothing else (a request, another connection) could come between.
        if (i > 0) await nextTurn();
        const writing = performance.now();
        try {
          ids.push((await writeReceivedEmail(inbound, channel, read, 'smtp')).messageId);
        } catch (err) {
          // Deleted since its RCPT was accepted: nothing is stored for it (the others still get the message).
          if (!(err instanceof ChannelGone)) throw err;
        } finally {
          wrote(performance.now() - writing);
        }
      }
      if (ids.length === 0) throw new ChannelGone();
      return ids;
    } catch (err) {
      // The readers were busy (451 at once): no fault of the message's, nothing counted against it.
      if (isDatabaseUnavailable(err) || err instanceof MailBusy) throw err;
      if (err instanceof ChannelGone) throw new MailRefused(true, 'No mailbox here by that name any more');
      // Counted per channel: the third failure the same way (or a permanent refusal) gives the message up, with a 554.
      const reason = failureReason(err);
      const fingerprint = smtpFingerprint(raw);
      let givenUp = err instanceof MailRefused && err.permanent;
      for (const channel of channels) {
        const failure = await recordInboundFailure(opts.db, { organizationId: channel.organizationId, channelId: channel.id, provider: 'smtp', fingerprint, reason, raw, permanent: givenUp }).catch(() => undefined);
        if (failure?.notImportable) givenUp = true;
      }
      opts.log.warn({ reason, givenUp, channels: channels.map((c) => c.id) }, 'SMTP receiver: a message could not be imported');
      throw new MailRefused(givenUp, givenUp ? `${reason}; the message cannot be imported` : reason);
    }
  }

  return {
    listen: () =>
      new Promise<AddressInfo>((resolve, reject) => {
        server.server.once('error', reject);
        server.listen(opts.port, opts.host, () => {
          server.server.off('error', reject);
          sweep = setInterval(sweepStalled, Math.min(DATA_CHECK_MS * 4, commandTimeoutMs));
          sweep.unref();
          resolve(server.server.address() as AddressInfo);
        });
      }),
    stop: () =>
      new Promise<void>((resolve) => {
        addresses.stop();
        clearInterval(sweep);
        if (!server.server.listening) return resolve();
        server.close(() => resolve());
      }),
  };
}
