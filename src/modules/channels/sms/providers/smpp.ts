import { randomInt } from 'node:crypto';
import { isIP } from 'node:net';
import smpp from 'smpp';
import { z } from 'zod';
import { ForbiddenAddressError } from '../../../../core/outbound.js';
import { assertMailHostAllowed, describeError } from '../../channels.connect.js';
import type { SmsProviderSettings } from '../../../../db/schema.js';
import { documentedByKind, ProviderHost, type ProviderWithSecret, type CheckStep, type OutgoingText, type ProviderContext, type SendOutcome, type SmsProvider, type SmsProviderDefinition, type StatusReport } from '../provider.js';
import { smsSize, splitText } from '../segments.js';

/**
 * SMPP 3.4 over the `smpp` package (its PDU codec and sessions; it neither splits nor joins long messages,
 * which is done here). One process holds a channel's transceiver bind (src/workers/smpp-binds.ts, a lease in
 * the database); it registers the bind here, and the text sender submits the channel's texts over it.
 */

/**
 * The largest PDU a session reads: SMPP carries up to 64 KB in a `message_payload` (its TLV length has 16
 * bits), plus the rest of the PDU. The package's own bound is 16,384 bytes, and a session that meets a PDU
 * past its bound stops reading (src/workers/smpp-binds.ts then binds again).
 */
export const MAX_PDU_BYTES = 0xffff + 1024;
smpp.PDU.maxLength = MAX_PDU_BYTES;

export interface SmppSettings {
  host: string;
  port: number;
  tls: boolean;
  systemId: string;
  password: string;
  systemType: string | null;
}

/** The SMSC answered a request with a command_status other than 0. */
export class SmppRefused extends Error {
  constructor(
    readonly what: string,
    readonly status: number,
  ) {
    super(`The SMSC refused the ${what}: ${statusName(status)}`);
  }
}

const NAMES = new Map(Object.entries(smpp.errors).map(([name, code]) => [code, name]));
const MEANINGS: Record<string, string> = {
  ESME_RINVPASWD: 'wrong password',
  ESME_RINVSYSID: 'unknown system id',
  ESME_RBINDFAIL: 'bind failed',
  ESME_RALYBND: 'already bound',
  ESME_RTHROTTLED: 'throttled',
  ESME_RMSGQFUL: 'queue full',
  ESME_RINVDSTADR: 'invalid destination address',
  ESME_RINVSRCADR: 'invalid source address',
  ESME_RSUBMITFAIL: 'submit failed',
  ESME_RSYSERR: 'system error',
  ESME_RX_T_APPN: 'temporary error',
};
/** "ESME_RINVPASWD (wrong password)", or the hex code of a status the package does not name. */
export function statusName(status: number): string {
  const name = NAMES.get(status);
  const hex = `0x${status.toString(16).padStart(8, '0')}`;
  return name ? `${name}${MEANINGS[name] ? ` (${MEANINGS[name]})` : ''}` : `command_status ${hex}`;
}

/** Refusals worth sending again later: throttling, a full queue, the SMSC's own temporary failures. */
const TEMPORARY = new Set([smpp.ESME_RTHROTTLED, smpp.ESME_RMSGQFUL, smpp.ESME_RX_T_APPN, smpp.ESME_RSYSERR]);
/** How long a throttled submit waits before the outbox tries again. */
export const THROTTLE_RETRY_MS = 5_000;

/** Waits for a PDU's answer; rejects when the connection closes first or after `timeoutMs`. */
function request(session: smpp.Session, command: 'bind_transceiver' | 'submit_sm' | 'unbind' | 'enquire_link', params: Record<string, unknown>, timeoutMs: number): Promise<smpp.PDU> {
  return new Promise((resolve, reject) => {
    const finish = (err: Error | undefined, pdu?: smpp.PDU) => {
      clearTimeout(timer);
      session.off('close', closed);
      if (err) reject(err);
      else resolve(pdu!);
    };
    const closed = () => finish(new Error('The SMSC closed the connection'));
    const timer = setTimeout(() => finish(new Error(`The SMSC did not answer the ${command} within ${timeoutMs} ms`)), timeoutMs);
    session.once('close', closed);
    const sent = session.send(new smpp.PDU(command, params), (pdu) => finish(undefined, pdu));
    if (!sent) finish(new NotSent('The connection to the SMSC is not open'));
  });
}

