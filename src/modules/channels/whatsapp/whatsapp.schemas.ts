import { z } from 'zod';
import { Uuid } from '../../../core/schemas.js';
import { e164 } from '../sms/numbers.js';
import { META_API_VERSION, META_GRAPH_URL } from './meta.js';

/**
 * The shapes of WhatsApp channels (CONTRACT §10): the channel's create and update input, how it is answered,
 * and the WhatsApp fields of `messages/send` (free-form `text` or a `template`).
 */

const BusinessNumber = z
  .string()
  .max(40)
  .transform((value, ctx) => {
    const number = e164(value);
    if (!number) {
      ctx.addIssue({ code: 'custom', message: 'Must be the business phone number in international form, e.g. "+14155550123"' });
      return z.NEVER;
    }
    return number;
  })
  .describe('The business number, E.164');

const GraphId = (what: string) =>
  z
    .string()
    .trim()
    .regex(/^\d{1,32}$/, `Must be Meta's numeric ${what}`)
    .describe(`Meta's ${what} (digits)`);

const HttpUrl = z
  .url({ protocol: /^https?$/, error: 'Must be an http(s) URL' })
  .max(500)
  .refine((v) => !new URL(v).search && !new URL(v).hash, { message: 'Must be a base URL without query or fragment' });

const Secret = z.string().min(1).max(1000);

const metaFields = {
  kind: z.literal('meta').describe("Meta's WhatsApp Business Cloud API (docs/whatsapp.md)"),
  phoneNumberId: GraphId('phone number id'),
  businessAccountId: GraphId('WhatsApp Business Account id').optional(),
  apiBaseUrl: HttpUrl.default(META_GRAPH_URL).describe(`Default "${META_GRAPH_URL}"`),
  apiVersion: z
    .string()
    .regex(/^v\d{1,3}\.\d{1,3}$/, 'Must be a Graph API version such as "v24.0"')
    .default(META_API_VERSION)
    .describe(`Graph API version; default "${META_API_VERSION}"`),
};

export const MetaProviderSettings = z
  .strictObject({
    ...metaFields,
    accessToken: Secret.describe('A system user access token with whatsapp_business_messaging (write-only, encrypted)'),
    appSecret: Secret.describe("The Meta app's secret, which signs its webhooks (write-only, encrypted)"),
  })
  .describe('WhatsApp channels: Meta\'s Cloud API (docs/whatsapp.md)');

/** On update the provider may leave out its secrets (the stored ones are kept). */
export const MetaProviderUpdateSettings = z
  .strictObject({ ...metaFields, accessToken: Secret.optional().describe('Write-only; left out: kept'), appSecret: Secret.optional().describe('Write-only; left out: kept') })
  .describe("WhatsApp channels: Meta's Cloud API; a secret left out is kept");

/**
 * Meta's provider as the documents show it: its `kind` only, to keep the tool list small (docs/whatsapp.md and
 * CONTRACT §10 have the rest); the request is checked against the full shape, its errors at their own fields
 * under `provider`.
 */
function documentedAsKind<T extends z.ZodType>(full: T) {
  return z.looseObject({ kind: metaFields.kind }).transform((value, ctx): z.output<T> => {
    const parsed = full.safeParse(value);
    if (parsed.success) return parsed.data;
    for (const issue of parsed.error.issues) ctx.addIssue({ code: 'custom', message: issue.message, path: issue.path, input: undefined });
    return z.NEVER;
  });
}
export const MetaProviderInput = documentedAsKind(MetaProviderSettings);
export const MetaProviderUpdate = documentedAsKind(MetaProviderUpdateSettings);

const Rate = z.number().min(0.1).max(1000).describe('Messages per second at most; default 20');

export const WhatsAppChannelCreateInput = z.strictObject({
  type: z.literal('whatsapp').describe('"whatsapp": a WhatsApp Business number'),
  name: z.string().max(255).min(1),
  address: BusinessNumber,
  provider: MetaProviderInput,
  rate: Rate.default(20),
});
export type WhatsAppChannelCreate = z.output<typeof WhatsAppChannelCreateInput>;

