import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SMTPServer, type SMTPServerAuthentication, type SMTPServerDataStream, type SMTPServerSession } from 'smtp-server';

/**
 * A real SMTP server (`smtp-server`) on 127.0.0.1 that plays the relay a channel sends through: it requires
 * AUTH (PLAIN or LOGIN, no TLS on loopback), and records every message it accepts with its envelope. Its
 * answers can be scripted per step, to play temporary and permanent refusals, or to hold an answer while a
 * test kills the sender.
 */

export interface RelayedMessage {
  from: string;
  to: string[];
  user: string;
  raw: Buffer;
}

/** An SMTP refusal: `code` 4xx (temporary) or 5xx (permanent). */
export interface Refusal {
  code: number;
  message: string;
}

export interface RelayScript {
  /** Before answering AUTH (after the password was checked): may wait (e.g. for a test to kill the client). */
  beforeAuth?: () => Promise<void> | void;
  /** A refusal of RCPT TO for this address, or undefined to accept it. */
  rcpt?: (address: string) => Refusal | undefined;
  /**
   * Once the whole message has arrived: a refusal (the message is not kept), or undefined to accept it. The
   * message is recorded before this runs when `recordFirst` is set (a relay that queued it and is slow to say so).
   */
  data?: (message: RelayedMessage) => Promise<Refusal | undefined> | Refusal | undefined;
  recordFirst?: boolean;
}

export interface Relay {
  host: string;
  port: number;
  user: string;
  pass: string;
  received: RelayedMessage[];
  /** AUTH attempts seen (accepted or not). */
  logins: number;
  script: RelayScript;
  /** Resolves once `n` messages were accepted, or rejects after `timeoutMs`. */
  waitFor(n: number, timeoutMs?: number): Promise<RelayedMessage[]>;
  close(): Promise<void>;
}

const refusalError = (r: Refusal) => Object.assign(new Error(r.message), { responseCode: r.code });

/**
 * `tls`: the relay offers STARTTLS with this certificate and key (e.g. self-signed: `selfSignedCertificate`);
 * without it, it offers no STARTTLS at all. `implicitTls`: TLS from the first byte (port 465 style) instead.
 */
export async function startRelay(opts: { user?: string; pass?: string; tls?: { key: string | Buffer; cert: string | Buffer }; implicitTls?: { key: string | Buffer; cert: string | Buffer } } = {}): Promise<Relay> {
  const user = opts.user ?? 'relay-user';
  const pass = opts.pass ?? 'relay-pass-123';
  const relay: Relay = {
    host: '127.0.0.1',
    port: 0,
    user,
    pass,
    received: [],
    logins: 0,
    script: {},
    async waitFor(n, timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs;
      while (relay.received.length < n) {
        if (Date.now() > deadline) throw new Error(`the relay received ${relay.received.length} of ${n} messages`);
        await new Promise((r) => setTimeout(r, 25));
      }
      return relay.received;
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };

  const server = new SMTPServer({
    ...(opts.implicitTls
      ? { secure: true, key: opts.implicitTls.key, cert: opts.implicitTls.cert, disabledCommands: ['STARTTLS'] }
      : opts.tls
        ? { secure: false, key: opts.tls.key, cert: opts.tls.cert }
        : { secure: false, disabledCommands: ['STARTTLS'] }),
    allowInsecureAuth: true,
    authMethods: ['PLAIN', 'LOGIN'],
    logger: false,
    size: 10 * 1024 * 1024,
    onAuth(auth: SMTPServerAuthentication, _session: SMTPServerSession, callback) {
      relay.logins++;
      if (auth.username !== user || auth.password !== pass) return callback(Object.assign(new Error('Invalid username or password'), { responseCode: 535 }));
      Promise.resolve(relay.script.beforeAuth?.()).then(
        () => callback(null, { user: auth.username }),
        (err: Error) => callback(err),
      );
    },
    onRcptTo(address, _session, callback) {
      const refusal = relay.script.rcpt?.(address.address);
      callback(refusal ? refusalError(refusal) : null);
    },
    onData(stream: SMTPServerDataStream, session: SMTPServerSession, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        if (stream.sizeExceeded) return callback(Object.assign(new Error('Message too big'), { responseCode: 552 }));
        const message: RelayedMessage = {
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          user: String(session.user ?? ''),
          raw: Buffer.concat(chunks),
        };
        if (relay.script.recordFirst) relay.received.push(message);
        Promise.resolve(relay.script.data?.(message)).then(
          (refusal) => {
            if (refusal) return callback(refusalError(refusal));
            if (!relay.script.recordFirst) relay.received.push(message);
            callback(null, 'Queued');
          },
          (err: Error) => callback(err),
        );
      });
    },
  });
  server.on('error', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  relay.port = (server.server.address() as AddressInfo).port;
  return relay;
}

/** A header of a raw message (unfolded), or undefined. */
export function headerOf(raw: Buffer, name: string): string | undefined {
  const head = raw.toString('utf8').split(/\r?\n\r?\n/)[0]!.replace(/\r?\n[ \t]+/g, ' ');
  const line = head.split(/\r?\n/).find((l) => l.toLowerCase().startsWith(`${name.toLowerCase()}:`));
  return line?.slice(name.length + 1).trim();
}

/** A loopback port nothing listens on: a connection to it is refused (ECONNREFUSED). */
export async function refusedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A server that accepts connections and never says a word (a hung relay); `connections` counts them. */
export async function startHangingServer(): Promise<{ port: number; connections: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    hanging.connections++;
    sockets.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const hanging = {
    port: (server.address() as AddressInfo).port,
    connections: 0,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return hanging;
}

/** A self-signed certificate for 127.0.0.1 and localhost (openssl), valid for a day: `{ key, cert }` in PEM. */
export function selfSignedCertificate(): { key: string; cert: string } {
  const dir = mkdtempSync(join(tmpdir(), 'sb-cert-'));
  try {
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=localhost',
      '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost',
      '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
    ], { stdio: 'ignore' });
    return { key: readFileSync(join(dir, 'key.pem'), 'utf8'), cert: readFileSync(join(dir, 'cert.pem'), 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
