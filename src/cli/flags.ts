import { z } from 'zod';
import { canonicalDomain } from '../modules/domains/domains.schemas.js';

/**
 * Zod schemas for command-line flag values. `parseArgs` hands over strings (or undefined when a flag is
 * absent); these turn them into typed values with messages that read well after the flag's name
 * ("--credits: must be an integer").
 */

const required = (what: string) => (issue: { input?: unknown }) => (issue.input === undefined ? 'is required' : `must be ${what}`);

export const textFlag = (max = 255) =>
  z
    .string({ error: required('text') })
    .trim()
    .min(1, 'must not be empty')
    .max(max, `must be at most ${max} characters`);

export const uuidFlag = () => z.uuid({ error: required('a UUID, e.g. 0b6f8a52-3c1d-4e8f-9a2b-7c4d5e6f7a8b') });

export const emailFlag = () => z.email({ error: required('an email address') }).max(254, 'must be at most 254 characters');

/** A whole number written in decimal (no `1e3`, no `12abc`, no `1.5`) within [min, max]. */
export const intFlag = (min: number, max: number) =>
  z
    .string({ error: required('an integer') })
    .regex(/^[-+]?\d{1,16}$/, 'must be an integer')
    .transform(Number)
    .pipe(z.number().int().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`));

/** `a,b, c` -> `['a', 'b', 'c']` (empty entries dropped). */
export const listFlag = () =>
  z
    .string({ error: required('a comma-separated list') })
    .transform((v) => v.split(',').map((s) => s.trim()).filter(Boolean));

/** A domain name, in its canonical form (lowercase, punycode, no trailing dot). */
export const domainFlag = () =>
  textFlag(300).transform((value, ctx) => {
    const name = canonicalDomain(value);
    if (name === undefined) {
      ctx.addIssue({ code: 'custom', message: 'must be a domain name, e.g. example.com' });
      return z.NEVER;
    }
    return name;
  });
