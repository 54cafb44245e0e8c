import { z } from 'zod';
import { toJsonSchema } from '../../core/json-schema.js';

/** One of the object shapes a `routedObject` takes: its schema (which checks) and fields (which the documents merge), and the heading of its rules. */
export interface RoutedVariant {
  key: string;
  heading: string;
  schema: z.ZodType;
  shape: Record<string, z.ZodType>;
}

/**
 * One operation input that takes one of several object shapes (one per channel kind): validated by the chosen
 * shape alone, so that its errors stand at their own fields as they would without the others, while the
 * documents (OpenAPI, MCP) show one object with every field of all of them. A plain union would report every
 * shape's errors at once.
 *
 * `pick` chooses the shape from the request when the request says it (`type` of a new channel); without it
 * the input is only documented here and the handler checks it with the shape of the channel it names
 * (`parseAs`), as `messages.send` does with the stored kind of its channel.
 */
export function routedObject(variants: RoutedVariant[], pick?: (value: Record<string, unknown>) => RoutedVariant, example?: Record<string, unknown>) {
  const [first] = variants;
  if (!first) throw new Error('routedObject: no shapes');
  const docs: Record<string, z.ZodType> = {};
  const requiredNames: string[] = [];
  const names = new Set(variants.flatMap((v) => Object.keys(v.shape)));
  const bare = ({ description: _d, ...rest }: Record<string, unknown>) => rest;
  const values = (j: Record<string, unknown> | undefined) => (j ? (Array.isArray(j.enum) ? (j.enum as unknown[]) : 'const' in j ? [j.const] : undefined) : undefined);
  for (const name of names) {
    const given = variants.flatMap((v) => (v.shape[name] ? [{ v, json: toJsonSchema(v.shape[name], 'input') }] : []));
    // Every shape's rules, described once (the tool documents stay small): the first shape's plainly, the others under their heading.
    const described = given
      .flatMap(({ v, json }) => (typeof json.description === 'string' && json.description ? [{ v, d: json.description }] : []))
      .filter((x, i, all) => all.findIndex((y) => y.d === x.d) === i);
    const description = described.map(({ v, d }, i) => (i === 0 ? d : `${v.heading}: ${d}`)).join(' / ');
    const distinct = given.filter(({ json }, i) => given.findIndex((g) => JSON.stringify(g.json) === JSON.stringify(json)) === i);
    const enums = given.map(({ json }) => values(json));
    let merged: Record<string, unknown>;
    if (given.length > 1 && enums.every((e) => e !== undefined)) {
      merged = { type: given[0]!.json.type, enum: [...new Set(enums.flat())], ...(description ? { description } : {}) };
    } else if (distinct.length > 1) {
      // Of rules of one type, the first shape's stands (the others' are in its description); of several types: any.
      const sameType = distinct.every(({ json }) => JSON.stringify(json.type) === JSON.stringify(distinct[0]!.json.type));
      merged = { ...(sameType ? bare(distinct[0]!.json) : { anyOf: distinct.map(({ json }) => bare(json)) }), ...(description ? { description } : {}) };
    } else {
      merged = given[0]!.json;
    }
    // Required in the documents as the first shape requires it (its request example must pass); the other
    // shapes' own rules are in the operation's description and the field descriptions.
    const a = first.shape[name];
    if (a && !a.safeParse(undefined).success) requiredNames.push(name);
    // Never required while parsing (the chosen shape judges).
    docs[name] = z.unknown().optional().meta(merged);
  }
  const meta = { required: requiredNames, ...(example ? { examples: [example] } : {}) };
  // Without a pick the kind is chosen later (by the channel named): a field no kind has is refused here already.
  if (!pick) return z.strictObject(docs).meta(meta);
  // An object schema (operations take objects): the chosen shape checks the value (superRefine) and its
  // parsed value replaces the input (overwrite).
  const parsedOf = new WeakMap<object, unknown>();
  return z
    .looseObject(docs)
    .superRefine((value, ctx) => {
      const parsed = pick(value).schema.safeParse(value);
      if (!parsed.success) {
        for (const issue of parsed.error.issues) ctx.addIssue(issue as never);
        return;
      }
      parsedOf.set(value, parsed.data);
    })
    .overwrite((value) => (parsedOf.get(value) as typeof value | undefined) ?? value)
    .meta(meta);
}
