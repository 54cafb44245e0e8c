/**
 * How a text travels: GSM 03.38 (7-bit) when every character is in its alphabet, else UCS-2; and how many
 * segments it takes. GSM-7 fits 160 characters in one segment, 153 per part when split (the UDH takes the
 * rest); its extension characters (e.g. `€`, `{`) count twice. UCS-2 fits 70 UTF-16 units, 67 per part.
 */

const GSM_BASIC =
  '@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !"#¤%&\'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà';
const GSM_EXTENDED = '^{}\\[~]|€\f';
const BASIC = new Set(GSM_BASIC);
const EXTENDED = new Set(GSM_EXTENDED);

export type SmsEncoding = 'GSM-7' | 'UCS-2';

export interface SmsSize {
  encoding: SmsEncoding;
  segments: number;
  /** Septets (GSM-7) or UTF-16 code units (UCS-2). */
  units: number;
}

/** At most this many segments per text (`text` over it is a 400). */
export const MAX_SEGMENTS = 10;

export function smsSize(text: string): SmsSize {
  let septets = 0;
  let gsm = true;
  for (const ch of text) {
    if (BASIC.has(ch)) septets += 1;
    else if (EXTENDED.has(ch)) septets += 2;
    else {
      gsm = false;
      break;
    }
  }
  if (gsm) return { encoding: 'GSM-7', units: septets, segments: septets <= 160 ? 1 : Math.ceil(septets / 153) };
  const units = text.length;
  return { encoding: 'UCS-2', units, segments: units <= 70 ? 1 : Math.ceil(units / 67) };
}

/**
 * Splits a text into the parts of a long message (SMPP), each at most `per` units, never inside a
 * surrogate pair or between a GSM-7 escape and its character.
 */
export function splitText(text: string, encoding: SmsEncoding): string[] {
  const per = encoding === 'GSM-7' ? 153 : 67;
  const parts: string[] = [];
  let current = '';
  let used = 0;
  for (const ch of text) {
    const cost = encoding === 'GSM-7' ? (EXTENDED.has(ch) ? 2 : 1) : ch.length;
    if (used + cost > per) {
      parts.push(current);
      current = '';
      used = 0;
    }
    current += ch;
    used += cost;
  }
  if (current || parts.length === 0) parts.push(current);
  return parts;
}
