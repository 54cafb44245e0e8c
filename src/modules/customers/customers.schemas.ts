import { z } from 'zod';
import { AuditFields, components, DateTimeInput, IdParam, JsonObject, LongText, NullableTimestamp, ShortText, Uuid } from '../../core/schemas.js';

const open = (what: string, examples: string) => `${what}; any string up to 64 characters (the set of values is open), e.g. ${examples}`;

// ------------------------------------------------------------------ customers

export const Customer = z.object({
  ...AuditFields,
  businessId: Uuid.nullable().describe('Business the customer is a customer of; null when none'),
  contactId: Uuid.nullable().describe('Contact that describes the customer; null when none'),
  type: z.string().nullable().describe(open('Kind of customer', '"individual", "company"')),
  name: z.string().nullable().describe('Name of the customer'),
  email: z.string().nullable().describe('Email address'),
  phone: z.string().nullable().describe('Phone number, as given'),
  notes: z.string().nullable().describe('Free-text notes'),
  status: z.string().nullable().describe(open('Status', '"lead", "active", "inactive"')),
  customerSince: NullableTimestamp.describe('When the customer became a customer (ISO 8601 UTC)'),
  data: JsonObject,
});

const ref = (what: string) => Uuid.nullable().optional().describe(`${what}; must be a live record of the organization. null clears it`);
const openValue = (what: string, examples: string) => ShortText(64).nullable().optional().describe(open(what, examples));

const customerFields = {
  businessId: ref('Business the customer is a customer of'),
  contactId: ref('Contact that describes the customer'),
  type: openValue('Kind of customer', '"individual", "company"'),
  name: ShortText(255).trim().min(1).nullable().optional().describe('Name of the customer, 1 to 255 characters'),
  email: z.email({ error: 'Must be a valid email address' }).max(320).nullable().optional().describe('Email address'),
  phone: ShortText(64).nullable().optional().describe('Phone number, any format up to 64 characters'),
  notes: LongText.nullable().optional().describe('Free-text notes, up to 100,000 characters'),
  status: openValue('Status', '"lead", "active", "inactive"'),
  customerSince: DateTimeInput.nullable().optional().describe('When the customer became a customer (ISO 8601)'),
  data: JsonObject.optional().describe('Free-form JSON object; defaults to {}'),
};

export const CustomerIdParam = { id: IdParam('customer') };
export const CustomerId = z.strictObject(CustomerIdParam);

/** POST /customers: every field is optional (like a contact's). */
export const CustomerCreateInput = z.strictObject(customerFields);

/** PATCH /customers/{id}: any subset; null clears a field. */
export const CustomerUpdateInput = z.strictObject({
  ...CustomerIdParam,
  ...customerFields,
  data: JsonObject.optional().describe('Free-form JSON object; replaces the stored one'),
});

// ------------------------------------------------------------------ transactions

/** Up to 15 digits before the point and 6 after; stored exactly (PostgreSQL `numeric`). */
export const AMOUNT_PATTERN = /^-?\d{1,15}(\.\d{1,6})?$/;

export const CustomerTransaction = z.object({
  ...AuditFields,
  businessId: Uuid.nullable().describe('Business the transaction belongs to; null when none'),
  customerId: Uuid.describe('Customer the transaction belongs to'),
  amount: z.string().describe('Decimal amount as a string, exactly as stored, e.g. "-12.50"'),
  currency: z.string().describe('ISO 4217 currency code, e.g. "EUR"'),
  status: z.string().describe(open('Status', '"pending", "completed", "failed", "refunded"')),
  type: z.string().describe(open('Kind of transaction', '"payment", "refund", "invoice"')),
  description: z.string().nullable().describe('Free-text description'),
  transactionDate: NullableTimestamp.describe('When the transaction took place (ISO 8601 UTC)'),
});

const transactionFields = {
  businessId: Uuid.nullable()
    .optional()
    .describe("Business the transaction belongs to; must be a live business of the organization. Defaults to the customer's business; null for none"),
  amount: z
    .string()
    .regex(AMOUNT_PATTERN, 'Must be a decimal number as a string: up to 15 digits, optionally "." and up to 6 decimals, e.g. "-12.50"')
    .describe('Decimal amount as a string (up to 15 digits, optionally "." and up to 6 decimals; negative allowed), e.g. "49.90"'),
  currency: z
    .string()
    .regex(/^[A-Z]{3}$/, 'Must be an ISO 4217 code: three uppercase letters, e.g. "USD"')
    .describe('ISO 4217 currency code, three uppercase letters, e.g. "USD"'),
  status: ShortText(64).min(1).describe(open('Status', '"pending", "completed", "failed", "refunded"')),
  type: ShortText(64).min(1).describe(open('Kind of transaction', '"payment", "refund", "invoice"')),
  description: ShortText(2000).nullable().optional().describe('Free-text description, up to 2,000 characters'),
  transactionDate: DateTimeInput.nullable().optional().describe('When the transaction took place (ISO 8601)'),
};

/** POST /customers/{id}/transactions: `amount`, `currency`, `status` and `type` are required. */
export const TransactionCreateFields = {
  ...transactionFields,
  amount: transactionFields.amount.describe(`Required. ${transactionFields.amount.description}`),
  currency: transactionFields.currency.describe(`Required. ${transactionFields.currency.description}`),
  status: transactionFields.status.describe(`Required. ${transactionFields.status.description}`),
  type: transactionFields.type.describe(`Required. ${transactionFields.type.description}`),
};

/** PUT /customers/{id}/transactions/{transactionId}: partial bodies, exactly like a PATCH. */
export const TransactionUpdateFields = {
  businessId: Uuid.nullable().optional().describe('Business the transaction belongs to; must be a live business of the organization; null for none'),
  amount: transactionFields.amount.optional(),
  currency: transactionFields.currency.optional(),
  status: transactionFields.status.optional(),
  type: transactionFields.type.optional(),
  description: transactionFields.description,
  transactionDate: transactionFields.transactionDate,
};

// Named schemas of the OpenAPI document (components/schemas).
components.add(Customer, { id: 'Customer' });
components.add(CustomerTransaction, { id: 'CustomerTransaction' });
