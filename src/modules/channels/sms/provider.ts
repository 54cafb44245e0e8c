import type { SmsProviderSettings } from '../../../db/schema.js';
import type { MediaOutcome } from './media.js';

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
  readonly name: 'twilio' | 'signalwire' | 'smpp';
  send(text: OutgoingText, ctx: ProviderContext): Promise<SendOutcome>;
  check(ctx: ProviderContext): Promise<CheckStep[]>;
  /**
   * Fetches one media item of a received text (MMS) by the URL the provider gave, with the channel's
   * credentials only on the provider's own host (see media.ts); absent when the provider carries no media.
   */
  fetchMedia?(url: string, ctx: ProviderContext & { maxBytes: number }): Promise<MediaOutcome>;
}

/** A provider's settings with its decrypted secret (`authToken` or `password`). */
export type ProviderWithSecret = SmsProviderSettings & { secret: string };
