import { isIP } from 'node:net';
import { domainToASCII } from 'node:url';
import { z } from 'zod';
import { AuditFields, components, IdParam, NullableTimestamp, ShortText } from '../../core/schemas.js';
import { canonicalDomain } from '../domains/domains.schemas.js';

export const CHANNEL_TYPES = ['email'] as const;
export const CHANNEL_STATUSES = ['active', 'error', 'disabled'] as const;

/**
 * An address as stored: lower-cased, its domain in A-labels (IDNA, as `canonicalDomain` stores a domain), so
 * "support@bücher.example" and "support@xn--bcher-kva.example" are one address; undefined when it is none.
 */
export function asciiEmail(input: string): string | undefined {
  const at = input.lastIndexOf('@');
  const given = input.slice(at + 1);
  // A label starts and ends with a letter or digit in either form ("-bücher" has an A-label that would pass).
  if (at < 0 || given.split('.').some((label) => label.startsWith('-') || label.endsWith('-'))) return undefined;
  const domain = domainToASCII(given.toLowerCase());
  const address = `${input.slice(0, at).toLowerCase()}@${domain}`;
  return domain && address.length <= 320 && z.regexes.email.test(address) ? address : undefined;
}

/** An email address, its domain in Unicode or A-labels; stored as `asciiEmail` gives it. */
export const EmailAddress = z
  .string()
  .max(320)
  .meta({ format: 'idn-email' })
  .describe('Email address, stored lower-cased')
  .transform((value, ctx) => {
    const address = asciiEmail(value);
    if (address === undefined) {
      ctx.addIssue({ code: 'custom', message: 'Must be a valid email address' });
      return z.NEVER;
    }
    return address;
  });

/** A mail server's host: a domain name or an IP address (checked against private ranges when connecting). */
const MailHost = z
  .string()
  .trim()
  .min(1)
  .max(253)
  .describe('Host name or IP address of the mail server')
  .refine((v) => isIP(v.replace(/^\[|\]$/g, '')) !== 0 || canonicalDomain(v) !== undefined || v === 'localhost', { message: 'Must be a host name or an IP address' });

const Port = z.number().int().min(1).max(65535);
const Password = z.string().min(1).max(1000).describe('Password (write-only, stored encrypted)');
const Username = z.string().min(1).max(320).describe('User name to log in with');
const Mailbox = z.string().min(1).max(255).default('INBOX').describe('Mailbox (folder) to sync; default "INBOX"');

const PEM_CERTIFICATE = /^-----BEGIN CERTIFICATE-----[\s\S]+-----END CERTIFICATE-----\s*$/;

/**
 * Secrets travel only over TLS: the settings every mail server of a channel has (kept short: they are in
 * the MCP tool's schema four times). `docs/email.md` tells the whole story.
 */
const tlsFields = {
  tls: z.enum(['required', 'none']).default('required').describe('"required" (default): no login without TLS; "none": LAN only'),
  ca: z
    .string()
    .max(20_000)
    .refine((v) => PEM_CERTIFICATE.test(v), { message: 'Must be a PEM certificate ("-----BEGIN CERTIFICATE----- …")' })
    .nullable()
    .optional()
    .describe('PEM certificate to trust'),
  verifyCertificate: z.boolean().default(true).describe('false: LAN only'),
};

export const InboundSmtp = z.strictObject({
  mode: z.literal('smtp').describe('"smtp": mail arrives at the built-in SMTP receiver'),
});

const imapFields = {
  mode: z.literal('imap').describe('"imap": the service syncs a mailbox of an IMAP server'),
  host: MailHost,
  port: Port.default(993).describe('IMAP port; default 993'),
  secure: z.boolean().default(true).describe('TLS from the start (port 993); false: STARTTLS when offered; default true'),
  username: Username,
  mailbox: Mailbox,
  ...tlsFields,
};

/**
 * One shape for create and update (so the MCP tool describes it once): the password is required when a channel
 * is created (checked by ChannelCreateInput) and may be left out of an update, which keeps the stored one.
 */
export const InboundImap = z.strictObject({ ...imapFields, password: Password.optional() });

const outboundFields = {
  host: MailHost.describe('Host name or IP address of the SMTP relay'),
  port: Port.default(587).describe('SMTP port; default 587'),
  secure: z.boolean().default(false).describe('TLS from the start (port 465); false: STARTTLS when offered (port 587); default false'),
  username: Username.optional(),
  from: z.string().max(500).optional().describe('From header, e.g. "Acme <support@acme.example>": the address, or one at a verified domain; default the address'),
  ...tlsFields,
};
export const OutboundCreate = z.strictObject({ ...outboundFields, password: Password.optional() });
export const OutboundUpdate = z.strictObject({ ...outboundFields, password: Password.optional() });

