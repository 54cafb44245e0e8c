import { z } from 'zod';
import { AuditFields, components, IdParam, JsonObject, Uuid } from '../../core/schemas.js';

export const FolderIdParam = { id: IdParam('folder') };
export const FolderId = z.strictObject(FolderIdParam);

/** Length in characters (code points), as the spec counts it, not UTF-16 units. */
const chars = (s: string) => [...s].length;

const FolderName = z
  .string()
  .min(1, 'Must be at least 1 character')
  .refine((s) => chars(s) <= 255, 'Must be at most 255 characters')
  .meta({ maxLength: 255 })
  .describe('Folder name, 1 to 255 characters');

const ParentFolderId = Uuid.nullable().describe(
  'Parent folder (a live folder of the same organization); null or absent places the folder at the top level',
);

export const FolderCreateInput = z.strictObject({
  name: FolderName,
  parentFolderId: ParentFolderId.optional(),
  metadata: JsonObject.optional().describe('Free-form JSON object (default {})'),
});

export const FolderUpdateInput = z.strictObject({
  ...FolderIdParam,
  name: FolderName.optional(),
  parentFolderId: ParentFolderId.optional().describe(
    'Moves the folder under this parent (null: to the top level). A folder cannot be moved into itself or one of its descendants.',
  ),
  metadata: JsonObject.optional().describe('Replaces the whole metadata object'),
});

export const FolderListInput = z.strictObject({
  parentFolderId: Uuid.nullable()
    .optional()
    .describe('Only the direct children of this folder; `null` (or an empty value) lists the top-level folders; absent lists every folder'),
});

export const Folder = z.object({
  ...AuditFields,
  name: z.string().describe('Folder name'),
  parentFolderId: Uuid.nullable().describe('Parent folder, null at the top level'),
  createdBy: Uuid.describe('API key or user that created the folder'),
  metadata: JsonObject,
  fileCount: z.number().int().describe('Number of live files directly in the folder'),
  subfolderCount: z.number().int().describe('Number of live folders directly inside the folder'),
});

// Named schemas of the OpenAPI document (components/schemas).
components.add(Folder, { id: 'Folder' });
