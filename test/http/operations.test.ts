import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { operationPermission, pathParams, type Operation } from '../../src/core/operation.js';
import { ALL_PERMISSIONS } from '../../src/core/permissions.js';
import { operations } from '../../src/operations.js';
import { toTestResponse, useTestApp, type TestResponse } from '../helpers/app.js';
import { bodyOf, fillPath, hasBody, minimalInput, queryOf, uuidParams } from './inputs.js';

/**
 * The checks that apply to every operation of the table, so an operation added later is covered
 * without touching this file: authentication, permissions, malformed and unknown ids, request ids.
 */

const { t, a: owner } = useTestApp();

const SANE_ID = /^[A-Za-z0-9._:@/+=-]{1,128}$/;

/** Every response: an X-Request-ID header, never echoed in the body. */
function expectRequestId(res: TestResponse, sent?: string) {
  const id = res.headers['x-request-id'];
  expect(typeof id, 'X-Request-ID header').toBe('string');
  expect(id as string).toMatch(SANE_ID);
  if (sent !== undefined) expect(id).toBe(sent);
  expect(res.body).not.toContain(id as string);
  expect(res.body).not.toMatch(/request[_-]?id/i);
}

function expectError(res: TestResponse, status: number, code: string) {
  expect(res.status, `${code}: ${res.body}`).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  expect(res.json.error.code).toBe(code);
  expect(typeof res.json.error.message).toBe('string');
  expect(Object.keys(res.json)).toEqual(['error']);
  if (code !== 'VALIDATION_ERROR') expect(res.json.error.details).toBeUndefined();
  expectRequestId(res);
}

/** A request for the operation with the given key (or none), valid input where it can be built. */
async function call(op: Operation, key: string | undefined, path = fillPath(op), extraHeaders: Record<string, string> = {}) {
  const input = minimalInput(op) ?? {};
  const url = hasBody(op) ? path : `${path}${queryOf(op, input)}`;
  const res = await t.app.inject({
    method: op.method,
    url,
    headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...(hasBody(op) ? { 'content-type': 'application/json' } : {}), ...extraHeaders },
    ...(hasBody(op) ? { payload: JSON.stringify(bodyOf(op, input)) } : {}),
  });
  return toTestResponse(res);
}

const label = (op: Operation) => `${op.method} ${op.path} (${op.id})`;
/** The path parameters that are not UUIDs: an opt-out's number, a thread's id. */
const notUuid = (op: Operation, param: string) => (op.id === 'channels.delete_opt_out' && param === 'number') || (op.path.startsWith('/threads/{id}') && param === 'id');

describe('the operation table', () => {
  it('is well formed: unique ids and routes, path parameters are input fields', () => {
    expect(operations.length).toBeGreaterThan(0);
    expect(new Set(operations.map((o) => o.id)).size).toBe(operations.length);
    expect(new Set(operations.map((o) => `${o.method} ${o.path}`)).size).toBe(operations.length);
    for (const op of operations) {
      for (const p of pathParams(op)) expect(Object.keys(op.input.shape), `${label(op)} declares {${p}}`).toContain(p);
      // Every path parameter is a UUID (spec), so a malformed one is a 400, never a database error.
      // Besides ids, one path parameter is a phone number (or an id): an opt-out's number (CONTRACT §9); and a
      // thread's id is its messages' `threadId` (CONTRACT §11), which need not be a UUID.
      expect(uuidParams(op), label(op)).toEqual(pathParams(op).filter((p) => !notUuid(op, p)));
    }
  });

  it('can build a valid input for every operation (needed by the checks below)', () => {
    const missing = operations.filter((op) => !minimalInput(op)).map(label);
    // If this fails, teach test/http/inputs.ts a candidate value for the new field (e.g. by name or format).
    expect(missing).toEqual([]);
  });
});

/**
 * Runs `check` for every operation in `ops`, each to its end: the test fails with one line per operation
 * that broke the rule, named, so a rule checked in one loop says as much as one test per operation would.
 */
async function forEach(ops: readonly Operation[], check: (op: Operation) => Promise<void>) {
  expect(ops.length).toBeGreaterThan(0);
  const failures: string[] = [];
  for (const op of ops) {
    try {
      await check(op);
    } catch (err) {
      failures.push(`${label(op)}: ${(err as Error).message}`);
    }
  }
  expect(failures, `${failures.length} of ${ops.length} operations`).toEqual([]);
}