const Inbound = z.discriminatedUnion('mode', [InboundSmtp, InboundImap]);
const InboundCreate = Inbound.describe('How mail arrives: {"mode": "smtp"} or {"mode": "imap", "host", "username", "password", …}');
const InboundUpdate = Inbound.describe('Replaces the inbound settings; an IMAP password left out is kept');

const name = ShortText(255).min(1).describe('A name for people, e.g. "Support"');

export const ChannelCreateInput = z.strictObject({
  type: z.enum(CHANNEL_TYPES).describe('Kind of channel: "email"'),
  name,
  address: EmailAddress.describe('The address received at and sent from; unique in the organization'),
  inbound: InboundCreate,
  outbound: OutboundCreate.nullable()
    .optional()
    .describe('SMTP relay to send through; absent or null: cannot send'),
}).superRefine((v, ctx) => {
  if (v.inbound.mode === 'imap' && v.inbound.password === undefined) ctx.addIssue({ code: 'custom', path: ['inbound', 'password'], message: 'Required: an IMAP channel needs the password of its mailbox' });
});

export const ChannelIdParam = { id: IdParam('channel') };
export const ChannelId = z.strictObject(ChannelIdParam);

export const ChannelUpdateInput = z.strictObject({
  ...ChannelIdParam,
  name: name.optional(),
  address: EmailAddress.optional().describe('The address the organization receives and sends as'),
  inbound: InboundUpdate.optional(),
  outbound: OutboundUpdate.nullable().optional().describe('Replaces the relay (a password left out is kept); null removes it'),
  status: z
    .enum(['active', 'disabled'])
    .optional()
    .describe('"disabled" stops receiving and syncing; "active" resumes'),
});

const InboundOut = z
  .object({
    mode: z.enum(['smtp', 'imap']),
    host: z.string().optional(),
    port: z.number().int().optional(),
    secure: z.boolean().optional(),
    username: z.string().optional(),
    mailbox: z.string().optional(),
    tls: z.enum(['required', 'none']).optional().describe('IMAP: "required" or "none"'),
    ca: z.string().nullable().optional().describe('IMAP: the PEM certificate trusted for the server; null: the system\'s authorities'),
    verifyCertificate: z.boolean().optional().describe("IMAP: whether the server's certificate is checked"),
    passwordSet: z.boolean().describe('Whether a password is stored (the password itself is never returned)'),
  })
  .describe('How mail arrives; the password is never returned');

const OutboundOut = z
  .object({
    host: z.string(),
    port: z.number().int(),
    secure: z.boolean(),
    username: z.string().nullable(),
    from: z.string().nullable(),
    tls: z.enum(['required', 'none']).describe('"required": no login and no mail without TLS; "none": TLS only when offered'),
    ca: z.string().nullable().describe("The PEM certificate trusted for the relay; null: the system's authorities"),
    verifyCertificate: z.boolean().describe("Whether the relay's certificate is checked"),
    passwordSet: z.boolean().describe('Whether a password is stored (the password itself is never returned)'),
  })
  .nullable()
  .describe('The SMTP relay mail is sent through; null: the channel cannot send');

export const Channel = z.object({
  ...AuditFields,
  type: z.enum(CHANNEL_TYPES).describe('Kind of channel'),
  name: z.string().describe('A name for people'),
  address: z.string().describe('The address the organization receives and sends as (lower-cased)'),
  inbound: InboundOut,
  outbound: OutboundOut,
  status: z.enum(CHANNEL_STATUSES).describe('"active"; "error" while receiving or syncing fails (see `lastError`); "disabled" by a person'),
  lastError: z.string().nullable().describe('What failed last (connection, login, …); null when the last attempt worked'),
  lastSyncAt: NullableTimestamp.describe('When mail was last received or synced on this channel'),
  warnings: z
    .array(z.string())
    .describe('Settings that weaken the channel\'s security, for a person to see: a server reached without TLS (`tls` "none") or without checking its certificate; empty when none'),
});

const CheckResult = z.object({
  ok: z.boolean().describe('Whether every step worked'),
  steps: z
    .array(z.object({ step: z.string().describe('What was tried: "resolve", "connect", "login", "mailbox", "greeting"'), ok: z.boolean(), detail: z.string().nullable() }))
    .describe('The steps tried, in order; the first failed one ends the check'),
  error: z.string().nullable().describe('Why the check failed; null when it worked'),
});

export const ChannelTestResult = z.object({
  ok: z.boolean().describe('Whether every configured server was reached and accepted the login'),
  inbound: CheckResult.extend({ mode: z.enum(['smtp', 'imap']) }).describe('The IMAP server (mode imap); for mode smtp, whether the channel can receive (active)'),
  outbound: CheckResult.nullable().describe('The SMTP relay: greeting and authentication; null when none is configured'),
});

export type ChannelCreate = z.output<typeof ChannelCreateInput>;
export type ChannelUpdate = z.output<typeof ChannelUpdateInput>;

components.add(Channel, { id: 'Channel' });
components.add(ChannelTestResult, { id: 'ChannelTestResult' });
