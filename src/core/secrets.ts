import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** Opaque secrets (API keys, OAuth tokens and codes): random, shown once, stored as SHA-256. */
export const randomToken = (bytes = 32) => randomBytes(bytes).toString('base64url');

/** High-entropy secrets need no slow hash: SHA-256 is one-way, and lookups by it leak nothing useful. */
export const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');

/** Constant-time comparison of two strings (compared as SHA-256 digests, so lengths may differ). */
export function safeEqual(a: string, b: string): boolean {
  return timingSafeEqual(createHash('sha256').update(a).digest(), createHash('sha256').update(b).digest());
}
