import { isIP } from 'node:net';
import { z } from 'zod';
import { IdParam, LongText, Timestamp, Uuid } from '../../../core/schemas.js';
import { canonicalDomain } from '../../domains/domains.schemas.js';
import { CheckResult } from '../channels.schemas.js';
import { e164, isAlphanumericSender } from './numbers.js';
import { MAX_SEGMENTS, smsSize } from './segments.js';

/** A phone number in a request: any international form, stored and answered in E.164. */
export const PhoneNumber = z
  .string()
  .max(40)
  .transform((value, ctx) => {
    const number = e164(value);
    if (!number) {
      ctx.addIssue({ code: 'custom', message: `"${value.slice(0, 40)}" is not a valid phone number: give it in international form, e.g. "+14155550123"` });
      return z.NEVER;
    }
    return number;
  })
  .describe('A phone number in international form, e.g. "+14155550123" (stored in E.164)');

/** A text channel's address: its number, or an alphanumeric sender id (which can only send). */
const SmsAddress = z
  .string()
  .max(40)
  .transform((value, ctx) => {
    const number = e164(value);
    if (number) return number;
    if (isAlphanumericSender(value.trim())) return value.trim();
    ctx.addIssue({ code: 'custom', message: 'Must be a phone number in international form ("+14155550123") or an alphanumeric sender id (1 to 11 letters and digits)' });
    return z.NEVER;
  })
  .describe('The number, E.164, or an alphanumeric sender id (send only)');

const ProviderHost = z
  .string()
  .trim()
  .min(1)
  .max(253)
  .refine((v) => isIP(v) !== 0 || canonicalDomain(v) !== undefined || v === 'localhost', { message: 'Must be a host name or an IP address' })
  .describe('Host name or IP address of the SMSC');

const HttpUrl = z
  .url({ protocol: /^https?$/, error: 'Must be an http(s) URL' })
  .max(500)
  .refine((v) => !new URL(v).search && !new URL(v).hash, { message: 'Must be a base URL without query or fragment' });

const twilioFields = {
  kind: z.literal('twilio').describe('Twilio or a compatible API (SignalWire)'),
  accountSid: z.string().trim().min(1).max(64).describe('Account (project) id'),
  apiBaseUrl: HttpUrl.default('https://api.twilio.com').describe('Default "https://api.twilio.com"'),
  messagingServiceSid: z.string().trim().min(1).max(64).optional().describe('Send through this messaging service'),
};
const AuthToken = z.string().min(1).max(500).describe('Write-only, encrypted');
const smppFields = {
  kind: z.literal('smpp').describe('SMPP 3.4 bind (docs/sms.md)'),
  host: ProviderHost,
  port: z.number().int().min(1).max(65535).default(2775).describe('SMPP port; default 2775'),
  tls: z.boolean().default(true).describe('TLS to the SMSC; default true'),
  systemId: z.string().min(1).max(15),
  systemType: z.string().max(12).optional(),
};
const SmppPassword = z.string().min(1).max(8).describe('Write-only, encrypted');

/**
 * SMPP (`{"kind": "smpp", "host", "port", "tls", "systemId", "password", "systemType"?}`, CONTRACT §9): the
 * documents show only its `kind`, to keep the tool list small (docs/sms.md has the rest); the request is
 * checked against `SmppProviderSettings`, its errors standing at their own fields under `provider`.
 */
export const SmppProviderSettings = z.strictObject({ ...smppFields, password: SmppPassword });

const SmppProvider = z.looseObject({ kind: smppFields.kind }).transform((value, ctx) => {
  const parsed = SmppProviderSettings.safeParse(value);
  if (parsed.success) return parsed.data;
  for (const issue of parsed.error.issues) ctx.addIssue({ code: 'custom', message: issue.message, path: issue.path, input: undefined });
  return z.NEVER;
});

export const SmsProviderCreate = z
  .discriminatedUnion('kind', [z.strictObject({ ...twilioFields, authToken: AuthToken }), SmppProvider])
  .describe('Text channels: the provider (docs/sms.md)');
/** On update the provider is replaced whole, its secret included. */
export const SmsProviderUpdate = SmsProviderCreate;

