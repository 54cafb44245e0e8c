/**
 * A value a `beforeAll` hook makes, usable as a constant of the file: each member read goes to the value once
 * the hook has set it (reading it before is an error that names it).
 */
export function later<T extends object>(name: string, get: () => T | undefined): T {
  return new Proxy({} as T, {
    get(_target, prop) {
      const value = get();
      if (!value) throw new Error(`"${name}" is used before the beforeAll hook that makes it ran`);
      const member = (value as unknown as Record<PropertyKey, unknown>)[prop];
      return typeof member === 'function' ? member.bind(value) : member;
    },
  });
}
