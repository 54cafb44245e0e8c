import { AppError } from '../../../core/errors.js';
import { META_CODES } from './meta.js';

/**
 * WhatsApp's rules, kept apart from any store so that they read in one place:
 * - the 24-hour customer service window: free-form text only within 24 hours of the recipient's last message
 *   on the channel; a template any time;
 * - a message's status moves forward only (`read` may come without `delivered`, and then implies it);
 * - what a refusal by Meta does: retry later, fail the message, or put the channel in `error`.
 */

/** What to change when Meta refuses the channel's token, for `lastError`. */
export const WHATSAPP_CREDENTIALS_FIX = 'Meta refused the access token (revoked or expired): set a new provider.accessToken, a system user token that does not expire (PATCH /v1/channels/{id})';

/** How long after a customer's last message free-form text may be sent. */
export const WINDOW_MS = 24 * 60 * 60 * 1000;

/** Whether free-form text may go to a recipient whose last message on the channel arrived at `lastIncoming`. */
export const windowOpen = (lastIncoming: Date | null | undefined, now: Date): boolean => lastIncoming != null && now.getTime() - lastIncoming.getTime() < WINDOW_MS;

/** Why free-form text may not be sent now (the reason of the 409, and of an automation's skipped text). */
export function windowClosedReason(recipient: string, lastIncoming: Date | null | undefined): string {
  const since = lastIncoming ? `last wrote at ${lastIncoming.toISOString()}` : 'has not written to this channel';
  return `${recipient} ${since}: free-form WhatsApp text may be sent only within 24 hours of the recipient's last message; send a template instead`;
}

/** 409 `WHATSAPP_WINDOW_CLOSED`, before anything is sent to Meta. */
export const windowClosed = (recipient: string, lastIncoming: Date | null | undefined, field = 'text') =>
  new AppError('WHATSAPP_WINDOW_CLOSED', windowClosedReason(recipient, lastIncoming), { errors: [], properties: { [field]: { errors: ['Outside the 24-hour window: send a template'] } } });

// ------------------------------------------------------------------ status

export type WhatsAppMessageStatus = 'queued' | 'sent' | 'delivered' | 'read' | 'failed';

/** Forward order: queued → sent → delivered → read; `failed` ends a message not yet delivered. */
const RANK: Record<WhatsAppMessageStatus, number> = { queued: 0, sent: 1, delivered: 2, failed: 2, read: 3 };
const KNOWN = new Set<string>(Object.keys(RANK));

export type StatusEventType = 'message.sent' | 'message.delivered' | 'message.read' | 'message.failed';

/**
 * What a status report does to a message: its new status and the events to record, or undefined when the
 * report does not move it forward (a late `sent` after `delivered`, anything after `failed` or `read`, a
 * word this service does not know). `read` straight after `sent` records `message.delivered` too.
 */
export function advance(current: string | null, reported: string): { status: WhatsAppMessageStatus; events: StatusEventType[] } | undefined {
  if (!KNOWN.has(reported)) return undefined;
  const from = (KNOWN.has(current ?? '') ? current : 'queued') as WhatsAppMessageStatus;
  const to = reported as WhatsAppMessageStatus;
  if (from === 'failed' || from === 'read' || RANK[to] <= RANK[from]) return undefined;
  if (to === 'queued') return undefined;
  const events: StatusEventType[] =
    to === 'read' ? [...(RANK[from] < RANK.delivered ? (['message.delivered'] as const) : []), 'message.read'] : to === 'delivered' ? ['message.delivered'] : to === 'sent' ? ['message.sent'] : ['message.failed'];
  return { status: to, events };
}

/** `statusReason` of a failure Meta reported: its code and title. */
export function failureReason(code: string | null, title: string | null): string {
  return `Meta reported the message failed${code ? ` (error ${code}${title ? `: ${title}` : ''})` : title ? ` (${title})` : ''}`;
}

// ------------------------------------------------------------------ refusals

/**
 * What a refusal of Meta (by `code`, with `credentials` when the token was refused) does:
 * `channel`: the token is revoked or expired, the channel goes to `error` (and the message waits for the fix);
 * `fail`: the message fails with Meta's code and title (131047 outside the window, 131026 not on WhatsApp, …).
 */
export function refusalEffect(outcome: { code: string | null; credentials?: boolean }): 'channel' | 'fail' {
  if (outcome.credentials || outcome.code === String(META_CODES.tokenInvalid)) return 'channel';
  return 'fail';
}
