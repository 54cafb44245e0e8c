import { describe, expect, it } from 'vitest';
import { AppError, isDatabaseUnavailable, toAppError } from '../../src/core/errors.js';
import { MAX_INPUT_DEPTH, unsafeInputIssues } from '../../src/core/schemas.js';

describe('unsafeInputIssues', () => {
  it('accepts ordinary input, unicode and surrogate pairs included', () => {
    expect(unsafeInputIssues({ a: 'x', b: [1, 'é', '😀', null, { c: true }], d: 1.5 })).toBeUndefined();
    expect(unsafeInputIssues(undefined)).toBeUndefined();
  });

  it('reports NUL characters and lone surrogates in values and keys, as a details tree (arrays as items)', () => {
    expect(unsafeInputIssues({ name: 'a\u0000b' })).toEqual({ errors: [], properties: { name: { errors: [expect.stringMatching(/NUL/)] } } });
    expect(unsafeInputIssues({ list: ['ok', '\ud800'] })).toEqual({
      errors: [],
      properties: { list: { errors: [], items: [null, { errors: [expect.stringMatching(/surrogate/)] }] } },
    });
    const key = unsafeInputIssues({ data: { ['k\u0000']: 1 } });
    expect(key?.properties?.data?.errors).toEqual([expect.stringMatching(/^Key: .*NUL/)]);
    expect(unsafeInputIssues({ s: 'x\udc00' })).toBeDefined();
    expect(unsafeInputIssues({ s: '\ud83d\ude00' })).toBeUndefined();
  });

  it(`refuses nesting deeper than ${MAX_INPUT_DEPTH} levels without walking it all`, () => {
    let deep: unknown = 'leaf';
    for (let i = 0; i < 100_000; i++) deep = [deep];
    const issues = unsafeInputIssues({ data: deep });
    expect(JSON.stringify(issues)).toContain('Nested deeper');
    let ok: unknown = 'leaf';
    for (let i = 0; i < MAX_INPUT_DEPTH - 2; i++) ok = { k: ok };
    expect(unsafeInputIssues({ data: ok })).toBeUndefined();
  });
});

describe('toAppError', () => {
  it('maps database outages to 503 SERVICE_UNAVAILABLE with Retry-After, disclosing nothing', () => {
    const outages = [
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
      new Error('Connection terminated unexpectedly'),
      new Error('timeout exceeded when trying to connect'),
      Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }),
      Object.assign(new Error('Failed query'), { cause: Object.assign(new Error('x'), { code: '08006' }) }),
    ];
    for (const err of outages) {
      expect(isDatabaseUnavailable(err)).toBe(true);
      const e = toAppError(err);
      expect(e.code).toBe('SERVICE_UNAVAILABLE');
      expect(e.status).toBe(503);
      expect(e.retryAfter).toBeGreaterThan(0);
      expect(e.message).not.toMatch(/ECONN|5432|terminat|timeout/i);
    }
  });

  it('maps values PostgreSQL refuses to 400 and anything else to a bare 500', () => {
    for (const code of ['22P05', '22021', '22P02', '22003']) {
      expect(toAppError(Object.assign(new Error('Failed query'), { cause: Object.assign(new Error('x'), { code }) })).code).toBe('BAD_REQUEST');
    }
    const internal = toAppError(new TypeError('secret internals at /srv/app.js:12'));
    expect(internal.toBody()).toEqual({ error: { code: 'INTERNAL_ERROR', message: 'An unexpected error occurred' } });
    const own = new AppError('NOT_FOUND', 'Contact not found');
    expect(toAppError(own)).toBe(own);
  });
});