/** The WhatsApp fields `PATCH /channels/{id}` takes besides name and status. */
export const WhatsAppChannelUpdateFields = {
  provider: MetaProviderUpdate.optional(),
  rate: Rate.optional(),
};

/** How a WhatsApp channel's provider is answered: its settings, and whether each secret is stored (never the secret). */
export const MetaProviderOut = z.object({
  kind: z.literal('meta'),
  phoneNumberId: z.string(),
  businessAccountId: z.string().nullable(),
  apiBaseUrl: z.string(),
  apiVersion: z.string(),
  accessTokenSet: z.boolean().describe('Whether an access token is stored (never returned)'),
  appSecretSet: z.boolean().describe('Whether an app secret is stored (never returned)'),
});

export const WhatsAppInboundOut = z
  .object({
    mode: z.literal('whatsapp'),
    webhookUrl: z.string().describe("Paste into the Meta app's WhatsApp webhook: Callback URL (subscribe to the `messages` field)"),
    verifyToken: z.string().describe('Paste into the Meta app\'s WhatsApp webhook: Verify token'),
  })
  .describe("Where Meta delivers a WhatsApp channel's messages");

// ------------------------------------------------------------------ sending

/** A template message: its name, language code and, when it has parameters, its components as Meta takes them. */
export const TemplateInput = z
  .strictObject({
    name: z.string().trim().min(1).max(512).describe('The approved template\'s name'),
    language: z
      .string()
      .regex(/^[a-z]{2,3}(_[A-Za-z]{2,4})?$/, 'Must be a language code such as "en" or "en_US"')
      .describe('Its language code, e.g. "en_US"'),
    components: z.array(z.record(z.string(), z.unknown())).max(20).optional().describe("Parameters, as Meta's `components` (header, body, buttons)"),
  })
  .describe('WhatsApp: a template (may be sent at any time) instead of `text`');

/**
 * `template` in `messages/send`: checked against `TemplateInput`, its errors at their own fields, while the
 * documents show one line (the tool list stays small; docs/whatsapp.md has the rest).
 */
const TemplateField = z
  .looseObject({})
  .transform((value, ctx) => {
    const parsed = TemplateInput.safeParse(value);
    if (parsed.success) return parsed.data;
    for (const issue of parsed.error.issues) ctx.addIssue({ code: 'custom', message: issue.message, path: issue.path, input: undefined });
    return z.NEVER;
  })
  .describe('WhatsApp: a template `{ "name", "language", "components"? }`, sent any time, instead of `text`');

/** A WhatsApp recipient in `to`: a phone number, or a business-scoped user id (for a sender known only by it). */
export const WhatsAppRecipient = z
  .string()
  .trim()
  .max(200)
  .transform((value, ctx) => {
    const number = e164(value);
    if (number) return number;
    if (/^[A-Z]{2}\.[A-Za-z0-9._-]{1,190}$/.test(value)) return value;
    ctx.addIssue({ code: 'custom', message: `"${value.slice(0, 40)}" is neither a phone number in international form nor a WhatsApp business-scoped user id` });
    return z.NEVER;
  });

export const WhatsAppSendInput = z
  .strictObject({
    channelId: Uuid,
    to: z.array(WhatsAppRecipient).min(1).max(50),
    text: z.string().min(1).max(4096).optional(),
    template: TemplateField.optional(),
    replyToMessageId: Uuid.optional(),
  })
  .superRefine((v, ctx) => {
    if ((v.text === undefined) === (v.template === undefined)) ctx.addIssue({ code: 'custom', path: ['text'], message: 'Give either `text` (within the 24-hour window) or `template`' });
  });
export type WhatsAppSendValues = z.output<typeof WhatsAppSendInput>;
