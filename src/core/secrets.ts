import { createHash, hash, randomBytes, timingSafeEqual } from 'node:crypto';

/** Opaque secrets (API keys, OAuth tokens and codes): random, shown once, stored as SHA-256. */
export const randomToken = (bytes = 32) => randomBytes(bytes).toString('base64url');

/** High-entropy secrets need no slow hash: SHA-256 is one-way, and lookups by it leak nothing useful. */
export const sha256 = (value: string) => hash('sha256', value, 'hex'); // one call, no Hash object: it runs on every request

/** Constant-time comparison of two strings (compared as SHA-256 digests, so lengths may differ). */
export function safeEqual(a: string, b: string): boolean {
  return timingSafeEqual(createHash('sha256').update(a).digest(), createHash('sha256').update(b).digest());
}

/** The token of an `Authorization: Bearer <token>` header (visible ASCII, at most 512 characters), or undefined. */
export function bearerToken(header: string | string[] | undefined): string | undefined {
  return typeof header === 'string' ? /^Bearer[ ]+([\x21-\x7e]{1,512})[ ]*$/i.exec(header)?.[1] : undefined;
}

/** The host names that mean this machine, as URL parsing spells them (IPv6 in brackets). */
const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);
export const isLoopbackHost = (hostname: string) => LOOPBACK_HOSTS.has(hostname.toLowerCase());

/** Credits of a new organization when none are given. */
export const DEFAULT_CREDITS = 100;
