import { z } from 'zod';
import { toJsonSchema } from '../../core/json-schema.js';

/**
 * One operation input that takes either of two object shapes, told apart by the request itself (an email
 * or a text channel): validated by the chosen shape alone, so that its errors stand at their own fields as
 * they would without the other shape, while the documents (OpenAPI, MCP) show one object with every field
 * of both. A plain union would report both shapes' errors at once.
 */
export function routedObject<A extends z.ZodType, B extends z.ZodType>(
  first: { schema: A; shape: Record<string, z.ZodType> },
  second: { schema: B; shape: Record<string, z.ZodType> },
  pick: (value: Record<string, unknown>) => 'first' | 'second',
  description?: string,
) {
  const docs: Record<string, z.ZodType> = {};
  const names = new Set([...Object.keys(first.shape), ...Object.keys(second.shape)]);
  for (const name of names) {
    const a = first.shape[name];
    const b = second.shape[name];
    const ja = a && toJsonSchema(a, 'input');
    const jb = b && toJsonSchema(b, 'input');
    const merged = ja && jb && JSON.stringify(ja) !== JSON.stringify(jb) ? { anyOf: [ja, jb], ...(ja.description ? { description: ja.description } : {}) } : (ja ?? jb)!;
    // Required in the documents only when both shapes require it.
    const required = a && b && !a.safeParse(undefined).success && !b.safeParse(undefined).success;
    docs[name] = required ? z.unknown().meta(merged) : z.unknown().optional().meta(merged);
  }
  // An object schema (operations take objects): the chosen shape checks the value (superRefine) and its
  // parsed value replaces the input (overwrite), tagged with the variant.
  const parsedOf = new WeakMap<object, unknown>();
  const base = z
    .looseObject(docs)
    .superRefine((value, ctx) => {
      const variant = pick(value);
      const parsed = (variant === 'first' ? first.schema : second.schema).safeParse(value);
      if (!parsed.success) {
        for (const issue of parsed.error.issues) ctx.addIssue(issue as never);
        return;
      }
      parsedOf.set(value, { ...(parsed.data as object), variant });
    })
    .overwrite((value) => (parsedOf.get(value) as typeof value | undefined) ?? value);
  return description ? base.describe(description) : base;
}

/** What a `routedObject` hands the handler: the chosen shape's parsed value, tagged. */
export type Routed<A extends z.ZodType, B extends z.ZodType> = ({ variant: 'first' } & z.output<A>) | ({ variant: 'second' } & z.output<B>);