const Rate = z.number().min(0.1).max(1000).describe('Segments per second at most; default 1');
const HelpText = z.string().trim().min(1).max(640).nullable().describe('The answer to HELP; null: none');

export const SmsChannelCreateInput = z.strictObject({
  type: z.literal('sms').describe('"sms": a text-message channel'),
  name: z.string().max(255).min(1).describe('A name for people, e.g. "Support line"'),
  address: SmsAddress,
  provider: SmsProviderCreate,
  rate: Rate.default(1),
  helpText: HelpText.optional(),
});
export type SmsChannelCreate = z.output<typeof SmsChannelCreateInput>;

/** The text-channel fields `PATCH /channels/{id}` takes besides name and status. */
export const SmsChannelUpdateFields = {
  provider: SmsProviderUpdate.optional(),
  rate: Rate.optional(),
  helpText: HelpText.optional(),
};

export const ProviderOut = z
  .object({
    kind: z.enum(['twilio', 'smpp']),
    accountSid: z.string().optional(),
    apiBaseUrl: z.string().optional(),
    messagingServiceSid: z.string().nullable().optional(),
    authTokenSet: z.boolean().optional().describe('Twilio: whether an auth token is stored (never returned)'),
    host: z.string().optional(),
    port: z.number().int().optional(),
    tls: z.boolean().optional(),
    systemId: z.string().optional(),
    systemType: z.string().nullable().optional(),
    passwordSet: z.boolean().optional().describe('SMPP: whether a password is stored (never returned)'),
  })
  .describe('How a text channel reaches the phone network; secrets are never returned');

export const SmsInboundOut = z
  .object({
    mode: z.literal('sms'),
    webhookUrl: z.string().nullable().describe('Twilio-compatible: paste into the number\'s "A message comes in" webhook (POST); null for SMPP'),
    statusUrl: z.string().nullable().describe('Twilio-compatible: the status callback URL (the service also names it on every text it sends); null for SMPP'),
  })
  .describe('Where a text channel\'s provider delivers');

/** Its `inbound` in the answer of `POST /channels/{id}/test`. */
export const SmsTestInbound = CheckResult.extend({ mode: z.literal('sms') });

/** The fields of text channels in answers besides the shared ones. */
export const SmsOutputFields = {
  provider: ProviderOut.optional(),
  rate: z.number().optional().describe('Text channels: segments per second sent at most'),
  helpText: z.string().nullable().optional().describe('Text channels: the answer to HELP'),
};

// ------------------------------------------------------------------ sending

/** `to` of a text: numbers. */
const Numbers = z.array(PhoneNumber).min(1).max(50);

/** The text of a text message: at most 10 segments. */
export const SmsText = LongText.min(1)
  .superRefine((value, ctx) => {
    const size = smsSize(value);
    if (size.segments > MAX_SEGMENTS) ctx.addIssue({ code: 'custom', message: `Too long for a text: ${size.segments} segments (${size.encoding}); at most ${MAX_SEGMENTS}` });
  })
  .describe('The text');

export const SmsSendInput = z.strictObject({
  channelId: Uuid.optional(),
  to: Numbers,
  text: SmsText,
  replyToMessageId: Uuid.optional(),
});
export type SmsSendValues = z.output<typeof SmsSendInput>;

// ------------------------------------------------------------------ opt-outs

export const OptOut = z.object({
  id: z.uuid(),
  channelId: z.uuid().describe('The channel the number opted out of'),
  phoneNumber: z.string().describe('The number that receives nothing more on the channel (E.164, or as the provider named it)'),
  source: z.enum(['keyword', 'provider', 'api']).describe('"keyword": it texted STOP (or STOPALL, UNSUBSCRIBE, CANCEL, END, QUIT); "provider": the provider reported it unsubscribed (Twilio error 21610); "api": added through the API'),
  createdAt: Timestamp,
});

export const OptOutListInput = { id: IdParam('channel') };
export const OptOutCreateInput = z.strictObject({ id: IdParam('channel'), phoneNumber: PhoneNumber });
export const OptOutDeleteInput = z.strictObject({
  id: IdParam('channel'),
  number: z
    .union([z.uuid(), PhoneNumber])
    .describe('The opted-out number (E.164; URL-encode the "+" as %2B) or the opt-out\'s id')
    .meta({ examples: ['+14155550123'] }),
});
