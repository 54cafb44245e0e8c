import { z } from 'zod';
import { AuditFields, IdParam, NullableTimestamp, ShortText } from '../../core/schemas.js';

/** What every channel kind shares in requests and answers; each kind's own fields are in its folder, the whole `Channel` in kinds.ts. */

export const CHANNEL_STATUSES = ['active', 'error', 'disabled'] as const;

export const ChannelName = ShortText(255).min(1).describe('A name for people, e.g. "Support"');

export const ChannelIdParam = { id: IdParam('channel') };
export const ChannelId = z.strictObject(ChannelIdParam);

/** `PATCH /channels/{id}`: the fields every kind takes. */
export const ChannelUpdateShared = {
  ...ChannelIdParam,
  name: ChannelName.optional(),
  status: z
    .enum(['active', 'disabled'])
    .optional()
    .describe('"disabled" stops receiving and syncing; "active" resumes'),
};

/** The fields of every channel in answers, in their order (`inbound` and the kind's own fields come from the kinds). */
export const ChannelHead = {
  ...AuditFields,
  name: z.string().describe('A name for people'),
  address: z.string().describe('The address the organization receives and sends as (lower-cased)'),
};
export const ChannelTail = {
  status: z.enum(CHANNEL_STATUSES).describe('"active"; "error" while receiving or syncing fails (see `lastError`); "disabled" by a person'),
  lastError: z.string().nullable().describe('What failed last (connection, login, …); null when the last attempt worked'),
  lastSyncAt: NullableTimestamp.describe('When mail was last received or synced on this channel'),
  warnings: z
    .array(z.string())
    .describe('Settings that weaken the channel\'s security, for a person to see: a server reached without TLS (`tls` "none") or without checking its certificate; empty when none'),
};

export const CheckResult = z.object({
  ok: z.boolean().describe('Whether every step worked'),
  steps: z
    .array(z.object({ step: z.string().describe('What was tried: "resolve", "connect", "login", "mailbox", "greeting"'), ok: z.boolean(), detail: z.string().nullable() }))
    .describe('The steps tried, in order; the first failed one ends the check'),
  error: z.string().nullable().describe('Why the check failed; null when it worked'),
});

export const ChannelTestFields = {
  ok: z.boolean().describe('Whether every configured server was reached and accepted the login'),
  outbound: CheckResult.nullable().describe('The SMTP relay: greeting and authentication; null when none is configured'),
};
