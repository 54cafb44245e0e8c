import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { rootCertificates } from 'node:tls';
import type { ImapFlow } from 'imapflow';
import { ForbiddenAddressError, isPublicAddress } from '../../core/outbound.js';
import type { ChannelCredentials } from './channels.repository.js';

/**
 * Mail servers a channel connects to are chosen by its users, so they are reached like webhook endpoints:
 * on public addresses only, checked on the very address connected to (the host name is resolved once, the
 * address checked, and the connection made to that address with the name kept for TLS), unless
 * `CHANNELS_ALLOW_PRIVATE=true` (a LAN mail server, tests).
 */
const policy = { allowPrivate: false };
export const setChannelPolicy = (p: { allowPrivate: boolean }) => void (policy.allowPrivate = p.allowPrivate);
export const channelPolicy = (): Readonly<typeof policy> => policy;

export interface MailTarget {
  /** The IP address to connect to. */
  address: string;
  /** The host name as configured: the TLS server name (SNI and certificate check). */
  servername: string;
}

/**
 * Resolves a mail server's host and answers the address to connect to; throws ForbiddenAddressError when
 * it is private, loopback, link-local or reserved and `allowPrivate` is off.
 */
export async function assertMailHostAllowed(host: string, config: { channelsAllowPrivate: boolean } = { channelsAllowPrivate: policy.allowPrivate }): Promise<MailTarget> {
  const bare = host.replace(/^\[|\]$/g, '');
  const addresses = isIP(bare) ? [{ address: bare }] : await lookup(bare, { all: true });
  const allowed = config.channelsAllowPrivate ? addresses : addresses.filter((a) => isPublicAddress(a.address));
  if (allowed.length === 0) {
    throw new ForbiddenAddressError(`${host} resolves to a private, loopback or reserved address (set CHANNELS_ALLOW_PRIVATE=true to allow a mail server on a private network)`);
  }
  return { address: allowed[0]!.address, servername: bare };
}

const TIMEOUT_MS = 10_000;

export interface CheckStep {
  step: string;
  ok: boolean;
  detail: string | null;
}
export interface CheckResult {
  ok: boolean;
  steps: CheckStep[];
  error: string | null;
}

/** Runs steps in order until one throws; the answer lists what worked and what failed. */
async function check(steps: [string, () => Promise<string | null | void>][]): Promise<CheckResult> {
  const done: CheckStep[] = [];
  for (const [step, run] of steps) {
    try {
      const detail = await run();
      done.push({ step, ok: true, detail: detail ?? null });
    } catch (err) {
      const error = describeError(err);
      done.push({ step, ok: false, detail: error });
      return { ok: false, steps: done, error: `${step}: ${error}` };
    }
  }
  return { ok: true, steps: done, error: null };
}

/** A mail library's error as one line for a person, without stack or credentials. */
export function describeError(err: unknown): string {
  const e = err as { message?: unknown; code?: unknown; responseText?: unknown; response?: unknown; authenticationFailed?: unknown };
  if (e?.authenticationFailed) return `Authentication failed${typeof e.responseText === 'string' ? `: ${e.responseText}` : ''}`;
  const parts = [typeof e?.message === 'string' ? e.message : String(err)];
  if (typeof e?.responseText === 'string' && !parts[0]!.includes(e.responseText)) parts.push(e.responseText);
  else if (typeof e?.response === 'string' && !parts[0]!.includes(e.response)) parts.push(e.response);
  if (typeof e?.code === 'string' && !parts.join(' ').includes(e.code)) parts.push(`(${e.code})`);
  return parts.join(' ').replace(/\s+/g, ' ').slice(0, 500);
}

/**
 * The TLS options of a connection to a channel's server: the name the certificate must carry, the channel's
 * own trusted certificate (`ca`, added to the system's authorities), and whether it is checked at all.
 */
export function tlsOptions(settings: { tls?: 'required' | 'none'; ca?: string | null; verifyCertificate?: boolean }, target: MailTarget) {
  return {
    servername: target.servername,
    ...(settings.ca ? { ca: [...rootCertificates, settings.ca] } : {}),
    ...(settings.verifyCertificate === false ? { rejectUnauthorized: false } : {}),
  };
}

/** Whether a connection must be encrypted before anything (a password, mail) is sent: unless `tls` is "none". */
export const tlsRequired = (settings: { tls?: 'required' | 'none' }) => settings.tls !== 'none';

