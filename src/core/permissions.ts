import { CATEGORY_IDS, type Category } from './categories.js';

/**
 * The consent to send email and text messages on someone's behalf (`send`, `reply`, `forward`): an OAuth
 * grant holds it only when the person ticked it on the consent page; an API key's `messages:write` includes
 * it (keys belong to the operator's own programs). Never part of `ALL_PERMISSIONS`: no key is created with it.
 */
export const SEND_PERMISSION = 'messages:send';

/** `*` or `<area>:read` / `<area>:write` (GET needs read; every other method needs write), or the sending consent. */
export type Permission = '*' | `${Category}:${'read' | 'write'}` | typeof SEND_PERMISSION;

export const ALL_PERMISSIONS: Permission[] = CATEGORY_IDS.flatMap((c) => [`${c}:read`, `${c}:write`] as Permission[]);

export const isPermission = (value: string): value is Permission => value === '*' || (ALL_PERMISSIONS as string[]).includes(value);

export const requiredPermission = (category: Category, method: string): Permission =>
  `${category}:${method === 'GET' ? 'read' : 'write'}`;

export const hasPermission = (held: readonly string[], needed: Permission): boolean => held.includes('*') || held.includes(needed);

/**
 * The permissions an OAuth grant's tool categories amount to: read and write in each category, and the
 * sending consent when the person gave it (with `messages`, not read only).
 */
export const categoryPermissions = (categories: readonly Category[], readOnly = false, send = false): Permission[] => [
  ...categories.flatMap((c) => (readOnly ? [`${c}:read`] : [`${c}:read`, `${c}:write`]) as Permission[]),
  ...(send && !readOnly && categories.includes('messages' as Category) ? [SEND_PERMISSION as Permission] : []),
];

/** What an API key's permissions amount to: its `messages:write` includes the sending consent. */
export const keyPermissions = (held: readonly string[]): string[] =>
  held.includes('messages:write') && !held.includes(SEND_PERMISSION) ? [...held, SEND_PERMISSION] : [...held];
