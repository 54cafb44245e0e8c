import { z } from 'zod';

export type JsonSchema = Record<string, unknown>;

/**
 * A Zod schema as JSON Schema (draft 2020-12), the one conversion the REST adapter, the OpenAPI document
 * and the MCP tools start from. `$schema` is left out: OpenAPI 3.1 and the MCP revisions assume 2020-12,
 * and some MCP clients validate with a draft-07 engine that refuses an unknown `$schema`. Types JSON Schema
 * cannot express (transforms) become `{}`. Each adapter then shapes the result for its readers.
 */
export function toJsonSchema(schema: z.ZodType, io: 'input' | 'output', metadata?: typeof z.globalRegistry): JsonSchema {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any', ...(metadata ? { metadata } : {}) }) as JsonSchema;
  return rest;
}
