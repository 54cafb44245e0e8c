/**
 * Text that PostgreSQL can store: its `text` and `jsonb` refuse NUL characters, and `jsonb` refuses lone UTF-16
 * surrogates. What a provider or a mail server sends is kept as close as it can be: NULs dropped, a lone
 * surrogate replaced by U+FFFD (what a decoder does with an invalid sequence). The API refuses such input
 * instead (`unsafeInputIssues` in schemas.ts): a client can correct it, a provider's retry cannot.
 */

/** A high surrogate not followed by a low one, or a low one not preceded by a high one. */
export const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** The string without NUL characters and with each lone surrogate as U+FFFD. */
export function storableText(value: string): string {
  return value.replaceAll('\u0000', '').replace(LONE_SURROGATE, '\uFFFD');
}

/**
 * JSON.parse's reviver that makes every string of the document storable, keys included (an object whose keys
 * need it is rebuilt, keeping its order).
 */
export function storableReviver(_key: string, value: unknown): unknown {
  if (typeof value === 'string') return storableText(value);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  const keys = Object.keys(value);
  if (!keys.some((k) => storableText(k) !== k)) return value;
  return Object.fromEntries(keys.map((k) => [storableText(k), (value as Record<string, unknown>)[k]]));
}
