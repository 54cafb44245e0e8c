import { randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { OutboxMail } from '../../../db/schema.js';

/** A signing key of the sender's domain (see the domains area). */
export interface DkimKey {
  domainName: string;
  keySelector: string;
  privateKey: string;
}

/** A new Message-ID (without the angle brackets) for mail sent as `fromAddress`: a UUID at the sender's domain. */
export function newMessageId(fromAddress: string): string {
  const domain = fromAddress.slice(fromAddress.lastIndexOf('@') + 1) || 'switchboard.invalid';
  return `${randomUUID()}@${domain}`;
}

/** `<id>` → `id`; ids as stored are without brackets. */
export const bareMessageId = (id: string) => id.trim().replace(/^<|>$/g, '');

const address = (a: { email: string; name?: string | undefined }) => (a.name ? { name: a.name, address: a.email } : a.email);

/** The envelope recipients: To, Cc and Bcc, each address once. */
export function envelopeRecipients(mail: OutboxMail): string[] {
  return [...new Set([...mail.to, ...mail.cc, ...mail.bcc].map((a) => a.email.toLowerCase()))];
}

/**
 * The message as it goes over the wire (RFC 5322, built by nodemailer's composer): the Message-ID and Date
 * fixed when it was queued, so every attempt sends the same message; Bcc never in the headers. Signed with
 * the sender domain's DKIM key when it has one. `contents`: the attachments' bytes by their id.
 */
export async function composeMail(mail: OutboxMail, dkim?: DkimKey, contents: ReadonlyMap<string, Buffer> = new Map()): Promise<Buffer> {
  const headers: Record<string, string> = {};
  if (mail.autoSubmitted) {
    headers['Auto-Submitted'] = mail.autoSubmitted;
    // Exchange and Outlook do not read Auto-Submitted: this asks them for no out-of-office or other automatic answer.
    headers['X-Auto-Response-Suppress'] = 'All';
  }
  // Loaded on first use: a process that sends no mail does not hold them.
  const [{ default: MailComposer }, { default: DKIM }] = await Promise.all([import('nodemailer/lib/mail-composer'), import('nodemailer/lib/dkim')]);
  const composer = new MailComposer({
    from: address(mail.from),
    to: mail.to.map(address),
    ...(mail.cc.length ? { cc: mail.cc.map(address) } : {}),
    subject: mail.subject,
    text: mail.text,
    ...(mail.html !== undefined ? { html: mail.html } : {}),
    messageId: `<${mail.messageId}>`,
    date: new Date(mail.date),
    ...(mail.inReplyTo ? { inReplyTo: `<${mail.inReplyTo}>` } : {}),
    ...(mail.references.length ? { references: mail.references.map((r) => `<${r}>`) } : {}),
    headers,
    ...(mail.attachments?.length
      ? {
          attachments: mail.attachments.map((a) => ({
            ...(a.filename ? { filename: a.filename } : {}),
            contentType: a.contentType,
            content: contents.get(a.id) ?? Buffer.alloc(0),
            ...(a.contentId ? { cid: a.contentId } : {}),
          })),
        }
      : {}),
    // The composer's own headers (X-Mailer) are left out: the mail says nothing of the software that sent it.
    xMailer: false,
  });
  const raw = await composer.compile().build();
  if (!dkim) return raw;
  return streamToBuffer(new DKIM({ domainName: dkim.domainName, keySelector: dkim.keySelector, privateKey: dkim.privateKey, headerFieldNames: SIGNED_HEADERS }).sign(raw));
}

/**
 * The header fields the DKIM signature covers: nodemailer's list (RFC 6376 §5.4.1) plus `Auto-Submitted`, so
 * that nobody on the way can strip or change the mark that keeps automatic replies from answering automatic mail.
 */
export const SIGNED_HEADERS =
  'From:Sender:Reply-To:Subject:Date:Message-ID:To:Cc:MIME-Version:Content-Type:Content-Transfer-Encoding:Content-ID:' +
  'Content-Description:Resent-Date:Resent-From:Resent-Sender:Resent-To:Resent-Cc:Resent-Message-ID:In-Reply-To:References:' +
  'List-Id:List-Help:List-Unsubscribe:List-Unsubscribe-Post:List-Subscribe:List-Post:List-Owner:List-Archive:Auto-Submitted';

async function streamToBuffer(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string));
  return Buffer.concat(chunks);
}
