import { z } from 'zod';
import { IdParam, LongText, Uuid } from '../../../core/schemas.js';

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
  .union([z.string().max(400).meta({ format: 'email' }), z.strictObject({ email: z.string().max(400), name: z.string().optional() })])
  .transform((value, ctx): MailAddress => {
    const given = typeof value === 'string' ? { email: value } : value;
    const email = given.email.trim();
    // The line-break check reads the address as given: a trailing CR or LF is refused, not trimmed away.
    const problem = headerValueProblem(given.email) ?? emailProblem(email);
    if (problem) ctx.addIssue({ code: 'custom', message: problem, path: typeof value === 'string' ? [] : ['email'] });
    if (given.name !== undefined) {
      const nameProblem = given.name.length > 200 ? 'Must be at most 200 characters' : headerValueProblem(given.name);
      if (nameProblem) ctx.addIssue({ code: 'custom', message: nameProblem, path: ['name'] });
    }
    const name = given.name?.trim();
    return name ? { email, name } : { email };
  });

/** Recipients of one message at most, whatever the path (send, reply, forward; REST, MCP or an automation). */
export const MAX_RECIPIENTS = 50;
const Recipients = (what: string) => z.array(AddressInput).max(MAX_RECIPIENTS).describe(what);

export const Subject = HeaderText(998).describe('One line');
const Text = LongText.describe('The plain-text body');
const Html = z.string().max(500_000).describe('HTML body beside the text');

/** Attachments of one outgoing message: how many, and their bytes in all (uploaded or copied). */
export const MAX_ATTACHMENTS = 20;
export const OUTGOING_ATTACHMENTS_MAX_BYTES = 10 * 1024 * 1024;

const ContentType = z
  .string()
  .max(127)
  .regex(/^[a-z0-9][a-z0-9!#$&^_.+-]*\/[a-z0-9][a-z0-9!#$&^_.+-]*$/i, 'Must be a media type, e.g. "application/pdf"');

/**
 * An attachment in a request: uploaded content (`filename`, `contentType`, `content` in base64), or
 * `attachmentId`, an attachment the organization has (its content is copied). One flat object, checked by hand,
 * so that each problem is reported at its own field.
 */
export const AttachmentInput = z
  .strictObject({
    filename: HeaderText(255).optional(),
    contentType: ContentType.optional(),
    content: z.string().optional(),
    attachmentId: Uuid.optional(),
  })
  .superRefine((a, ctx) => {
    if (a.attachmentId !== undefined) {
      for (const key of ['filename', 'contentType', 'content'] as const) {
        if (a[key] !== undefined) ctx.addIssue({ code: 'custom', path: [key], message: 'Give either `attachmentId` or the uploaded file, not both' });
      }
      return;
    }
    if (a.content === undefined) ctx.addIssue({ code: 'custom', path: ['content'], message: 'Required (the file in base64), unless `attachmentId` names an attachment the organization has' });
    else if (!BASE64.test(a.content)) ctx.addIssue({ code: 'custom', path: ['content'], message: 'Must be base64' });
    if (!a.filename) ctx.addIssue({ code: 'custom', path: ['filename'], message: 'Required with `content` (the name the recipient sees)' });
  });
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
export type AttachmentValues = z.output<typeof AttachmentInput>;

const Attachments = z
  .array(AttachmentInput)
  .max(MAX_ATTACHMENTS)
  .describe(`{filename, contentType, content: base64} or {attachmentId}; at most ${MAX_ATTACHMENTS}, ${OUTGOING_ATTACHMENTS_MAX_BYTES / 1024 / 1024} MiB in all`);

export const MessageSendInput = z
  .strictObject({
    channelId: Uuid.describe('The channel to send through'),
    to: Recipients('Required. "ada@example.com", {"email", "name"}, or a number for a text').min(1),
    cc: Recipients('Copy recipients').optional(),
    bcc: Recipients('Blind copies (not in headers)').optional(),
    subject: Subject,
    text: Text,
    html: Html.optional(),
    attachments: Attachments.optional(),
    replyToMessageId: Uuid.optional().describe('The message this answers'),
  })
  .superRefine((v, ctx) => {
    const total = v.to.length + (v.cc?.length ?? 0) + (v.bcc?.length ?? 0);
    if (total > MAX_RECIPIENTS) ctx.addIssue({ code: 'custom', path: ['to'], message: `At most ${MAX_RECIPIENTS} recipients in all (to, cc and bcc)` });
  });

export const MessageReplyInput = z.strictObject({
  id: IdParam('message to answer'),
  text: Text,
  html: Html.optional(),
  attachments: Attachments.optional(),
  replyAll: z.boolean().default(false).describe('Also answer its other To and Cc'),
});

export const MessageForwardInput = z.strictObject({
  id: IdParam('message to forward'),
  to: Recipients('Required. Who receives it').min(1),
  text: Text.optional().describe('A note above the forwarded message'),
  channelId: Uuid.optional().describe("The channel to send through; default the message's"),
  includeAttachments: z.boolean().default(true).describe("Include the original's files"),
  attachments: Attachments.optional(),
});

export type MessageSendValues = z.output<typeof MessageSendInput>;
export type MessageReplyValues = z.output<typeof MessageReplyInput>;
export type MessageForwardValues = z.output<typeof MessageForwardInput>;
