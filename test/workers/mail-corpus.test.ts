import { readdirSync, readFileSync } from 'node:fs';
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SmtpReceiver } from '../../src/workers/smtp-receiver.js';
import { useTestApp } from '../helpers/app.js';
import { verifyDomainFor } from '../helpers/domains.js';
import { startTestReceiver } from '../helpers/smtp-receiver.js';

/**
 * Real-world mail through the receiver: the messages of `test/fixtures/mail/corpus/` (public fixtures of the
 * Ruby `mail` gem, MIT licence, beside them) are delivered over SMTP, and what the service stored is compared
 * with a reference parse by an independent parser (Python's standard library, `reference.py`, whose output
 * is `reference.json`): subject, sender name, attachment names, and a body wherever the mail had one.
 * Where the two parsers may rightly differ, `DIFFERENCES` says why, per message.
 */

const CORPUS = new URL('../fixtures/mail/corpus/', import.meta.url);
interface Reference {
  subject: string | null;
  fromName: string | null;
  hasBody: boolean;
  words: string[];
  attachments: (string | null)[];
}
const reference = JSON.parse(readFileSync(new URL('../fixtures/mail/reference.json', import.meta.url), 'utf8')) as Record<string, Reference>;
const files = readdirSync(CORPUS).filter((f) => f.endsWith('.eml')).sort();

/** Where the service's reading and the reference's rightly differ: the field and the reason. */
const DIFFERENCES: Record<string, Partial<Record<keyof Reference, string>>> = {
  'attachment-attachment_message_rfc822.eml': { attachments: 'a forwarded message is kept whole, as one attachment (ForwardedMessage.eml); the reference lists the files inside it' },
  'attachment-attachment_with_encoded_name.eml': { attachments: 'a byte of the RFC 2231 name is not valid in its charset: dropped here, a replacement character in the reference' },
  'plain-raw_email8.eml': { attachments: 'the same RFC 2231 name with a byte its charset does not have' },
  'attachment-attachment_with_unquoted_name.eml': { attachments: 'an unquoted name with spaces is read whole here ("This is a test.txt"); the reference stops at the first space' },
  'error-bad_subject.eml': { fromName: 'encoded words with stray spaces between them: joined here as RFC 2047 says, kept with the spaces in the reference' },
  'error-invalid_subject_characters.eml': { subject: 'a raw Latin-1 header: read as Latin-1 here, replacement characters in the reference' },
  'error-content_transfer_encoding_with_8bits.eml': { fromName: 'the display name only repeats the address: no name is kept' },
  'mime-raw_email11.eml': { fromName: 'the display name only repeats the address: no name is kept' },
  'multipart_report-multi_address_bounce1.eml': { fromName: 'the name is given as a comment, "(Mail Delivery System)": read as the name here, none in the reference' },
  'multipart_report-multi_address_bounce2.eml': { fromName: 'the name is given as a comment, "(Mail Delivery System)"' },
  'plain-mix_caps_content_type.eml': { fromName: 'an unbracketed address after a name ("Big Bug bb@bug.com"): the words before it are read as the name here' },
  'plain-raw_email_multiple_from.eml': { fromName: 'two bare addresses without a comma: the second is read as a name here, the reference finds none' },
  'plain-raw_email_incorrect_header.eml': {
    fromName: 'the From header comes after the broken line, which the reference reads as the start of the body',
    subject: 'a broken header line ("quite Delivered-To:") ends the header block in the reference; it is skipped here and the headers below it read',
    hasBody: 'the reference reads the headers after the broken line as the body',
  },
};

const { t, a } = useTestApp({});
let receiver: SmtpReceiver;
let port = 0;
const stored = new Map<string, Record<string, any>>(); // eslint-disable-line @typescript-eslint/no-explicit-any

const collapse = (s: string | null | undefined) => (s == null ? null : s.replace(/\s+/g, ' ').trim() || null);

beforeAll(async () => {
  ({ receiver, port } = await startTestReceiver(t.database.db, { attachmentMaxBytes: 5 * 1024 * 1024, maxBytes: 5 * 1024 * 1024 }));
  const transport = nodemailer.createTransport({ host: '127.0.0.1', port, secure: false, ignoreTLS: true, connectionTimeout: 5000 });
  await verifyDomainFor(t.database.db, a.orgId, 'acme.example');
  const channelOf = new Map<string, string>();
  for (const [i, file] of files.entries()) {
    const address = `corpus-${i}@acme.example`;
    const res = await a.request('POST', '/v1/channels', { type: 'email', name: file.slice(0, 200), address, inbound: { mode: 'smtp' } });
    expect(res.status, res.body).toBe(201);
    channelOf.set(res.json.data.id as string, file);
    await transport.sendMail({ envelope: { from: 'sender@corpus.example', to: [address] }, raw: readFileSync(new URL(file, CORPUS)) });
  }
  transport.close();
  const res = await a.request('GET', '/v1/messages?limit=100');
  for (const m of res.json.data) stored.set(channelOf.get(m.channelId)!, m);
}, 300_000);
afterAll(() => receiver?.stop());

describe('real-world mail corpus', () => {
  it('holds at least 30 messages, each with its reference parse, and each arrived as one message', () => {
    expect(files.length).toBeGreaterThanOrEqual(30);
    expect(Object.keys(reference).sort()).toEqual(files);
    expect([...stored.keys()].sort()).toEqual(files);
  });

  it.each(files)('%s: subject, sender name, attachments and body match the reference', (file) => {
    const ref = reference[file]!;
    const m = stored.get(file)!;
    const email = m.metadata.email;
    const differs = DIFFERENCES[file] ?? {};
    if (!differs.subject) expect(collapse(email.subject), 'subject').toBe(collapse(ref.subject));
    if (!differs.fromName) expect(collapse(m.sender?.name), 'sender name').toBe(collapse(ref.fromName));
    if (!differs.attachments) {
      const ours = (email.attachments as { filename: string | null }[]).map((x) => x.filename);
      for (const name of ref.attachments.filter((n): n is string => n !== null)) expect(ours, 'attachments').toContain(name);
    }
    if (!differs.hasBody && ref.hasBody) {
      expect((m.text as string).trim(), 'text').not.toBe('');
      const text = (m.text as string).toLowerCase();
      const found = ref.words.filter((w) => text.includes(w.toLowerCase()));
      expect(found.length, `words ${ref.words.join(' ')}`).toBeGreaterThanOrEqual(Math.ceil(ref.words.length / 2));
    }
  });
});
