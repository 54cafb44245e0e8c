import { describe, expect, it } from 'vitest';
import { envelopeBytes, envelopeJson, JsonText } from '../../src/core/json-text.js';

/**
 * REST writes an envelope of database JSON as bytes (`envelopeBytes`) and MCP as text (`envelopeJson`): the
 * two must be the same answer, byte for byte, whatever the texts hold (the MCP tool's text copy is checked
 * against the REST body in `test/http/json-text.test.ts`).
 */

/** What PostgreSQL's JSON text may carry: escapes, multi-byte characters, an astral one, U+2028. */
const TRICKY = 'Zoë "the \\ quoted" <b>&</b>\nline 😀 \u2028 日本';
const record = (i: number) => new JsonText(`{"id" : "${i}", "name" : ${JSON.stringify(TRICKY)}, "data" : {"k" : [1, null, true]}}`);
const utf8 = (envelope: Parameters<typeof envelopeJson>[0]) => Buffer.from(envelopeJson(envelope), 'utf8');

describe('envelopeBytes', () => {
  it('is the UTF-8 of envelopeJson for a record, a page and a page with a non-ASCII meta', () => {
    const cases = [
      { data: record(1) },
      { data: [record(1), record(2), record(3)], meta: { pagination: { limit: 3, offset: 0, hasMore: true } } },
      { data: [record(1)], meta: { pagination: { limit: 1, offset: 0, hasMore: false }, query: TRICKY } },
    ];
    for (const envelope of cases) {
      const bytes = envelopeBytes(envelope);
      expect(bytes.equals(utf8(envelope))).toBe(true);
      expect(JSON.parse(bytes.toString('utf8'))).toEqual(JSON.parse(envelopeJson(envelope)));
    }
  });

  it('serializes an envelope without database JSON as JSON.stringify does', () => {
    for (const envelope of [{ data: [] as unknown[], meta: { pagination: { limit: 10, offset: 0, hasMore: false } } }, { data: { id: 'é', n: 1 } }]) {
      expect(envelopeBytes(envelope).toString('utf8')).toBe(JSON.stringify(envelope));
    }
  });
});
