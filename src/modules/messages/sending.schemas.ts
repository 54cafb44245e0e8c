import { z } from 'zod';
import { IdParam, LongText, Uuid } from '../../core/schemas.js';

/**
 * The inputs of sending (send, reply, forward). Everything that becomes a mail header (addresses, display
 * names, the subject) is refused with a 400 at its field when it holds a line break or another control
 * character: a CR or LF in a header value would let a caller add headers (or recipients) of his own.
 */

/** C0 controls (tab aside) and DEL: a header value holds none of them. */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000a-\u001f\u007f]/;
const LINE_BREAK = /[\r\n]/;

/** Why a header value is refused, or undefined. */
export function headerValueProblem(value: string): string | undefined {
  if (LINE_BREAK.test(value)) return 'Must not contain line breaks (CR or LF)';
  if (CONTROL.test(value)) return 'Must not contain control characters';
  return undefined;
}

const EMAIL = z.email({ pattern: z.regexes.email });

/** Why an email address is refused, or undefined. */
export function emailProblem(value: string): string | undefined {
  const header = headerValueProblem(value);
  if (header) return header;
  if (value.length > 254) return 'Must be at most 254 characters';
  if (!EMAIL.safeParse(value).success) return 'Must be an email address, e.g. "ada@example.com"';
  return undefined;
}

/** A single-line header text (the subject, a display name): refused with a line break or a control character. */
export const HeaderText = (max: number) =>
  z
    .string()
    .max(max)
    .superRefine((value, ctx) => {
      const problem = headerValueProblem(value);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    });

/** An address as the service keeps it: the address and an optional display name. */
export interface MailAddress {
  email: string;
  name?: string | undefined;
}

/**
 * An address in a request: `"ada@example.com"` or `{"email": "ada@example.com", "name": "Ada"}`. Checked by
 * hand after the union, so a bad address is reported at its own place (`email` or `name`) with a clear
 * message rather than as "no branch of the union matched".
 */
export const AddressInput = z
  .union([z.string().max(400), z.strictObject({ email: z.string().max(400), name: z.string().max(200).optional() })])
  .meta({ examples: ['ada@example.com'] })
  .transform((value, ctx): MailAddress => {
    const given = typeof value === 'string' ? { email: value } : value;
    const email = given.email.trim();
    // The line-break check reads the address as given: a trailing CR or LF is refused, not trimmed away.
    const problem = headerValueProblem(given.email) ?? emailProblem(email);
    if (problem) ctx.addIssue({ code: 'custom', message: problem, path: typeof value === 'string' ? [] : ['email'] });
    if (given.name !== undefined) {
      const nameProblem = headerValueProblem(given.name);
      if (nameProblem) ctx.addIssue({ code: 'custom', message: nameProblem, path: ['name'] });
    }
    const name = given.name?.trim();
    return name ? { email, name } : { email };
  });

/** Recipients of one message at most, whatever the path (send, reply, forward; REST, MCP or an automation). */
export const MAX_RECIPIENTS = 50;
const Recipients = (what: string) => z.array(AddressInput).max(MAX_RECIPIENTS).describe(what);

export const Subject = HeaderText(998).describe('The subject (one line)').meta({ examples: ['Your invoice'] });
const Text = LongText.describe('The plain-text body').meta({ examples: ['Thanks, we received your invoice.'] });
const Html = z.string().max(500_000).describe('An HTML body beside the text');

export const MessageSendInput = z
  .strictObject({
    channelId: Uuid.describe('The email channel to send through'),
    to: Recipients('Required. The recipients: addresses, "ada@example.com" or {"email", "name"}; numbers for a text').min(1),
    cc: Recipients('Copy recipients, as `to`').optional(),
    bcc: Recipients('Blind-copy recipients (never in the headers), as `to`').optional(),
    subject: Subject,
    text: Text,
    html: Html.optional(),
    replyToMessageId: Uuid.optional().describe('A message this one answers (In-Reply-To, References, its thread)'),
  })
  .superRefine((v, ctx) => {
    const total = v.to.length + (v.cc?.length ?? 0) + (v.bcc?.length ?? 0);
    if (total > MAX_RECIPIENTS) ctx.addIssue({ code: 'custom', path: ['to'], message: `At most ${MAX_RECIPIENTS} recipients in all (to, cc and bcc)` });
  });

export const MessageReplyInput = z.strictObject({
  id: IdParam('message to answer'),
  text: Text,
  html: Html.optional(),
  replyAll: z.boolean().default(false).describe('Also answer its other To and Cc addresses (default false)'),
});

export const MessageForwardInput = z.strictObject({
  id: IdParam('message to forward'),
  to: Recipients('Required. Who receives the forwarded message: addresses, as in `send`').min(1),
  text: Text.optional().describe('A note above the forwarded message'),
  channelId: Uuid.optional().describe("The channel to send through; default the message's"),
});

export type MessageSendValues = z.output<typeof MessageSendInput>;
export type MessageReplyValues = z.output<typeof MessageReplyInput>;
export type MessageForwardValues = z.output<typeof MessageForwardInput>;
