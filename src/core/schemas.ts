import { z } from 'zod';

/** Building blocks shared by every module's schemas. */

export const Uuid = z.uuid().describe('UUID');
export const IdParam = (what: string) => z.uuid().describe(`Id of the ${what}`);

/** Timestamps in responses: ISO 8601 UTC. */
export const Timestamp = z.iso.datetime().describe('ISO 8601 UTC timestamp');
export const NullableTimestamp = Timestamp.nullable();

/** Timestamps in requests: ISO 8601 with `Z` or an offset. */
export const DateTimeInput = z.iso.datetime({ offset: true }).describe('ISO 8601 date-time, with Z or an offset');

export const JsonObject = z.record(z.string(), z.unknown()).describe('Free-form JSON object');

/** Any JSON value (untyped message fields). */
export const JsonValue = z.unknown().describe('Any JSON value');

/** Text fields: bounded, so no single field can hold the whole body limit. */
export const ShortText = (max = 255) => z.string().max(max);
export const LongText = z.string().max(100_000);

/** `id`, audit timestamps and `organizationId`: on every resource. */
export const AuditFields = {
  id: Uuid.describe('Unique id (UUID v4)'),
  createdAt: Timestamp.describe('When the record was created (ISO 8601 UTC)'),
  updatedAt: Timestamp.describe('When the record was last changed (ISO 8601 UTC)'),
  deletedAt: NullableTimestamp.describe('When the record was deleted; always null in responses except a DELETE answer'),
  organizationId: Uuid.describe('Organization that owns the record'),
};

/** Converts an optional ISO string from a request into a Date, keeping null and undefined. */
export function toDate<T extends string | null | undefined>(value: T): T extends string ? Date : Exclude<T, string> {
  return (typeof value === 'string' ? new Date(value) : value) as never;
}
