import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { lazyRequestLogger } from '../../src/http/request-logger.js';
import { createTestApp } from '../helpers/app.js';

/** A pino logger at `level` writing its lines into an array. */
function capture(level: string) {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level }, stream), lines };
}

describe("a request's logger", () => {
  it('makes no child logger for a request that writes nothing, or only below the level', () => {
    const { logger, lines } = capture('warn');
    const child = vi.spyOn(logger, 'child');
    const log = lazyRequestLogger(logger, { reqId: 'r-1' }, {});
    log.info('not written');
    log.debug('not written');
    expect(log.level).toBe('warn');
    expect(child).not.toHaveBeenCalled();
    expect(lines).toEqual([]);
  });

  it('makes it on the first message written, once, with the request id bound', () => {
    const { logger, lines } = capture('warn');
    const child = vi.spyOn(logger, 'child');
    const log = lazyRequestLogger(logger, { reqId: 'r-2' }, {});
    log.error({ code: 'X' }, 'first');
    log.warn('second');
    log.child({ tool: 'contacts_read' }).error('third');
    // The request's child once; the second call is the child's own child (`tool`).
    expect(child.mock.calls.map(([bindings]) => bindings)).toEqual([{ reqId: 'r-2' }, { tool: 'contacts_read' }]);
    expect(lines.map((l) => [l.reqId, l.msg])).toEqual([
      ['r-2', 'first'],
      ['r-2', 'second'],
      ['r-2', 'third'],
    ]);
    expect(lines[0]!.code).toBe('X');
    expect(lines[2]!.tool).toBe('contacts_read');
  });

  it('follows a change of the level', () => {
    const { logger, lines } = capture('warn');
    lazyRequestLogger(logger, { reqId: 'r-3' }, {}).info('not yet');
    logger.level = 'info';
    lazyRequestLogger(logger, { reqId: 'r-4' }, {}).info('now');
    expect(lines.map((l) => [l.reqId, l.msg])).toEqual([['r-4', 'now']]);
  });

  it('the app makes none for requests that log nothing', async () => {
    const t = await createTestApp({ logger: { level: 'warn' } });
    try {
      const tenant = await t.tenant();
      const child = vi.spyOn(t.app.log, 'child');
      for (const url of ['/healthz', '/v1/contacts', '/v1/contacts/00000000-0000-4000-8000-000000000000']) {
        const res = await t.app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${tenant.key}` } });
        expect(res.statusCode).toBeLessThan(500);
        expect(res.headers['x-request-id']).toBeTruthy();
      }
      expect(child).not.toHaveBeenCalled();
    } finally {
      await t.close();
    }
  });
});
