import { z } from 'zod';
import { AuditFields, components } from '../../core/schemas.js';
import { fieldError, validationError } from '../../core/errors.js';
import type { ChannelRow } from './channels.repository.js';
import { ChannelHead, ChannelTail, ChannelTestFields, ChannelUpdateShared } from './channels.schemas.js';
import { emailKind } from './email/email.kind.js';
import type { ChannelJson, ChannelKind, KindConfig, KindHook } from './kind.js';
import { routedObject } from './routed.js';
import { smsKind } from './sms/sms.kind.js';
import { whatsappKind } from './whatsapp/whatsapp.kind.js';

/**
 * The channel kinds, one line each: every place that treats channels differently by kind asks this table by
 * the channel's stored `type`. A kind's `type` in the schema (`channels.type`) must be here too (checked by
 * the compiler), and the first kind is the one a message without a channel is answered as.
 */
export const CHANNEL_KINDS = {
  email: emailKind,
  sms: smsKind,
  whatsapp: whatsappKind,
} as const satisfies Record<ChannelRow['type'], ChannelKind>;

const KINDS: ChannelKind[] = Object.values(CHANNEL_KINDS);
/** Every kind, in the registry's order. */
export const channelKinds = (): readonly ChannelKind[] => KINDS;

/** Every kind takes its settings from the configuration (the application calls this once, at start). */
export function initKinds(config: KindConfig): void {
  for (const kind of KINDS) kind.init?.(config);
}

/** The webhooks of the kinds whose providers call in, served by the one hook route (`src/http/hooks.ts`). */
export const channelHooks = (): KindHook[] => KINDS.flatMap((k) => (k.hook ? [k.hook] : []));

/** The kind of a stored channel (or of a channel's `type`). */
export const kindOf = (channel: Pick<ChannelRow, 'type'>): ChannelKind => CHANNEL_KINDS[channel.type];

/** The first kind: what a message without a channel is answered as (its handler explains what is missing). */
export const FIRST_KIND: ChannelKind = KINDS[0]!;
/** Every kind's `messages/send` shape, in the registry's order (a plan's send whose channel is known only at run time is judged by them). */
export const sendSchemas = (): z.ZodType[] => KINDS.map((k) => k.schemas.send.schema);

/** The kind a `type` names, when it names one. */
export const kindNamed = (type: unknown): ChannelKind | undefined => (typeof type === 'string' && Object.hasOwn(CHANNEL_KINDS, type) ? CHANNEL_KINDS[type as ChannelRow['type']] : undefined);

/** A channel as the API answers it, whatever its kind. */
export const toChannel = (row: ChannelRow): ChannelJson => kindOf(row).toJson(row);

/** Checks an input with a kind's own shape, its errors shaped as every validation error is. */
export function parseAs<T = Record<string, unknown>>(schema: z.ZodType, value: unknown): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw validationError(parsed.error);
  return parsed.data as T;
}

/**
 * Every kind's fields in one record (the documents' channel, the shared PATCH body). A field only one kind has
 * keeps its schema; a field several kinds have (`provider`, `rate`) is documented as `routedObject` documents
 * it (the first kind's rules, every kind's description) and taken as it comes: the channel's kind checks it with
 * its own shape (`ownPatch`), so that one kind's shape never replaces another's.
 */
function mergedFields(records: { kind: ChannelKind; fields: Record<string, z.ZodType> }[]): Record<string, z.ZodType> {
  const owners = new Map<string, z.ZodType[]>();
  for (const { fields } of records) for (const [name, schema] of Object.entries(fields)) owners.set(name, [...(owners.get(name) ?? []), schema]);
  const documented = routedObject(records.map(({ kind, fields }) => ({ key: kind.type, heading: kind.heading, schema: z.object(fields), shape: fields }))).shape;
  return Object.fromEntries([...owners].map(([name, list]) => [name, list.length === 1 ? list[0]! : documented[name]!]));
}

const quoted = (types: string[]) => types.map((t) => `"${t}"`).join(' or ');

// ------------------------------------------------------------------ the documents' channel

/** A channel as answered, every kind in one object: the shared fields and each kind's own. */
export const Channel: z.ZodObject<Record<string, z.ZodType>> = z.object({
  ...AuditFields,
  type: z.enum(KINDS.map((k) => k.type) as [string, ...string[]]).describe(`Kind of channel: ${quoted(KINDS.map((k) => k.type))}`),
  ...ChannelHead,
  inbound: z.union(KINDS.map((k) => k.schemas.inbound) as [z.ZodType, z.ZodType, ...z.ZodType[]]),
  ...mergedFields(KINDS.map((k) => ({ kind: k, fields: k.schemas.output }))),
  ...ChannelTail,
});
components.add(Channel, { id: 'Channel' });