/** A request that never left (the socket was not writable): sending it again cannot send twice. */
export class NotSent extends Error {}

/**
 * Connects (TLS when `tls`) to the SMSC, on a public address unless `allowPrivate`, and binds as a
 * transceiver. Rejects with `SmppRefused` when the bind is refused, with the network error otherwise. The
 * session answered is paused: an SMSC delivers what it holds right after the bind, and nothing of it is read
 * until the caller has its handlers in place and resumes it.
 */
export async function openBind(settings: SmppSettings, ctx: ProviderContext): Promise<smpp.Session> {
  let target;
  try {
    target = await assertMailHostAllowed(settings.host, { channelsAllowPrivate: ctx.allowPrivate });
  } catch (err) {
    if (err instanceof ForbiddenAddressError) throw new ForbiddenAddressError(`${settings.host} resolves to a private, loopback or reserved address (set CHANNELS_ALLOW_PRIVATE=true to allow an SMSC on a private network)`);
    throw err;
  }
  const session = await new Promise<smpp.Session>((resolve, reject) => {
    const s = smpp.connect({ host: target.address, port: settings.port, tls: settings.tls, ...(settings.tls && !isIP(target.servername) ? { servername: target.servername } : {}) });
    const timer = setTimeout(() => fail(new Error(`No connection to ${settings.host}:${settings.port} within ${ctx.timeoutMs} ms`)), ctx.timeoutMs);
    const fail = (err: Error) => {
      clearTimeout(timer);
      s.destroy();
      reject(err);
    };
    // Errors also close the socket; the listener keeps one from being fatal.
    s.on('error', (err: Error) => fail(err));
    s.once('close', () => fail(new Error(`${settings.host}:${settings.port} closed the connection`)));
    s.once(settings.tls ? 'secureConnect' : 'connect', () => {
      clearTimeout(timer);
      s.removeAllListeners('close');
      s.removeAllListeners('error');
      s.on('error', () => {});
      resolve(s);
    });
  });
  // Paused as the answer is read, before the PDUs behind it in the same chunk.
  session.once('bind_transceiver_resp', () => session.pause());
  try {
    const answer = await request(
      session,
      'bind_transceiver',
      { system_id: settings.systemId, password: settings.password, system_type: settings.systemType ?? '', interface_version: 0x34 },
      ctx.timeoutMs,
    );
    if (answer.command_status !== 0) throw new SmppRefused('bind', answer.command_status);
    return session;
  } catch (err) {
    session.destroy();
    throw err;
  }
}

/** Whether the SMSC answers an enquire_link within `timeoutMs` (a connection that does not is dead). */
export const ping = (session: smpp.Session, timeoutMs: number): Promise<boolean> =>
  request(session, 'enquire_link', {}, timeoutMs).then(
    () => true,
    () => false,
  );

/** Ends a bind politely (unbind, then close), or at once when the SMSC does not answer within `timeoutMs`. */
export async function closeBind(session: smpp.Session, timeoutMs = 1000): Promise<void> {
  session.resume();
  await request(session, 'unbind', {}, timeoutMs).catch(() => {});
  await new Promise<void>((resolve) => {
    const timer = setTimeout(() => (session.destroy(), resolve()), timeoutMs);
    session.close(() => (clearTimeout(timer), resolve()));
  });
}

/** TON and NPI of an address: international numbers without their "+", alphanumeric sender ids as such. */
function address(value: string): { addr: string; ton: number; npi: number } {
  if (/^\+\d+$/.test(value)) return { addr: value.slice(1), ton: 1, npi: 1 };
  if (/^\d+$/.test(value)) return { addr: value, ton: value.length <= 8 ? 3 : 0, npi: 1 };
  return { addr: value, ton: 5, npi: 0 };
}

/**
 * Submits one text over a bound session: one submit_sm, or one per part of a long text (a UDH with an 8-bit
 * reference, `splitText`'s parts; data_coding 0 for GSM-7, 8 for UCS-2), each asking for a delivery receipt.
 * The first part's message_id names the message (its receipt updates it). A refusal of the first part fails
 * or retries the text; once a part is accepted the text is never sent again: a later part that is throttled
 * waits and is sent again (a few times), another refusal fails the text with the parts named.
 */