/** Options for an ImapFlow connection to a channel's server (the address already checked). */
export function imapOptions(inbound: ChannelCredentials['inbound'], target: MailTarget) {
  const secure = inbound.secure ?? true;
  return {
    host: target.address,
    port: inbound.port ?? 993,
    secure,
    // Without TLS from the start, STARTTLS is required (no login in clear) unless the channel says "none".
    ...(!secure && tlsRequired(inbound) ? { doSTARTTLS: true } : {}),
    servername: target.servername,
    tls: tlsOptions(inbound, target),
    auth: { user: inbound.username ?? '', pass: inbound.password ?? '' },
    logger: false as const,
    connectionTimeout: TIMEOUT_MS,
    greetingTimeout: TIMEOUT_MS,
    socketTimeout: 30_000,
    disableAutoIdle: true,
  };
}

/** Options for a nodemailer SMTP transport through a channel's relay (the address already checked). */
export function smtpOptions(outbound: NonNullable<ChannelCredentials['outbound']>, target: MailTarget) {
  return {
    host: target.address,
    port: outbound.port,
    secure: outbound.secure,
    name: undefined,
    requireTLS: tlsRequired(outbound),
    tls: tlsOptions(outbound, target),
    ...(outbound.username ? { auth: { user: outbound.username, pass: outbound.password ?? '' } } : {}),
    connectionTimeout: TIMEOUT_MS,
    greetingTimeout: TIMEOUT_MS,
    socketTimeout: 30_000,
  };
}

export async function testImap(inbound: ChannelCredentials['inbound'], allowPrivate: boolean): Promise<CheckResult> {
  let target: MailTarget | undefined;
  let client: ImapFlow | undefined;
  try {
    return await check([
      ['resolve', async () => (target = await assertMailHostAllowed(inbound.host ?? '', { channelsAllowPrivate: allowPrivate })).address],
      [
        'login',
        async () => {
          const { ImapFlow } = await import('imapflow'); // loaded on first use: a process without IMAP channels does not hold it
          client = new ImapFlow(imapOptions(inbound, target!));
          client.on('error', () => {});
          await client.connect();
          return `Logged in as ${inbound.username}`;
        },
      ],
      [
        'mailbox',
        async () => {
          const status = await client!.status(inbound.mailbox ?? 'INBOX', { messages: true });
          return `${inbound.mailbox ?? 'INBOX'}: ${(status && status.messages) ?? 0} messages`;
        },
      ],
    ]);
  } finally {
    if (client) await client.logout().catch(() => client?.close());
  }
}

export async function testSmtp(outbound: NonNullable<ChannelCredentials['outbound']>, allowPrivate: boolean, sign?: () => Promise<string>): Promise<CheckResult> {
  let target: MailTarget | undefined;
  return check([
    // Signing first: a DKIM key that cannot be read (its secrets key is gone) fails every send, whatever the relay.
    ...(sign ? [['sign', sign] as [string, () => Promise<string>]] : []),
    ['resolve', async () => (target = await assertMailHostAllowed(outbound.host, { channelsAllowPrivate: allowPrivate })).address],
    [
      outbound.username ? 'login' : 'greeting',
      async () => {
        // verify(): connects, reads the greeting, EHLO, STARTTLS when offered, and AUTH when credentials are given.
        const { default: nodemailer } = await import('nodemailer'); // loaded on first use
        const transport = nodemailer.createTransport(smtpOptions(outbound, target!));
        try {
          await transport.verify();
        } finally {
          transport.close();
        }
        return outbound.username ? `Greeting read and logged in as ${outbound.username}` : 'Greeting read';
      },
    ],
  ]);
}

/** POST /channels/{id}/test: each configured server, what worked and what failed. */
export async function testChannel(channel: ChannelCredentials, allowPrivate: boolean, sign?: () => Promise<string>) {
  const inbound =
    channel.inbound.mode === 'imap'
      ? { mode: 'imap' as const, ...(await testImap(channel.inbound, allowPrivate)) }
      : {
          mode: 'smtp' as const,
          ...(channel.status === 'disabled'
            ? { ok: false, steps: [{ step: 'receive', ok: false, detail: 'The channel is disabled' }], error: 'receive: the channel is disabled: the SMTP receiver refuses its address' }
            : { ok: true, steps: [{ step: 'receive', ok: true, detail: 'The SMTP receiver accepts mail for this address' }], error: null }),
        };
  const outbound = channel.outbound ? await testSmtp(channel.outbound, allowPrivate, sign) : null;
  return { ok: inbound.ok && (outbound?.ok ?? true), inbound, outbound };
}
