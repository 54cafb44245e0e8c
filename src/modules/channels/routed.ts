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
  /** The request example of the documents (a request of the first shape). */
  example?: Record<string, unknown>,
) {
  const docs: Record<string, z.ZodType> = {};
  const requiredNames: string[] = [];
  const names = new Set([...Object.keys(first.shape), ...Object.keys(second.shape)]);
  for (const name of names) {
    const a = first.shape[name];
    const b = second.shape[name];
    const ja = a && toJsonSchema(a, 'input');
    const jb = b && toJsonSchema(b, 'input');
    // Both shapes' rules, described once (the tool documents stay small).
    const bare = ({ description: _d, ...rest }: Record<string, unknown>) => rest;
    const description = [ja?.description, jb?.description].filter((d) => typeof d === 'string' && d).filter((d, i, all) => all.indexOf(d) === i).join(' / Texts: ');
    // Of two rules of one type, the first shape's stands (the other's is in its description); two types: either.
    const sameType = ja && jb && JSON.stringify(ja.type) === JSON.stringify(jb.type);
    const values = (j: Record<string, unknown> | undefined) => (j ? (Array.isArray(j.enum) ? (j.enum as unknown[]) : 'const' in j ? [j.const] : undefined) : undefined);
    const [va, vb] = [values(ja), values(jb)];
    const merged =
      va && vb
        ? { type: ja!.type, enum: [...new Set([...va, ...vb])], ...(description ? { description } : {}) }
        : ja && jb && JSON.stringify(ja) !== JSON.stringify(jb)
        ? { ...(sameType ? bare(ja) : { anyOf: [bare(ja), bare(jb)] }), ...(description ? { description } : {}) }
        : (ja ?? jb)!;
    // Required in the documents as the first shape requires it (its request example must pass); the second
    // shape's own rules are in the operation's description and the field descriptions.
    const required = a ? !a.safeParse(undefined).success : false;
    // Never required while parsing (the chosen shape judges); required in the documents through `meta` below.
    docs[name] = z.unknown().optional().meta(merged);
    if (required) requiredNames.push(name);
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
  return base.meta({ required: requiredNames, ...(example ? { examples: [example] } : {}) });
}

/** What a `routedObject` hands the handler: the chosen shape's parsed value, tagged. */
export type Routed<A extends z.ZodType, B extends z.ZodType> = ({ variant: 'first' } & z.output<A>) | ({ variant: 'second' } & z.output<B>);
