import { z } from 'zod';
import { AuditFields, components, IdParam, JsonObject, ShortText, Uuid } from '../../core/schemas.js';

export const Business = z.object({
  ...AuditFields,
  createdBy: Uuid.describe('API key or user that created the business'),
  name: z.string().describe('Name of the business'),
  data: JsonObject,
});

const name = ShortText(255).trim().min(1).describe('Name of the business, 1 to 255 characters');

export const BusinessIdParam = { id: IdParam('business') };
export const BusinessId = z.strictObject(BusinessIdParam);

export const BusinessCreateInput = z.strictObject({
  name: name.describe('Required. Name of the business, 1 to 255 characters'),
  data: JsonObject.optional().describe('Free-form JSON object; defaults to {}'),
});

export const BusinessUpdateInput = z.strictObject({
  ...BusinessIdParam,
  name: name.optional(),
  data: JsonObject.optional().describe('Free-form JSON object; replaces the stored one'),
});

// Named schemas of the OpenAPI document (components/schemas).
components.add(Business, { id: 'Business' });