/** `POST /channels`: the shape of the kind its `type` names, checked alone. */
export const ChannelCreateInput = routedObject(
  KINDS.map((k) => ({ key: k.type, heading: k.heading, ...k.schemas.create })),
  (value) => {
    const kind = kindNamed(value.type) ?? FIRST_KIND;
    return { key: kind.type, heading: kind.heading, ...kind.schemas.create };
  },
  { type: 'email', name: 'Support', address: 'support@acme.example', inbound: { mode: 'smtp' } },
);

/** A settings field's own object (or union of objects), without the optional, nullable and default around it; undefined for a plain value. */
function settingsObject(schema: z.ZodType): z.ZodType | undefined {
  let inner = schema;
  while (['optional', 'nullable', 'default'].includes(inner.def.type)) inner = (inner as z.ZodOptional).unwrap() as z.ZodType;
  return ['object', 'union'].includes(inner.def.type) ? inner : undefined;
}

// Each kind's settings objects (email's `inbound` and `outbound`, a text channel's `provider`) are named once in
// the documents ("EmailInbound", "SmsProvider"), and POST and PATCH refer to them.
for (const kind of KINDS) {
  const prefix = kind.type.charAt(0).toUpperCase() + kind.type.slice(1);
  for (const [field, schema] of Object.entries({ ...kind.schemas.create.shape, ...kind.schemas.update })) {
    const object = settingsObject(schema);
    if (object) components.addRequestPart(object, { id: `${prefix}${field.charAt(0).toUpperCase()}${field.slice(1)}` });
  }
}

/** `PATCH /channels/{id}`: the shared fields and every kind's own (a field of another kind is refused, see `updateChannel`). */
export const ChannelUpdateInput = z.strictObject({ ...ChannelUpdateShared, ...mergedFields(KINDS.map((k) => ({ kind: k, fields: k.schemas.update }))) });

export const ChannelTestResult: z.ZodObject<Record<string, z.ZodType>> = z.object({
  ok: ChannelTestFields.ok,
  inbound: z.union(KINDS.map((k) => k.schemas.testInbound) as [z.ZodType, z.ZodType, ...z.ZodType[]]).describe('Receiving: the IMAP server (mode imap); for mode smtp or a text channel, whether the channel can receive'),
  outbound: ChannelTestFields.outbound,
});
components.add(ChannelTestResult, { id: 'ChannelTestResult' });

/** `POST /messages/send`: every kind's fields in the documents; checked by the shape of the kind of the channel it names. */
export const MessageSendAnyInput = routedObject(
  KINDS.map((k) => ({ key: k.type, heading: k.heading, ...k.schemas.send })),
  undefined,
  { channelId: '3f0e5c1a-8b7d-4c2e-9f10-5a6b7c8d9e0f', to: ['ada@example.com'], subject: 'Your invoice', text: 'Thanks, we received your invoice.' },
);

// ------------------------------------------------------------------ the shared operations' dispatch

/** PATCH of a channel through its kind; a field that only other kinds have is a 400 at that field. */
export function refusedField(kind: ChannelKind, patch: Record<string, unknown>): void {
  for (const [field, value] of Object.entries(patch)) {
    if (value === undefined || field in ChannelUpdateShared || field in kind.schemas.update) continue;
    const owner = KINDS.find((k) => field in k.schemas.update);
    throw fieldError(field, kind.refuse?.(field) ?? `Only ${owner?.noun ?? 'other'} channels have this setting`);
  }
}

/** The patch as the channel's kind reads it: the fields of its own checked again with its own shapes (a field several kinds share took any kind's shape in `ChannelUpdateInput`). */
export function ownPatch(kind: ChannelKind, patch: Record<string, unknown>): Record<string, unknown> {
  const own = Object.keys(patch).filter((field) => patch[field] !== undefined && field in kind.schemas.update && !(field in ChannelUpdateShared));
  if (own.length === 0) return patch;
  const checked = parseAs(z.object(Object.fromEntries(own.map((field) => [field, kind.schemas.update[field]!]))), Object.fromEntries(own.map((field) => [field, patch[field]])));
  return { ...patch, ...checked };
}

/** The channel a send without `channelId` goes through: the default of the one kind that has one; a 400 at `channelId` otherwise. */
export async function defaultSendingChannel(db: Parameters<NonNullable<ChannelKind['defaultChannel']>>[0], orgId: string): Promise<string> {
  let reason: string | undefined;
  for (const kind of KINDS) {
    const found = await kind.defaultChannel?.(db, orgId);
    if (found && 'id' in found) return found.id;
    reason ??= found?.error;
  }
  throw fieldError('channelId', reason ?? 'Required: the channel to send through');
}
