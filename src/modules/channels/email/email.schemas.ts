import { isIP } from 'node:net';
import { z } from 'zod';
import { canonicalDomain, EmailAddress } from '../../domains/domains.schemas.js';
import { CheckResult, ChannelName, ChannelUpdateShared } from '../channels.schemas.js';

/** The settings of email channels: how mail arrives (the SMTP receiver or an IMAP mailbox) and the relay it leaves through. */

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

export const ChannelCreateInput = z.strictObject({
  type: z.literal('email').describe('Kind of channel: "email"'),
  name: ChannelName,
  address: EmailAddress.describe('The address received at and sent from; unique in the organization'),
  inbound: InboundCreate,
  outbound: OutboundCreate.nullable()
    .optional()
    .describe('SMTP relay to send through; absent or null: cannot send'),
}).superRefine((v, ctx) => {
  if (v.inbound.mode === 'imap' && v.inbound.password === undefined) ctx.addIssue({ code: 'custom', path: ['inbound', 'password'], message: 'Required: an IMAP channel needs the password of its mailbox' });
});

/** The `PATCH /channels/{id}` fields of email channels. */
export const EmailUpdateFields = {
  address: EmailAddress.optional().describe('The address the organization receives and sends as'),
  inbound: InboundUpdate.optional(),
  outbound: OutboundUpdate.nullable().optional().describe('Replaces the relay (a password left out is kept); null removes it'),
};
export const ChannelUpdateInput = z.strictObject({ ...ChannelUpdateShared, ...EmailUpdateFields });


export const InboundOut = z
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

export const OutboundOut = z
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

export type ChannelCreate = z.output<typeof ChannelCreateInput>;
export type ChannelUpdate = z.output<typeof ChannelUpdateInput>;

/** Its `inbound` in the answer of `POST /channels/{id}/test`. */
export const EmailTestInbound = CheckResult.extend({ mode: z.enum(['smtp', 'imap']) }).describe('The IMAP server (mode imap); for mode smtp, whether the channel can receive (active)');
