/**
 * Whether to skip tests that need an outside program (Chromium, Redis, PostgreSQL). On a developer's
 * machine they skip when it is missing; with `CI=true` a missing one fails the run instead, so CI cannot
 * go green without them.
 */
export function skipWithout(available: boolean, what: string): boolean {
  if (!available && process.env.CI === 'true') throw new Error(`${what} is required when CI=true`);
  return !available;
}