export async function submitText(session: smpp.Session, text: OutgoingText, timeoutMs: number, onAccepted?: (smscId: string) => void): Promise<SendOutcome> {
  const size = smsSize(text.text);
  const dataCoding = size.encoding === 'GSM-7' ? 0 : 8;
  const parts = size.segments > 1 ? splitText(text.text, size.encoding) : [text.text];
  const ref = randomInt(256);
  const source = address(text.from);
  const dest = address(text.to);
  let firstId: string | undefined;
  for (let i = 0; i < parts.length; i++) {
    const short_message = parts.length > 1 ? { udh: Buffer.from([0x05, 0x00, 0x03, ref, parts.length, i + 1]), message: parts[i]! } : parts[i]!;
    const params = {
      source_addr: source.addr,
      source_addr_ton: source.ton,
      source_addr_npi: source.npi,
      destination_addr: dest.addr,
      dest_addr_ton: dest.ton,
      dest_addr_npi: dest.npi,
      esm_class: parts.length > 1 ? 0x40 : 0,
      registered_delivery: 1,
      data_coding: dataCoding,
      short_message,
    };
    const partName = parts.length > 1 ? ` (part ${i + 1} of ${parts.length}; the parts before it were sent)` : '';
    let answer: smpp.PDU | undefined;
    for (let tries = 0; ; tries++) {
      try {
        answer = await request(session, 'submit_sm', params, timeoutMs);
      } catch (err) {
        const message = describeError(err);
        if (err instanceof NotSent && i === 0) return { kind: 'retry', error: `The SMSC could not be reached: ${message}` };
        // The submit_sm left and no answer came: the SMSC may have taken it.
        return { kind: 'unknown', error: `${message}${partName}` };
      }
      if (answer.command_status !== smpp.ESME_RTHROTTLED || i === 0 || tries >= 3) break;
      await new Promise((resolve) => setTimeout(resolve, 500 * 2 ** tries));
    }
    const status = answer.command_status;
    if (status !== 0) {
      const error = `The SMSC refused the text: ${statusName(status)}${partName}`;
      if (i === 0 && TEMPORARY.has(status)) return { kind: 'retry', error, ...(status === smpp.ESME_RTHROTTLED ? { retryAfterMs: THROTTLE_RETRY_MS } : {}) };
      return { kind: 'failed', error, code: NAMES.get(status) ?? `0x${status.toString(16)}` };
    }
    const id = String(answer.message_id ?? '').replace(/\0/g, '').trim();
    if (i === 0) {
      if (!id) return { kind: 'unknown', error: 'The SMSC accepted the text without a message_id' };
      firstId = id;
      onAccepted?.(id);
    }
  }
  return { kind: 'sent', providerMessageId: firstId! };
}

// ------------------------------------------------------------------ what arrives

/** The states of a delivery receipt (the `stat:` word, or the message_state TLV) in the service's four. */
const RECEIPT_STATES: Record<string, StatusReport['status']> = {
  DELIVRD: 'delivered',
  UNDELIV: 'failed',
  REJECTD: 'failed',
  EXPIRED: 'failed',
  DELETED: 'failed',
  ACCEPTD: 'sent',
  ENROUTE: 'sent',
};
/** message_state TLV values (SMPP 3.4 §5.2.28) as the receipt text names them. */
const MESSAGE_STATE = ['', 'ENROUTE', 'DELIVRD', 'EXPIRED', 'DELETED', 'UNDELIV', 'ACCEPTD', 'UNKNOWN', 'REJECTD', 'SKIPPED'];

const cstring = (v: unknown) => (typeof v === 'string' ? v : Buffer.isBuffer(v) ? v.toString('latin1') : '').replace(/\0/g, '').trim();

