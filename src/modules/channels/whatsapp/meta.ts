import { createHash, timingSafeEqual } from 'node:crypto';
import { OutboundProblem, outboundRequest, retryAfterMs } from '../../../core/outbound.js';
import { fetchMedia, mediaType, originOf, type MediaOutcome } from '../media.js';

/**
 * Meta's WhatsApp Business Cloud API (the Graph API), the one provider of WhatsApp channels: sending a text
 * or a template (`POST {apiBaseUrl}/{apiVersion}/{phoneNumberId}/messages`), fetching a received media item
 * in Meta's two steps, and checking the phone number. Written on the service's outbound request (no SDK):
 * https only, the address checked after DNS on the connection itself, a deadline, a bounded answer.
 *
 * The access token travels only to `apiBaseUrl`'s origin and to the media `url` that origin returned, each
 * time on that very request: redirects are never followed with it (a redirect of the API itself is refused,
 * one of the media host is followed without the token).
 */

export const META_GRAPH_URL = 'https://graph.facebook.com';
/** The Graph API version used when a channel names none (a channel may pin its own with `apiVersion`). */
export const META_API_VERSION = 'v24.0';

export interface MetaSettings {
  phoneNumberId: string;
  accessToken: string;
  /** Without a trailing slash. */
  apiBaseUrl: string;
  /** `vNN.N`. */
  apiVersion: string;
}

export interface GraphContext {
  /** Provider hosts on private and loopback addresses may be reached (CHANNELS_ALLOW_PRIVATE). */
  allowPrivate: boolean;
  /** The longest one request may take, its body included. */
  timeoutMs: number;
}

/** A template message as Meta takes it: its name, its language code, and the parameters of its components. */
export interface TemplateMessage {
  name: string;
  language: string;
  components?: unknown[] | undefined;
}

/** One message to send: free-form text (within the 24-hour window) or a template (any time). */
export type OutgoingWhatsApp = { to: string; contextId?: string | null | undefined } & ({ text: string } | { template: TemplateMessage });

/**
 * How a request to Meta ended.
 * - `retry`: nothing was sent (Meta's rate limit 130429 or HTTP 429, a 5xx, a connection refused); later.
 * - `failed`: Meta refused the message; `code` and `title` are Meta's. `credentials`: the token is revoked or
 *   expired (HTTP 401, code 190): the channel is what to fix. `window`: code 131047 (outside the 24-hour window).
 * - `unknown`: the request left and no answer came; it is never sent again.
 */
export type GraphSendOutcome =
  | { kind: 'sent'; providerMessageId: string; whatsappId: string | null }
  | { kind: 'retry'; error: string; retryAfterMs?: number | undefined }
  | { kind: 'failed'; error: string; code: string | null; title: string | null; credentials?: boolean; window?: boolean }
  | { kind: 'unknown'; error: string };


export interface CheckStep {
  step: string;
  ok: boolean;
  detail: string | null;
}

/** A Graph API error as its body states it (`{ error: { message, type, code, error_subcode, error_data: { details } } }`). */
export interface GraphError {
  code: number | null;
  subcode: number | null;
  /** Meta's title of the error (`error_user_title`, else `message` without its `(#code)` prefix). */
  title: string | null;
  details: string | null;
}

/** Meta's codes this service acts on (CONTRACT §10). */
export const META_CODES = {
  /** The access token is invalid, expired or revoked. */
  tokenInvalid: 190,
  /** Cloud API throughput reached: try again later. */
  rateLimited: 130429,
  /** More than 24 hours since the customer last wrote: only a template may be sent. */
  windowClosed: 131047,
  /** The message could not be delivered (the number is not on WhatsApp, or cannot receive it). */
  undeliverable: 131026,
} as const;

/** Meta's error codes that mean "send less for now" (rate limits of the app, the account or the pair). */
const RATE_CODES = new Set([4, 80007, 130429, 131056]);

