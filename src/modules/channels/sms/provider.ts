import { isIP } from 'node:net';
import { z } from 'zod';
import type { SmsProviderSettings } from '../../../db/schema.js';
import { canonicalDomain } from '../../domains/domains.schemas.js';
import type { MediaOutcome } from '../media.js';

/**
 * The one small interface every text provider implements (STYLE: one file per provider): sending a text,
 * checking the connection, and reading what the provider reports back. A provider that pushes (Twilio's
 * webhooks) is read by the hooks route with `parseInbound`/`parseStatus`; one that holds a connection (SMPP)
 * runs its own worker and hands what arrives to the same receiving code.
 */

/** A text as it leaves: from the channel's number (or sender id, or messaging service) to one number. */
export interface OutgoingText {
  from: string;
  to: string;
  text: string;
  /** Where the provider reports delivery status (Twilio's StatusCallback); names the message. */
  statusCallback: string;
  /** The message's id (SMPP: a receipt that comes before the send's answer is committed still finds it). */
  messageId?: string;
}

/** How a send ended. `unknown`: the request left and no answer came; it is never sent again. */
export type SendOutcome =
  | { kind: 'sent'; providerMessageId: string }
  | { kind: 'retry'; error: string; retryAfterMs?: number | undefined }
  /** `credentials`: the provider refused the channel's credentials (the channel is what to fix, not the text). */
  | { kind: 'failed'; error: string; code?: string | undefined; credentials?: boolean }
  | { kind: 'unknown'; error: string };

/** A text the provider delivered to the channel. */
export interface IncomingText {
  providerMessageId: string;
  from: string;
  to: string;
  text: string;
  media: { url: string; contentType: string | null }[];
}

/** A delivery report: the provider's id of an outgoing text and its new state. */
export interface StatusReport {
  providerMessageId: string;
  status: 'queued' | 'sent' | 'delivered' | 'failed';
  /** The provider's error code, e.g. Twilio's "30003", when the report carries one. */
  errorCode: string | null;
  /** The provider's own word for the state (e.g. "undelivered"). */
  raw: string;
}

export interface CheckStep {
  step: string;
  ok: boolean;
  detail: string | null;
}

export interface ProviderContext {
  /** Provider hosts on private and loopback addresses may be reached (CHANNELS_ALLOW_PRIVATE). */
  allowPrivate: boolean;
  /** The longest a request may take. */
  timeoutMs: number;
}

export interface SmsProvider {
  /** `providerName` of the messages it carries. */
  readonly name: ProviderName;
  send(text: OutgoingText, ctx: ProviderContext): Promise<SendOutcome>;
  check(ctx: ProviderContext): Promise<CheckStep[]>;
  /**
   * Fetches one media item of a received text (MMS) by the URL the provider gave, with the channel's
   * credentials only on the provider's own host (see media.ts); absent when the provider carries no media.
   */
  fetchMedia?(url: string, ctx: ProviderContext & { maxBytes: number }): Promise<MediaOutcome>;
}

/** A provider's settings with its decrypted secret (`authToken` or `password`; a JSON object when it has several). */
export type ProviderWithSecret = SmsProviderSettings & { secret: string };

/** `providerName` of the messages a provider carries. */
export type ProviderName = string;

// ------------------------------------------------------------------ one provider, one file

/**
 * One outside provider of text channels, in one file under `providers/` and one line in `providers/index.ts`:
 * its settings (the request's shape, what is stored, what answers show), how it sends and checks, and, when it
 * pushes to the service, its webhook: it verifies and parses a call and returns typed results, which the
 * provider-neutral hook route applies through the operation runner (`sms.hooks.ts`).
 */
