import { z } from 'zod';
import { IdParam, LongText, Timestamp, Uuid } from '../../../core/schemas.js';
import { CheckResult } from '../channels.schemas.js';
import { SMS_PROVIDERS } from './providers/index.js';
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

/** `provider` of a new text channel: the shape of the provider its `kind` names (providers/index.ts). */
export const SmsProviderCreate = z
  .discriminatedUnion('kind', SMS_PROVIDERS.map((p) => p.schema) as unknown as [z.ZodObject, z.ZodObject, ...z.ZodObject[]])
  .describe('Text channels: the provider (docs/sms.md)');
/** On update the provider is replaced whole, its secrets included. */
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
  .object({ kind: z.enum(SMS_PROVIDERS.map((p) => p.kind) as [string, ...string[]]), ...(Object.assign({}, ...SMS_PROVIDERS.map((p) => p.output)) as Record<string, z.ZodType>) })
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