export function graphError(body: string): GraphError | undefined {
  const json = parseJson(body);
  const error = json?.error;
  if (!error || typeof error !== 'object') return undefined;
  const e = error as Record<string, unknown>;
  const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : null);
  const str = (v: unknown) => (typeof v === 'string' && v.trim() ? v.trim().slice(0, 300) : null);
  const data = e.error_data && typeof e.error_data === 'object' ? (e.error_data as Record<string, unknown>) : {};
  const message = str(e.message)?.replace(/^\(#\d+\)\s*/, '') ?? null;
  return { code: num(e.code), subcode: num(e.error_subcode), title: str(e.error_user_title) ?? message, details: str(data.details) ?? str(e.error_user_msg) };
}

/** Whether an answer of Meta means the token no longer works (HTTP 401, or code 190 whatever the status). */
export const isTokenProblem = (status: number, error: GraphError | undefined) => status === 401 || error?.code === META_CODES.tokenInvalid;

/** One line saying what Meta answered: `Meta answered 400 (error 131047: Re-engagement message)`. */
function describe(status: number, error: GraphError | undefined): string {
  const what = error?.code !== null && error?.code !== undefined ? `error ${error.code}${error.title ? `: ${error.title}` : ''}` : error?.title;
  return `Meta answered ${status}${what ? ` (${what})` : ''}${error?.details && error.details !== error.title ? `. ${error.details}` : ''}`;
}

/** Network failures that happen before a request leaves: sending again cannot send twice. */
const NOT_SENT = /ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH|certificate|self.signed|CERT_/i;

/** The body Meta takes for one message (CONTRACT §10). `to`: the digits of a number, or a business-scoped user id. */
export function messageBody(message: OutgoingWhatsApp): Record<string, unknown> {
  const base = { messaging_product: 'whatsapp', recipient_type: 'individual', to: message.to, ...(message.contextId ? { context: { message_id: message.contextId } } : {}) };
  if ('template' in message) {
    const { name, language, components } = message.template;
    return { ...base, type: 'template', template: { name, language: { code: language }, ...(components?.length ? { components } : {}) } };
  }
  return { ...base, type: 'text', text: { body: message.text } };
}

/** `to` for a recipient: the digits of its number (`+14155550100` → `14155550100`), else its business-scoped user id. */
export function recipientId(party: { phoneNumber?: string | null | undefined; userId?: string | null | undefined }): string | undefined {
  if (party.phoneNumber && /^\+\d{6,15}$/.test(party.phoneNumber)) return party.phoneNumber.slice(1);
  return party.userId ?? undefined;
}

/** Whether `content` is what `sha256` names: Meta states it in hex (media endpoint) or base64 (webhooks). */
export function matchesSha256(content: Buffer, sha256: string): boolean {
  const digest = createHash('sha256').update(content).digest();
  const given = /^[0-9a-f]{64}$/i.test(sha256) ? Buffer.from(sha256, 'hex') : /^[A-Za-z0-9+/]{43}=?$/.test(sha256) ? Buffer.from(sha256, 'base64') : undefined;
  return given !== undefined && given.length === digest.length && timingSafeEqual(given, digest);
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

export function metaGraph(settings: MetaSettings) {
  const base = `${settings.apiBaseUrl.replace(/(?<!\/)\/+$/, '')}/${encodeURIComponent(settings.apiVersion)}`;
  const auth = `Bearer ${settings.accessToken}`;
  const request = (ctx: GraphContext, method: 'GET' | 'POST', url: string, opts: { body?: string } = {}) =>
    outboundRequest(url, {
      method,
      headers: { accept: 'application/json', authorization: auth, ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(opts.body !== undefined ? { body: opts.body } : {}),
      allowInsecure: ctx.allowPrivate,
      insecureSetting: 'CHANNELS_ALLOW_PRIVATE',
      timeoutMs: ctx.timeoutMs,
      maxBytes: 64 * 1024,
      overflow: 'truncate',
    });

  return {
    async send(message: OutgoingWhatsApp, ctx: GraphContext): Promise<GraphSendOutcome> {
      let answer;
      try {
        answer = await request(ctx, 'POST', `${base}/${encodeURIComponent(settings.phoneNumberId)}/messages`, { body: JSON.stringify(messageBody(message)) });
      } catch (err) {
        const text = err instanceof Error ? err.message : String(err);
        if (err instanceof OutboundProblem && err.kind === 'forbidden') return { kind: 'failed', error: text, code: null, title: null };
        if (err instanceof OutboundProblem && err.kind === 'network' && NOT_SENT.test(text)) return { kind: 'retry', error: `Could not reach Meta: ${text}` };
        // A timeout or a connection lost after the request left: Meta may have accepted the message.
        return { kind: 'unknown', error: text };
      }
      if (answer.status >= 200 && answer.status < 300) {
        const json = parseJson(answer.body);
        const first = Array.isArray(json?.messages) ? (json.messages[0] as Record<string, unknown> | undefined) : undefined;
        const contact = Array.isArray(json?.contacts) ? (json.contacts[0] as Record<string, unknown> | undefined) : undefined;
        if (typeof first?.id !== 'string' || !first.id) return { kind: 'unknown', error: `Meta answered ${answer.status} without a message id` };
        return { kind: 'sent', providerMessageId: first.id, whatsappId: typeof contact?.wa_id === 'string' ? contact.wa_id : null };
      }
      const error = graphError(answer.body);
      const detail = describe(answer.status, error);
      if (answer.status === 429 || answer.status >= 500 || (error?.code !== null && error?.code !== undefined && RATE_CODES.has(error.code))) {
        return { kind: 'retry', error: detail, retryAfterMs: retryAfterMs(answer.headers['retry-after']) };
      }
      return {
        kind: 'failed',
        error: detail,
        code: error?.code != null ? String(error.code) : null,
        title: error?.title ?? null,
        ...(isTokenProblem(answer.status, error) ? { credentials: true } : {}),
        ...(error?.code === META_CODES.windowClosed ? { window: true } : {}),
      };
    },

    /**
     * A received media item in Meta's two steps: `GET {base}/{mediaId}` (with the token) answers its `url`,
     * `mime_type`, `sha256` and `file_size`; `GET url` (with the token, on that request only) answers the
     * bytes (the channels' shared bounded fetch, `../media.ts`), which must hash to `sha256`. At most `maxBytes`.
     */
    async fetchMedia(mediaId: string, ctx: GraphContext & { maxBytes: number }): Promise<MediaOutcome> {
      const retryable = (status: number) => status === 408 || status === 429 || status >= 500;
      let info;
      try {
        info = await request(ctx, 'GET', `${base}/${encodeURIComponent(mediaId)}`);
      } catch (err) {
        const text = err instanceof Error ? err.message : String(err);
        if (err instanceof OutboundProblem && err.kind === 'forbidden') return { kind: 'failed', error: text };
        return { kind: 'retry', error: `Could not reach Meta: ${text}` };
      }
      if (info.status !== 200) {
        const error = graphError(info.body);
        const detail = describe(info.status, error);
        if (REDIRECTS.has(info.status)) return { kind: 'failed', error: `${detail}: a redirect of the API is not followed with the token` };
        if (retryable(info.status) || (error?.code != null && RATE_CODES.has(error.code))) return { kind: 'retry', error: detail, retryAfterMs: retryAfterMs(info.headers['retry-after']) };
        return { kind: 'failed', error: detail, ...(isTokenProblem(info.status, error) ? { credentials: true } : {}) };
      }
      const json = parseJson(info.body);
      const url = typeof json?.url === 'string' ? json.url : undefined;
      const sha256 = typeof json?.sha256 === 'string' ? json.sha256 : undefined;
      const size = Number(json?.file_size);
      if (!url || !originOf(url)) return { kind: 'failed', error: 'Meta named no download URL for the media' };
      if (!sha256) return { kind: 'failed', error: 'Meta named no sha256 for the media' };
      if (Number.isFinite(size) && size > ctx.maxBytes) return { kind: 'failed', error: `The media is larger (${size} bytes) than the ${ctx.maxBytes} bytes that may still be kept for this message`, tooLarge: true };
      // The token goes with the request for the URL Meta returned (its media host), never with a redirect.
      const answer = await fetchMedia(url, { trustedOrigin: originOf(url)!, authorization: auth, allowPrivate: ctx.allowPrivate, timeoutMs: ctx.timeoutMs, maxBytes: ctx.maxBytes });
      if (answer.kind === 'failed' && answer.status !== undefined) {
        // The download URL lives a few minutes: a 404 or 403 there means asking Meta for a fresh one.
        if (answer.status === 403 || answer.status === 404) return { kind: 'retry', error: answer.error };
        if (answer.status === 401) return { ...answer, credentials: true };
      }
      if (answer.kind !== 'fetched') return answer;
      if (!matchesSha256(answer.content, sha256)) return { kind: 'failed', error: `The media's bytes do not match the sha256 Meta stated (${sha256.slice(0, 64)})` };
      return { ...answer, contentType: (typeof json?.mime_type === 'string' ? mediaType(json.mime_type) : null) ?? answer.contentType };
    },

    /** Whether the token reads the phone number (`GET {base}/{phoneNumberId}`). */
    async check(ctx: GraphContext): Promise<CheckStep[]> {
      try {
        const answer = await request(ctx, 'GET', `${base}/${encodeURIComponent(settings.phoneNumberId)}?fields=display_phone_number,verified_name`);
        if (answer.status === 200) {
          const json = parseJson(answer.body);
          const shown = typeof json?.display_phone_number === 'string' ? ` (${json.display_phone_number}${typeof json.verified_name === 'string' ? `, ${json.verified_name}` : ''})` : '';
          return [{ step: 'phoneNumber', ok: true, detail: `The phone number ${settings.phoneNumberId}${shown} answered with this token` }];
        }
        return [{ step: 'phoneNumber', ok: false, detail: describe(answer.status, graphError(answer.body)) }];
      } catch (err) {
        return [{ step: 'connect', ok: false, detail: err instanceof Error ? err.message : String(err) }];
      }
    },
  };
}

export type MetaGraph = ReturnType<typeof metaGraph>;

function parseJson(body: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(body);
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