export interface SmsProviderDefinition {
  /** `provider.kind` in requests, answers and the stored settings. */
  readonly kind: string;
  /** `provider` of `POST /channels` with this kind (the object with `kind` a literal). */
  readonly schema: z.ZodType;
  /** The fields of its `provider` in answers besides `kind` (all optional: the document shows every provider's at once). */
  readonly output: Record<string, z.ZodType>;
  /** The stored settings (without secrets), the secret to store encrypted and the field it came in (for a 400 without SECRETS_KEY). */
  store(input: Record<string, unknown>): { settings: SmsProviderSettings; secret: string; field: string };
  /** Its `provider` in answers: the settings, whether its secrets are set, never the secrets. */
  json(settings: SmsProviderSettings, secretSet: boolean): Record<string, unknown>;
  /** `providerName` of the messages it carries. */
  name(settings: SmsProviderSettings): ProviderName;
  /** The provider for a channel's settings; `channelId` names the channel (SMPP sends over its bind). */
  open(settings: ProviderWithSecret, channelId?: string): SmsProvider;
  /** What to change when it refuses the channel's credentials (`lastError`'s fix). */
  readonly credentialsFix: string;
  /** How texts reach the channel, for `POST /channels/{id}/test`. */
  readonly receiving: string;
  /** Its webhook, when it pushes texts and reports (absent: it delivers otherwise, e.g. over a bind). */
  readonly webhook?: ProviderWebhook;
}

/** A call of a provider's webhook, as the hook route received it. */
export interface WebhookCall {
  /** `message` (a text arrived: `/hooks/sms/{channelId}`) or `status` (a report: `…/status`). */
  hook: 'message' | 'status';
  /** The URL the provider called, as it signed it: PUBLIC_URL, then the path and query as requested. */
  url: string;
  headers: Record<string, string | string[] | undefined>;
  /** The form's parameters. */
  params: Record<string, string | string[]>;
  /** Our message id when the callback URL names it (`?m=`). */
  messageId: string | undefined;
}

/** What a webhook call says, in the service's terms; the hook route applies each through the operation runner. */
export type HookResult =
  | { type: 'incoming'; text: IncomingText }
  /** `unsubscribed`: the provider reports that the text's recipient opted out (Twilio's error 21610): an opt-out of that recipient. */
  | { type: 'status'; report: StatusReport; messageId: string | undefined; unsubscribed: boolean }
  | { type: 'opt-out'; number: string };

export interface ProviderWebhook {
  /** The request header its signature comes in (named in the 403). */
  readonly signatureHeader: string;
  /** Whether the call is the provider's: its signature checked with the channel's secret, in constant time. */
  verify(call: WebhookCall, secret: string): boolean;
  /** What the call says; a string: why it cannot be read (a 400 at the field named). */
  parse(call: WebhookCall): HookResult[] | { field: string; error: string };
  /** The answer the provider expects once everything is committed. */
  readonly answer: { contentType: string; body: string };
}

// ------------------------------------------------------------------ settings the providers share

/** A provider's API base URL: http(s), no query or fragment. */
export const HttpUrl = z
  .url({ protocol: /^https?$/, error: 'Must be an http(s) URL' })
  .max(500)
  .refine((v) => !new URL(v).search && !new URL(v).hash, { message: 'Must be a base URL without query or fragment' });

/** A provider's host: a domain name or an IP address (checked against private ranges when connecting). */
export const ProviderHost = z
  .string()
  .trim()
  .min(1)
  .max(253)
  .refine((v) => isIP(v) !== 0 || canonicalDomain(v) !== undefined || v === 'localhost', { message: 'Must be a host name or an IP address' })
  .describe('Host name or IP address of the SMSC');

/** A secret in a request: write-only, stored encrypted. */
export const WriteOnly = (max: number) => z.string().min(1).max(max).describe('Write-only, encrypted');

/**
 * A provider's settings documented by their `kind` alone (the tool list stays small; docs/sms.md has the
 * rest), checked whole by `schema`, its errors at their own fields under `provider`.
 */
export function documentedByKind(kind: z.ZodLiteral<string>, schema: z.ZodType) {
  return z.looseObject({ kind }).transform((value, ctx) => {
    const parsed = schema.safeParse(value);
    if (parsed.success) return parsed.data as Record<string, unknown>;
    for (const issue of parsed.error.issues) ctx.addIssue({ code: 'custom', message: issue.message, path: issue.path, input: undefined });
    return z.NEVER;
  });
}