/** A loop over the whole table: its operations' time together (each took well under a second alone). */
const LOOP_TIMEOUT = 120_000;

const withPathParams = operations.filter((op) => pathParams(op).length > 0);

/** One key per permission set: the same key for every operation that needs the same permission. */
const keys = new Map<string, Promise<string>>();
const keyWith = (permissions: string[]) => {
  const name = permissions.join(' ');
  if (!keys.has(name)) keys.set(name, owner.keyWith(permissions).then((k) => k.key));
  return keys.get(name)!;
};

describe('every operation of the table (one loop per rule; a failure names the operations)', () => {
  it('401 UNAUTHORIZED without a key, with a malformed header and with a wrong key', async () => {
    await forEach(operations, async (op) => {
      expectError(await call(op, undefined), 401, 'UNAUTHORIZED');
      expectError(await call(op, `sb_${randomUUID()}`), 401, 'UNAUTHORIZED');
      expectError(await call(op, undefined, fillPath(op), { authorization: 'Basic dXNlcjpwYXNz' }), 401, 'UNAUTHORIZED');
      expectError(await call(op, undefined, fillPath(op), { authorization: 'Bearer ' }), 401, 'UNAUTHORIZED');
    });
  }, LOOP_TIMEOUT);

  it('403 FORBIDDEN with every permission but the one it needs; that one passes the auth stage', async () => {
    await forEach(operations, async (op) => {
      const needed = operationPermission(op);
      const others = await keyWith(ALL_PERMISSIONS.filter((p) => p !== needed));
      expectError(await call(op, others), 403, 'FORBIDDEN');
      expect((await call(op, others)).json.error.message).toContain(needed);

      const exact = await keyWith([needed]);
      const res = await call(op, exact);
      // An operation that documents a FORBIDDEN of its own (a rule beyond the route's permission, e.g. a webhook
      // subscription needing the read permission of the areas it receives) may refuse, but not for `needed`.
      if (res.status === 403 && op.errors?.includes('FORBIDDEN')) expect(res.json.error.message, res.body).not.toContain(`"${needed}" permission`);
      else expect([401, 403], res.body).not.toContain(res.status);
      expect(res.status, res.body).toBeLessThan(500);
      expectRequestId(res);
    });
  }, LOOP_TIMEOUT);

  it('400 VALIDATION_ERROR for a malformed UUID in each path parameter', async () => {
    await forEach(withPathParams, async (op) => {
      for (const param of pathParams(op)) {
        // A parameter that is not a UUID still refuses what no value of it holds (a NUL character).
        for (const bad of notUuid(op, param) ? ['ü\u0000'] : ['not-a-uuid', `${randomUUID()}x`, "1' OR '1'='1", 'ü\u0000']) {
          const res = await call(op, owner.key, fillPath(op, { [param]: bad }));
          expectError(res, 400, 'VALIDATION_ERROR');
          expect(res.json.error.details.properties?.[param]?.errors?.length, `${param}=${bad}: ${res.body}`).toBeGreaterThan(0);
        }
      }
    });
  }, LOOP_TIMEOUT);

  it('404 NOT_FOUND for well-formed unknown ids', async () => {
    await forEach(withPathParams, async (op) => {
      expectError(await call(op, owner.key), 404, 'NOT_FOUND');
    });
  }, LOOP_TIMEOUT);

  it('X-Request-ID on every response: a sane client id is echoed, anything else replaced', async () => {
    await forEach(operations, async (op) => {
      const sane = `client-${randomUUID()}`;
      const insane = ['has spaces in it', 'x'.repeat(129), '<script>"', 'a,b'];
      for (const [i, key] of [undefined, owner.key].entries()) {
        expectRequestId(await call(op, key, fillPath(op), { 'x-request-id': sane }), sane);
        for (const bad of insane.slice(i * 2, i * 2 + 2)) {
          const res = await call(op, key, fillPath(op), { 'x-request-id': bad });
          expectRequestId(res);
          expect(res.headers['x-request-id']).not.toBe(bad);
        }
      }
    });
  }, LOOP_TIMEOUT);
});