/** The text of a deliver_sm's short_message (or message_payload), as the package decoded it. */
function messageOf(pdu: smpp.PDU): { text: string; udh: Buffer[] } {
  const decoded = (v: unknown): { text: string; udh: Buffer[] } | undefined => {
    if (typeof v === 'string') return { text: v, udh: [] };
    if (Buffer.isBuffer(v)) return v.length ? { text: v.toString('latin1'), udh: [] } : undefined;
    if (v && typeof v === 'object' && 'message' in v) {
      const m = (v as smpp.DecodedMessage).message;
      const text = typeof m === 'string' ? m : Buffer.isBuffer(m) ? m.toString('latin1') : '';
      const udh = (v as smpp.DecodedMessage).udh ?? [];
      return text || udh.length ? { text, udh } : undefined;
    }
    return undefined;
  };
  return decoded(pdu.short_message) ?? decoded(pdu.message_payload) ?? { text: '', udh: [] };
}

/** Whether a deliver_sm is a delivery receipt (esm_class: SMSC delivery receipt or intermediate notification). */
export const isReceipt = (pdu: smpp.PDU) => ((Number(pdu.esm_class) || 0) & 0x24) !== 0;

/** A delivery receipt's report (by `receipted_message_id` and message_state, else the `id:… stat:…` text); undefined when it names no id or no known state. */
export function parseReceipt(pdu: smpp.PDU): StatusReport | undefined {
  const text = messageOf(pdu).text;
  const id = cstring(pdu.receipted_message_id) || /\bid:\s*([^\s]+)/i.exec(text)?.[1] || '';
  const state = typeof pdu.message_state === 'number' ? MESSAGE_STATE[pdu.message_state] : /\bstat:\s*([A-Z]+)/i.exec(text)?.[1]?.toUpperCase();
  const status = state ? RECEIPT_STATES[state] : undefined;
  if (!id || !state || !status) return undefined;
  const err = /\berr:\s*([0-9A-Za-z]+)/i.exec(text)?.[1];
  return { providerMessageId: id, status, errorCode: err && !/^0+$/.test(err) ? err : null, raw: state };
}

/**
 * The forms an SMSC's message id may take elsewhere: SMSCs give it in hex in one place and in decimal in the
 * other (the submit_sm_resp and the receipt), with or without leading zeros, in either case.
 */
export function messageIdForms(id: string): string[] {
  const forms = new Set([id, id.toLowerCase(), id.toUpperCase()]);
  const bare = id.replace(/^0+(?=.)/, '');
  forms.add(bare).add(bare.toLowerCase()).add(bare.toUpperCase());
  if (/^\d{1,40}$/.test(id)) {
    const hex = BigInt(id).toString(16);
    forms.add(hex).add(hex.toUpperCase());
  }
  if (/^[0-9a-f]{1,32}$/i.test(id)) {
    const dec = BigInt(`0x${id}`).toString(10);
    forms.add(dec).add(dec.padStart(10, '0'));
  }
  return [...forms];
}

export interface IncomingPart {
  from: string;
  to: string;
  text: string;
  /** Set for a part of a long message: its reference, the number of parts, its number (from 1). */
  part?: { ref: number; total: number; seq: number };
}

/** An address as received: "+" and the digits when its TON is international. */
const received = (addr: unknown, ton: unknown) => {
  const value = cstring(addr);
  return Number(ton) === 1 && /^\d+$/.test(value) ? `+${value}` : value;
};

/** A received text (not a receipt): its parties, its text, and where it is a part of a long message (UDH IEI 0 or 8, or the sar_* TLVs). */
export function parseIncoming(pdu: smpp.PDU): IncomingPart {
  const { text, udh } = messageOf(pdu);
  const base = { from: received(pdu.source_addr, pdu.source_addr_ton), to: received(pdu.destination_addr, pdu.dest_addr_ton), text };
  for (const ie of udh) {
    if (ie[0] === 0x00 && ie[1] === 3 && ie.length >= 5) return { ...base, part: { ref: ie[2]!, total: ie[3]!, seq: ie[4]! } };
    if (ie[0] === 0x08 && ie[1] === 4 && ie.length >= 6) return { ...base, part: { ref: ie.readUInt16BE(2), total: ie[4]!, seq: ie[5]! } };
  }
  const total = Number(pdu.sar_total_segments);
  const seq = Number(pdu.sar_segment_seqnum);
  if (total > 1 && seq >= 1) return { ...base, part: { ref: Number(pdu.sar_msg_ref_num) || 0, total, seq } };
  return base;
}

// ------------------------------------------------------------------ the binds of this process

