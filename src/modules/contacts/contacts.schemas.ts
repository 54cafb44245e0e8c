import { isValidPhoneNumber } from 'libphonenumber-js/max';
import { z } from 'zod';
import { AuditFields, components, IdParam, JsonObject, LongText, ShortText, Uuid } from '../../core/schemas.js';

const nullableText = (max: number, what: string) => ShortText(max).nullable().optional().describe(what);

const ContactFields = {
  firstName: nullableText(255, 'Given name'),
  lastName: nullableText(255, 'Family name'),
  company: nullableText(255, 'Company the contact works for'),
  jobTitle: nullableText(255, 'Job title'),
  picture: z
    .url({ protocol: /^https?$/, error: 'Must be an http(s) URL' })
    .max(2048)
    .nullable()
    .optional()
    .describe('URL of a picture of the contact'),
  notes: LongText.nullable().optional().describe('Free-text notes'),
  title: nullableText(64, 'Courtesy title, e.g. "Dr" or "Ms"'),
  name: nullableText(255, 'Display name'),
  data: JsonObject.optional().describe('Free-form JSON object'),
};

export const ContactCreateInput = z.strictObject(ContactFields);
export const ContactIdParam = { id: IdParam('contact') };
export const ContactId = z.strictObject(ContactIdParam);
export const ContactUpdateInput = z.strictObject({ ...ContactIdParam, ...ContactFields });

const childAudit = { ...AuditFields, contactId: Uuid.describe('Contact the record belongs to') };
const label = (example: string) => ShortText(64).describe(`Label, e.g. "${example}"`);

export const ContactEmail = z.object({
  ...childAudit,
  email: z.string().describe('Email address'),
  label: z.string().describe('Label, e.g. "work"'),
  data: JsonObject,
});

export const ContactPhoneNumber = z.object({
  ...childAudit,
  phoneNumber: z.string().describe('The number in E.164 format, e.g. +14155550123'),
  countryCode: z.string().describe('Country calling code without "+", e.g. "1" or "44" (derived from phoneNumber)'),
  nationalNumber: z.string().describe('The national significant number, e.g. "4155550123" (derived from phoneNumber)'),
  label: z.string().describe('Label, e.g. "mobile"'),
  data: JsonObject,
});

export const ContactAddress = z.object({
  ...childAudit,
  country: z.string().describe('Country (ISO 3166-1 alpha-2 code recommended)'),
  label: z.string().describe('Label, e.g. "home"'),
  address1: z.string().describe('Street address'),
  address2: z.string().describe('Apartment, suite, floor…'),
  city: z.string(),
  state: z.string().describe('State, province or region'),
  postalCode: z.string(),
  data: JsonObject,
});

export const Contact = z.object({
  ...AuditFields,
  firstName: z.string().nullable(),
  lastName: z.string().nullable(),
  company: z.string().nullable(),
  jobTitle: z.string().nullable(),
  notes: z.string().nullable(),
  title: z.string().nullable().describe('Courtesy title'),
  name: z.string().nullable(),
  picture: z.string().nullable().describe('URL of a picture'),
  data: JsonObject,
  emails: z.array(ContactEmail).describe('Live email addresses, oldest first'),
  phoneNumbers: z.array(ContactPhoneNumber).describe('Live phone numbers, oldest first'),
  addresses: z.array(ContactAddress).describe('Live addresses, oldest first'),
});

// ------------------------------------------------------------------ child bodies

const emailFields = {
  email: z.email({ error: 'Must be a valid email address' }).max(320).describe('Email address'),
  label: label('work'),
  data: JsonObject.optional(),
};

const phoneFields = {
  phoneNumber: z
    .string()
    .max(64)
    .refine((v) => isValidPhoneNumber(v), 'Must be a valid phone number in international format, e.g. +14155550123')
    .describe('Phone number in international format (E.164 recommended), e.g. +14155550123'),
  label: label('mobile'),
  data: JsonObject.optional(),
};

const addressFields = {
  country: ShortText(64).describe('Country (ISO 3166-1 alpha-2 code recommended)'),
  label: label('home'),
  address1: ShortText(255).describe('Street address'),
  address2: ShortText(255).describe('Apartment, suite, floor…'),
  city: ShortText(255),
  state: ShortText(255).describe('State, province or region'),
  postalCode: ShortText(32),
  data: JsonObject.optional(),
};

/** Create bodies: the primary field is required, `label` defaults to "other", `data` to {}. */
export const ContactEmailCreate = { ...emailFields, label: emailFields.label.default('other') };
export const ContactPhoneNumberCreate = { ...phoneFields, label: phoneFields.label.default('other') };
export const ContactAddressCreate = Object.fromEntries(
  Object.entries(addressFields).map(([k, v]) => [k, k === 'data' ? v : (v as z.ZodString).default(k === 'label' ? 'other' : '')]),
) as { [K in keyof typeof addressFields]: K extends 'data' ? (typeof addressFields)[K] : z.ZodDefault<z.ZodString> };

/** Update bodies: every field optional. */
export const partialFields = <S extends Record<string, z.ZodType>>(fields: S) =>
  Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, v.optional()])) as { [K in keyof S]: z.ZodOptional<S[K]> };

export const ContactEmailUpdate = partialFields(emailFields);
export const ContactPhoneNumberUpdate = partialFields(phoneFields);
export const ContactAddressUpdate = partialFields(addressFields);

// Named schemas of the OpenAPI document (components/schemas).
components.add(ContactEmail, { id: 'ContactEmail' });
components.add(ContactPhoneNumber, { id: 'ContactPhoneNumber' });
components.add(ContactAddress, { id: 'ContactAddress' });
components.add(Contact, { id: 'Contact' });
