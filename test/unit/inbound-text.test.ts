import { describe, expect, it } from 'vitest';
import { cleanText, legacyHeadersAsUtf8 } from '../../src/modules/channels/email/inbound.js';
import { messageIdList, normalizeMessageId } from '../../src/modules/messages/threads.js';

describe('received text made storable', () => {
  it('removes NUL characters, replaces lone surrogates and bounds the length', () => {
    expect(cleanText('a\u0000b')).toBe('ab');
    expect(cleanText('x\uD800y\uDC00z')).toBe('x\uFFFDy\uFFFDz');
    expect(cleanText('\uD83D\uDE00')).toBe('\uD83D\uDE00');
    expect(cleanText('abcdef', 3)).toBe('abc');
  });

  it('reads Latin-1 header lines as Latin-1, leaves UTF-8 lines and the body alone', () => {
    const raw = Buffer.concat([
      Buffer.from('Subject: Caf\xe9\r\n', 'latin1'),
      Buffer.from('X-Name: été\r\n', 'utf8'),
      Buffer.from('\r\nbody \xe9\r\n', 'latin1'),
    ]);
    const out = legacyHeadersAsUtf8(raw).toString('utf8');
    expect(out.startsWith('Subject: Café\r\nX-Name: été\r\n\r\n')).toBe(true);
    // The body keeps its bytes (its charset is the MIME part's business).
    expect(legacyHeadersAsUtf8(raw).subarray(-3)).toEqual(Buffer.from('\xe9\r\n', 'latin1'));
    const ascii = Buffer.from('Subject: plain\r\n\r\nbody');
    expect(legacyHeadersAsUtf8(ascii)).toBe(ascii);
  });
});

describe('Message-IDs', () => {
  it('are stored without angle brackets; header lists are split', () => {
    expect(normalizeMessageId(' <abc@example.com> ')).toBe('abc@example.com');
    expect(normalizeMessageId('')).toBeUndefined();
    expect(messageIdList('<a@x> <b@y>\r\n <c@z>')).toEqual(['a@x', 'b@y', 'c@z']);
    expect(messageIdList(['<a@x>', '<b@y>'])).toEqual(['a@x', 'b@y']);
    expect(messageIdList('bare@id')).toEqual(['bare@id']);
    expect(messageIdList(undefined)).toEqual([]);
  });
});