/** A bind held by this process: submits texts over it. */
export interface SmppLink {
  submit(text: OutgoingText, timeoutMs: number): Promise<SendOutcome>;
}

const links = new Map<string, SmppLink>();
export const registerSmppLink = (channelId: string, link: SmppLink) => void links.set(channelId, link);
export const unregisterSmppLink = (channelId: string, link: SmppLink) => void (links.get(channelId) === link && links.delete(channelId));
/** The channels whose bind this process holds now: the text sender sends only their SMPP texts. */
export const boundSmppChannels = (): string[] => [...links.keys()];

export function smppProvider(settings: SmppSettings, channelId: string | undefined): SmsProvider {
  return {
    name: 'smpp',
    async send(text: OutgoingText, ctx: ProviderContext): Promise<SendOutcome> {
      const link = channelId ? links.get(channelId) : undefined;
      if (!link) return { kind: 'retry', error: "The channel's SMPP bind is not up in this process" };
      return link.submit(text, ctx.timeoutMs);
    },
    async check(ctx: ProviderContext): Promise<CheckStep[]> {
      const where = `${settings.host}:${settings.port}${settings.tls ? ' (TLS)' : ''}`;
      let session: smpp.Session;
      try {
        session = await openBind(settings, ctx);
      } catch (err) {
        if (err instanceof SmppRefused) return [{ step: 'connect', ok: true, detail: `Connected to ${where}` }, { step: 'bind', ok: false, detail: `${err.message} (system id "${settings.systemId}")` }];
        return [{ step: 'connect', ok: false, detail: `${where}: ${describeError(err)}` }];
      }
      await closeBind(session);
      return [
        { step: 'connect', ok: true, detail: `Connected to ${where}` },
        { step: 'bind', ok: true, detail: `Bound as a transceiver with system id "${settings.systemId}", then unbound` },
      ];
    },
  };
}

// ------------------------------------------------------------------ the provider's definition

const smppFields = {
  kind: z.literal('smpp').describe('SMPP 3.4 bind (docs/sms.md)'),
  host: ProviderHost,
  port: z.number().int().min(1).max(65535).default(2775).describe('SMPP port; default 2775'),
  tls: z.boolean().default(true).describe('TLS to the SMSC; default true'),
  systemId: z.string().min(1).max(15),
  systemType: z.string().max(12).optional(),
};

/**
 * SMPP (`{"kind": "smpp", "host", "port", "tls", "systemId", "password", "systemType"?}`, CONTRACT §9): the
 * documents show only its `kind`, to keep the tool list small (docs/sms.md has the rest); the request is
 * checked against `SmppProviderSettings`, its errors standing at their own fields under `provider`.
 */
export const SmppProviderSettings = z.strictObject({ ...smppFields, password: z.string().min(1).max(8).describe('Write-only, encrypted') });


const smppStored = (s: SmsProviderSettings) => s as unknown as Omit<SmppSettings, 'password'>;

/** An SMPP channel's bind settings, its password included. */
export const smppSettingsOf = (provider: ProviderWithSecret): SmppSettings => ({ ...smppStored(provider), password: provider.secret });

export const smppDefinition: SmsProviderDefinition = {
  kind: 'smpp',
  schema: documentedByKind(smppFields.kind, SmppProviderSettings),
  output: {
    host: z.string().optional(),
    port: z.number().int().optional(),
    tls: z.boolean().optional(),
    systemId: z.string().optional(),
    systemType: z.string().nullable().optional(),
    passwordSet: z.boolean().optional().describe('SMPP: whether a password is stored (never returned)'),
  },
  store: (input) => {
    const p = input as z.output<typeof SmppProviderSettings>;
    return { settings: { kind: 'smpp', host: p.host, port: p.port, tls: p.tls, systemId: p.systemId, systemType: p.systemType ?? null }, secret: p.password, field: 'password' };
  },
  json: (settings, secretSet) => ({ ...settings, passwordSet: secretSet }),
  name: () => 'smpp',
  open: (settings, channelId) => smppProvider(smppSettingsOf(settings), channelId),
  credentialsFix: 'the SMSC refused the bind: check provider.systemId, provider.password and provider.systemType (PATCH /v1/channels/{id})',
  label: 'SMPP',
  receiving: "Texts and receipts arrive over the channel's bind, held by one server process",
};
