import { domainToASCII } from 'node:url';
import { z } from 'zod';
import { AuditFields, components, IdParam, NullableTimestamp, ShortText, Timestamp, Uuid } from '../../core/schemas.js';

/** A label: letters, digits and inner hyphens, 1 to 63 characters. */
const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;
/** The top-level label: letters only, or an IDN in its `xn--` form. */
const TLD = /^(?:[a-z]{2,63}|xn--[a-z0-9-]{1,59})$/;

/**
 * A fully qualified domain name, returned in its canonical form: lowercase, internationalised names in
 * their ASCII (punycode) form, without a trailing dot; or undefined when it is not one.
 */
export function canonicalDomain(input: string): string | undefined {
  const trimmed = input.trim().replace(/\.$/, '');
  if (!trimmed || trimmed.length > 253 || /[/:@\s]/.test(trimmed)) return undefined;
  const ascii = domainToASCII(trimmed);
  if (!ascii || ascii.length > 253) return undefined;
  const labels = ascii.split('.');
  if (labels.length < 2 || !labels.every((l) => LABEL.test(l)) || !TLD.test(labels.at(-1)!)) return undefined;
  return ascii;
}

export const DomainName = z
  .string()
  .max(300)
  // On the string, not the transform: the request's JSON Schema is the string's.
  .describe('A fully qualified domain name, e.g. "example.com"; stored lowercase (internationalised names in punycode), without a trailing dot')
  .meta({ examples: ['example.com'] })
  .transform((value, ctx) => {
    const name = canonicalDomain(value);
    if (name === undefined) {
      ctx.addIssue({ code: 'custom', message: 'Must be a valid domain name, e.g. "example.com"' });
      return z.NEVER;
    }
    return name;
  });

export const DomainCreateInput = z.strictObject({ name: DomainName });

export const DomainDkim = z
  .object({
    selector: z.string().describe('The selector: the key is published at `<selector>._domainkey.<domain>`'),
    algorithm: z.literal('rsa-sha256').describe('The signing algorithm'),
    publicKey: z.string().describe('The public key (base64 DER), the `p=` of the DNS record'),
    createdAt: Timestamp.describe('When the key was generated'),
  })
  .describe('The DKIM signing key of mail sent from addresses at the domain (the private part is never returned); null until one is generated');

export const DomainVerification = z
  .object({
    status: z.enum(['pending', 'verified']).describe('"verified" once the TXT record was found (or the operator marked it so); "pending" until then'),
    token: z.string().describe('The value to publish as a TXT record at `_switchboard.<domain>`'),
    record: z
      .object({ type: z.literal('TXT'), name: z.string().describe('`_switchboard.<domain>`'), value: z.string().describe('The token') })
      .describe('The record to publish, ready to copy'),
    verifiedAt: NullableTimestamp.describe('When the domain was verified; null while pending'),
  })
  .describe(
    'Ownership of the domain. Receiving mail through the SMTP receiver at an address of the domain needs it verified: publish `record` and call `POST /domains/{id}/verify`. ' +
      'A domain is verified by one organization at most.',
  );

export const Domain = z.object({
  ...AuditFields,
  name: z.string().describe('The domain name, lowercase'),
  createdBy: Uuid.describe("API key or user that added the domain (the organization's id when the operator's command line added it)"),
  dkim: DomainDkim.nullable(),
  verification: DomainVerification,
});

export const DnsRecord = z.object({
  type: z.enum(['MX', 'TXT']).describe('Record type'),
  name: z.string().describe('The fully qualified name the record is published at'),
  value: z.string().describe('The record\'s value (for MX, the host)'),
  strings: z
    .array(z.string())
    .optional()
    .describe('TXT only: the value split into character-strings of at most 255 bytes, as DNS providers take a long value (e.g. the DKIM key): publish them as one record, in order'),
  priority: z.number().int().optional().describe('MX only: the preference'),
  purpose: z.string().describe('What the record does'),
});

// ------------------------------------------------------------------ registrations

export const DEFAULT_REGISTRATION_STATE = 'pending';

const registrationFields = {
  state: ShortText(64)
    .min(1)
    .describe('Registration state, a free string of 1 to 64 characters (e.g. "pending", "active", "expired")'),
  externalDomainId: ShortText(255).nullable().describe("The registrar's id of the domain (free string, up to 255 characters)"),
  externalId: ShortText(255).nullable().describe("The registrar's id of this registration (free string, up to 255 characters)"),
  autoRenew: z.boolean().describe('Renew automatically at the end of the period'),
  whoisPrivacy: z.boolean().describe('Hide the registrant in WHOIS'),
  transferLock: z.boolean().describe('Refuse transfers to another registrar'),
  period: z.number().int().min(1).max(10).describe('Registration period in years, 1 to 10'),
};

export const RegistrationCreateFields = {
  state: registrationFields.state.default(DEFAULT_REGISTRATION_STATE).describe(`${registrationFields.state.description} (default "pending")`),
  externalDomainId: registrationFields.externalDomainId.optional(),
  externalId: registrationFields.externalId.optional(),
  autoRenew: registrationFields.autoRenew.default(true).describe('Renew automatically at the end of the period (default true)'),
  whoisPrivacy: registrationFields.whoisPrivacy.default(true).describe('Hide the registrant in WHOIS (default true)'),
  transferLock: registrationFields.transferLock.default(true).describe('Refuse transfers to another registrar (default true)'),
  period: registrationFields.period.default(1).describe('Registration period in years, 1 to 10 (default 1)'),
};

export const RegistrationUpdateFields = Object.fromEntries(Object.entries(registrationFields).map(([k, v]) => [k, v.optional()])) as {
  [K in keyof typeof registrationFields]: z.ZodOptional<(typeof registrationFields)[K]>;
};

export const DomainRegistration = z.object({
  ...AuditFields,
  domainId: Uuid.describe('Domain the registration belongs to'),
  state: z.string().describe('Registration state (free string)'),
  externalDomainId: z.string().nullable().describe("The registrar's id of the domain"),
  externalId: z.string().nullable().describe("The registrar's id of this registration"),
  autoRenew: z.boolean(),
  whoisPrivacy: z.boolean(),
  transferLock: z.boolean(),
  period: z.number().int().describe('Registration period in years'),
  createdBy: Uuid.describe('API key or user that created the registration'),
});

export const DomainIdParam = { id: IdParam('domain') };
export const DomainId = z.strictObject(DomainIdParam);

// Named schemas of the OpenAPI document (components/schemas).
components.add(Domain, { id: 'Domain' });
components.add(DomainRegistration, { id: 'DomainRegistration' });

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
