import { CATEGORY_IDS, type Category } from './categories.js';

/** `*` or `<area>:read` / `<area>:write`. GET needs read; every other method needs write. */
export type Permission = '*' | `${Category}:${'read' | 'write'}`;

export const ALL_PERMISSIONS: Permission[] = CATEGORY_IDS.flatMap((c) => [`${c}:read`, `${c}:write`] as Permission[]);

export const isPermission = (value: string): value is Permission => value === '*' || (ALL_PERMISSIONS as string[]).includes(value);

export const requiredPermission = (category: Category, method: string): Permission =>
  `${category}:${method === 'GET' ? 'read' : 'write'}`;

export const hasPermission = (held: readonly string[], needed: Permission): boolean => held.includes('*') || held.includes(needed);

/** The permissions an OAuth grant's tool categories amount to: read and write in each category. */
export const categoryPermissions = (categories: readonly Category[], readOnly = false): Permission[] =>
  categories.flatMap((c) => (readOnly ? [`${c}:read`] : [`${c}:read`, `${c}:write`]) as Permission[]);
