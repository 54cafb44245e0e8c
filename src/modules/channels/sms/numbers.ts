import { parsePhoneNumberFromString } from 'libphonenumber-js/max';
import { LRUCache } from 'lru-cache';

/**
 * Numbers already read, by their text ('' for one that is not a number): the same few come in again and again
 * (a channel's own number on every text it receives, its regular customers), and a full parse with validation
 * (libphonenumber's complete metadata) is the largest part of a received text's own work in this process.
 */
const read = new LRUCache<string, string>({ max: 10_000 });

/** A phone number in E.164 (`+14155550123`) when the text is a valid international number; undefined otherwise. */
export function e164(value: string): string | undefined {
  const text = value.trim();
  if (!/^\+?[\d\s().-]{3,40}$/.test(text)) return undefined;
  let number = read.get(text);
  if (number === undefined) {
    const parsed = parsePhoneNumberFromString(text.startsWith('+') ? text : `+${text}`);
    number = parsed?.isValid() ? parsed.number : '';
    read.set(text, number);
  }
  return number || undefined;
}

/** An alphanumeric sender id (GSM 03.40: at most 11 characters, letters and digits, at least one letter). */
export const isAlphanumericSender = (value: string) => /^(?=.*[A-Za-z])[A-Za-z0-9 ]{1,11}$/.test(value);

/** A short code: 3 to 8 digits, no country prefix. */
export const isShortCode = (value: string) => /^\d{3,8}$/.test(value.trim());

/** A received party as stored: E.164 when it is a number, else the raw text (a short code, an alphanumeric sender). */
export function partyNumber(raw: string): string {
  return e164(raw) ?? raw.trim().slice(0, 64);
}
