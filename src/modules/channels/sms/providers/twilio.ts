import { createHmac, timingSafeEqual } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { z } from 'zod';
import { OutboundProblem, outboundRequest, retryAfterMs } from '../../../../core/outbound.js';
import { fetchMedia } from '../../media.js';
import type { SmsProviderSettings } from '../../../../db/schema.js';
import { HttpUrl, WriteOnly, type CheckStep, type HookResult, type IncomingText, type OutgoingText, type ProviderContext, type ProviderWebhook, type SendOutcome, type SmsProvider, type SmsProviderDefinition, type StatusReport, type WebhookCall } from '../provider.js';

/**
 * Twilio's Programmable Messaging REST API, and the APIs that copy it (SignalWire's LaML): one POST per text
 * (`{base}/2010-04-01/Accounts/{sid}/Messages.json`, form-encoded, basic auth), webhooks signed with
 * `X-Twilio-Signature`. Written on the service's outbound request (no SDK: the `twilio` package is 16 MB
 * for one POST and one HMAC).
 */

export const TWILIO_BASE_URL = 'https://api.twilio.com';

export interface TwilioSettings {
  accountSid: string;
  authToken: string;
  apiBaseUrl: string;
  messagingServiceSid: string | null;
}

/** Each base URL's flavour, found once: it is asked for every text a channel receives (its messages' `providerName`). */
const flavours = new LRUCache<string, 'twilio' | 'signalwire'>({ max: 1000 });
/** "signalwire" for SignalWire's hosts, else "twilio" (Twilio and any other compatible API). */
export function twilioFlavour(apiBaseUrl: string): 'twilio' | 'signalwire' {
  let flavour = flavours.get(apiBaseUrl);
  if (!flavour) flavours.set(apiBaseUrl, (flavour = /(^|\.)signalwire\.com$/i.test(safeHost(apiBaseUrl)) ? 'signalwire' : 'twilio'));
  return flavour;
}
const safeHost = (url: string) => {
  try {
    return new URL(url).hostname;
  } catch {
    return '';
  }
};

/**
 * Twilio's request signature: base64 HMAC-SHA1, keyed with the auth token, of the full URL followed by
 * every POST parameter's name and value, sorted by name (a repeated name: each value, in order).
 */
export function twilioSignature(authToken: string, url: string, params: Record<string, string | string[]>): string {
  let data = url;
  for (const name of Object.keys(params).sort()) {
    const value = params[name]!;
    for (const v of Array.isArray(value) ? value : [value]) data += name + v;
  }
  return createHmac('sha1', authToken).update(data, 'utf8').digest('base64');
}

/** Whether `signature` is the request's, compared in constant time. */
export function validTwilioSignature(authToken: string, url: string, params: Record<string, string | string[]>, signature: string | undefined): boolean {
  if (!signature) return false;
  const expected = Buffer.from(twilioSignature(authToken, url, params));
  const given = Buffer.from(signature);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

const one = (params: Record<string, string | string[]>, name: string): string => {
  const v = params[name];
  return (Array.isArray(v) ? v[0] : v) ?? '';
};

/** An incoming-message webhook's text, or undefined when it names no message. */
export function parseTwilioInbound(params: Record<string, string | string[]>): IncomingText | undefined {
  const sid = one(params, 'MessageSid') || one(params, 'SmsSid');
  if (!sid) return undefined;
  const count = Math.min(10, Number.parseInt(one(params, 'NumMedia') || '0', 10) || 0);
  const media = Array.from({ length: count }, (_, i) => ({ url: one(params, `MediaUrl${i}`), contentType: one(params, `MediaContentType${i}`) || null })).filter((m) => m.url);
  return { providerMessageId: sid, from: one(params, 'From'), to: one(params, 'To'), text: one(params, 'Body'), media };
}

/** Twilio's message states, in the service's four: queued → sent → delivered, or failed. */
const STATES: Record<string, StatusReport['status']> = {
  accepted: 'queued',
  scheduled: 'queued',
  queued: 'queued',
  sending: 'queued',
  sent: 'sent',
  delivered: 'delivered',
  read: 'delivered',
  undelivered: 'failed',
  failed: 'failed',
  canceled: 'failed',
};

/** A status callback's report, or undefined when it names no message or no known state. */
export function parseTwilioStatus(params: Record<string, string | string[]>): StatusReport | undefined {
  const sid = one(params, 'MessageSid') || one(params, 'SmsSid');
  const raw = (one(params, 'MessageStatus') || one(params, 'SmsStatus')).toLowerCase();
  const status = STATES[raw];
  if (!sid || !status) return undefined;
  return { providerMessageId: sid, status, errorCode: one(params, 'ErrorCode') || null, raw };
}

/** Network failures that happen before a request leaves: sending again cannot send twice. */
const NOT_SENT = /ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH|certificate|self.signed|CERT_/i;

export function twilioProvider(settings: TwilioSettings): SmsProvider {
  const base = settings.apiBaseUrl.replace(/(?<!\/)\/+$/, '');
  const account = encodeURIComponent(settings.accountSid);
  const auth = `Basic ${Buffer.from(`${settings.accountSid}:${settings.authToken}`).toString('base64')}`;
  const request = (ctx: ProviderContext, method: 'GET' | 'POST', path: string, body?: string) =>
    outboundRequest(`${base}${path}`, {
      method,
      headers: { authorization: auth, accept: 'application/json', ...(body !== undefined ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
      ...(body !== undefined ? { body } : {}),
      allowInsecure: ctx.allowPrivate,
      insecureSetting: 'CHANNELS_ALLOW_PRIVATE',
      timeoutMs: ctx.timeoutMs,
      maxBytes: 64 * 1024,
      overflow: 'truncate',
    });

  return {
    name: twilioFlavour(base),
    async send(text: OutgoingText, ctx: ProviderContext): Promise<SendOutcome> {
      const form = new URLSearchParams({ To: text.to, Body: text.text, StatusCallback: text.statusCallback });
      if (settings.messagingServiceSid) form.set('MessagingServiceSid', settings.messagingServiceSid);
      else form.set('From', text.from);
      let answer;
      try {
        answer = await request(ctx, 'POST', `/2010-04-01/Accounts/${account}/Messages.json`, form.toString());
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        if (err instanceof OutboundProblem && err.kind === 'forbidden') return { kind: 'failed', error: message };
        if (err instanceof OutboundProblem && err.kind === 'network' && NOT_SENT.test(message)) return { kind: 'retry', error: `Could not reach the provider: ${message}` };
        // A timeout or a connection lost after the request left: the provider may have accepted the text.
        return { kind: 'unknown', error: message };
      }
      const json = parseJson(answer.body);
      if (answer.status >= 200 && answer.status < 300) {
        const sid = typeof json?.sid === 'string' ? json.sid : undefined;
        if (!sid) return { kind: 'unknown', error: `The provider answered ${answer.status} without a message sid` };
        return { kind: 'sent', providerMessageId: sid };
      }
      const code = json?.code !== undefined && json.code !== null ? String(json.code) : undefined;
      const detail = `The provider answered ${answer.status}${code ? ` (error ${code})` : ''}${typeof json?.message === 'string' ? `: ${json.message.slice(0, 300)}` : ''}`;
      if (answer.status === 429 || answer.status >= 500) return { kind: 'retry', error: detail, retryAfterMs: retryAfterMs(answer.headers['retry-after']) };
      // 401, or Twilio's 20003 ("Authenticate"): the account sid or auth token is wrong (or the account suspended).
      // 21610: the recipient unsubscribed (texted STOP to the carrier).
      return { kind: 'failed', error: detail, code, ...(answer.status === 401 || code === '20003' ? { credentials: true } : {}), ...(code === '21610' ? { unsubscribed: true } : {}) };
    },
    // Media URLs are on the API host (a 307 to Twilio's CDN follows): credentials for that origin only.
    fetchMedia: (url, ctx) =>
      fetchMedia(url, { trustedOrigin: new URL(base).origin, authorization: auth, allowPrivate: ctx.allowPrivate, timeoutMs: ctx.timeoutMs, maxBytes: ctx.maxBytes }),
    async check(ctx: ProviderContext): Promise<CheckStep[]> {
      try {
        const answer = await request(ctx, 'GET', `/2010-04-01/Accounts/${account}.json`);
        if (answer.status === 200) return [{ step: 'account', ok: true, detail: `The account ${settings.accountSid} answered with these credentials` }];
        const json = parseJson(answer.body);
        return [{ step: 'account', ok: false, detail: `The provider answered ${answer.status}${typeof json?.message === 'string' ? `: ${json.message.slice(0, 300)}` : ''}` }];
      } catch (err) {
        return [{ step: 'connect', ok: false, detail: err instanceof Error ? err.message : String(err) }];
      }
    },
  };
}

function parseJson(body: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(body);
    return v && typeof v === 'object' ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

// ------------------------------------------------------------------ the provider's definition

/** The request's fields of a Twilio-compatible provider (SignalWire's file reuses them). */
export const twilioFields = {
  accountSid: z.string().trim().min(1).max(64).describe('Account (project) id'),
  apiBaseUrl: HttpUrl.default(TWILIO_BASE_URL).describe('Default "https://api.twilio.com"'),
  messagingServiceSid: z.string().trim().min(1).max(64).optional().describe('Send through this messaging service'),
  authToken: WriteOnly(500),
};

/** A Twilio-compatible provider's stored settings. */
export interface TwilioStored {
  kind: string;
  accountSid: string;
  apiBaseUrl: string;
  messagingServiceSid: string | null;
}
export const twilioStored = (s: SmsProviderSettings) => s as unknown as TwilioStored;

/** What a Twilio-compatible webhook says: a received text, or a status report (with 21610, the recipient's opt-out). */
export function parseTwilioCall(call: WebhookCall): HookResult[] | { field: string; error: string } {
  if (call.hook === 'message') {
    const text = parseTwilioInbound(call.params);
    return text ? [{ type: 'incoming', text }] : { field: 'MessageSid', error: 'The webhook names no MessageSid' };
  }
  const report = parseTwilioStatus(call.params);
  // Twilio's 21610: the recipient unsubscribed (texted STOP to the carrier); nothing more goes to it.
  return report ? [{ type: 'status', report, messageId: call.messageId, unsubscribed: report.errorCode === '21610' }] : [];
}

const headerOf = (call: WebhookCall, name: string) => {
  const v = call.headers[name];
  return Array.isArray(v) ? v[0] : v;
};

/** Twilio's webhook: `X-Twilio-Signature`, keyed with the auth token; form posts; an empty TwiML answer. */
export const twilioWebhook = (header: string, key: (secret: string) => string): ProviderWebhook => ({
  signatureHeader: header,
  verify: (call, secret) => validTwilioSignature(key(secret), call.url, call.params, headerOf(call, header.toLowerCase())),
  parse: parseTwilioCall,
  answer: { contentType: 'text/xml; charset=utf-8', body: '<?xml version="1.0" encoding="UTF-8"?><Response/>' },
});

/** The answers' fields of Twilio-compatible providers. */
export const twilioOutput = {
  accountSid: z.string().optional(),
  apiBaseUrl: z.string().optional(),
  messagingServiceSid: z.string().nullable().optional(),
  authTokenSet: z.boolean().optional().describe('Twilio: whether an auth token is stored (never returned)'),
};

export const twilio: SmsProviderDefinition = {
  kind: 'twilio',
  schema: z.strictObject({ kind: z.literal('twilio').describe('Twilio or a compatible API'), ...twilioFields }),
  output: twilioOutput,
  store: (input) => {
    const p = input as z.output<z.ZodObject<typeof twilioFields>>;
    return {
      settings: { kind: 'twilio', accountSid: p.accountSid, apiBaseUrl: p.apiBaseUrl.replace(/(?<!\/)\/+$/, ''), messagingServiceSid: p.messagingServiceSid ?? null },
      secret: p.authToken,
      field: 'authToken',
    };
  },
  json: (settings, secretSet) => ({ ...settings, authTokenSet: secretSet }),
  name: (settings) => twilioFlavour(twilioStored(settings).apiBaseUrl),
  open: (settings) => {
    const s = twilioStored(settings);
    return twilioProvider({ accountSid: s.accountSid, authToken: settings.secret, apiBaseUrl: s.apiBaseUrl, messagingServiceSid: s.messagingServiceSid });
  },
  credentialsFix: "the provider refused the credentials: check provider.accountSid and provider.authToken (PATCH /v1/channels/{id}), or the account's status in the provider's console",
  label: 'The text API',
  receiving: 'The channel accepts signed webhooks at inbound.webhookUrl',
  webhook: twilioWebhook('X-Twilio-Signature', (secret) => secret),
};
