import { expect } from 'vitest';
import type { Tenant } from './app.js';

interface Row {
  id: string;
  createdAt: string;
}

/** The ids in the order the API promises: creation date, then id, newest first. */
export const newestFirst = (rows: Row[]) =>
  [...rows].sort((x, y) => (x.createdAt === y.createdAt ? (x.id < y.id ? 1 : -1) : x.createdAt < y.createdAt ? 1 : -1)).map((r) => r.id);

const ids = (res: { json: { data: Row[] } }) => res.json.data.map((r) => r.id);

/**
 * Checks the pagination rules on a list whose complete content (newest first) is `expected`, which must
 * hold at least 4 and at most 100 items: limit 1 and 100, asc/desc, an offset beyond the end, a full last
 * page (hasMore true, next page empty) and bad parameters. `withTotal` says whether `total` is promised.
 */
export async function checkPagination(tenant: Tenant, url: string, expected: string[], withTotal: boolean) {
  const sep = url.includes('?') ? '&' : '?';
  const get = (query: string) => tenant.request('GET', `${url}${sep}${query}`);
  const n = expected.length;
  expect(n).toBeGreaterThanOrEqual(4);

  const byDefault = await tenant.request('GET', url);
  expect(byDefault.status).toBe(200);
  expect(ids(byDefault)).toEqual(expected.slice(0, 10));
  expect(byDefault.json.meta.pagination).toMatchObject({ limit: 10, offset: 0 });

  const one = await get('limit=1');
  expect(ids(one)).toEqual([expected[0]]);
  expect(one.json.meta.pagination).toEqual({ limit: 1, offset: 0, hasMore: true, ...(withTotal ? { total: n } : {}) });

  const all = await get('limit=100');
  expect(ids(all)).toEqual(expected);
  expect(all.json.meta.pagination.hasMore).toBe(false);

  const asc = await get('limit=100&sortOrder=asc');
  expect(ids(asc)).toEqual([...expected].reverse());
  const desc = await get('limit=2&offset=1&sortOrder=desc');
  expect(ids(desc)).toEqual(expected.slice(1, 3));

  const beyond = await get(`offset=${n + 5}`);
  expect(beyond.status).toBe(200);
  expect(beyond.json.data).toEqual([]);
  expect(beyond.json.meta.pagination).toMatchObject({ offset: n + 5, hasMore: false });

  // A full last page: without a total the server cannot know it is the last, so hasMore is true and the next page is empty.
  const half = Math.floor(n / 2);
  const last = await get(`limit=${n - half}&offset=${half}`);
  expect(ids(last)).toEqual(expected.slice(half));
  expect(last.json.meta.pagination.hasMore).toBe(!withTotal);
  const after = await get(`limit=${n - half}&offset=${n}`);
  expect(after.json.data).toEqual([]);
  expect(after.json.meta.pagination.hasMore).toBe(false);

  const nullOffset = await get('offset=null&limit=1');
  expect(ids(nullOffset)).toEqual([expected[0]]);

  for (const bad of ['limit=0', 'limit=101', 'limit=abc', 'offset=-1', 'sortOrder=newest']) {
    const res = await get(bad);
    expect(res.status, bad).toBe(400);
    expect(res.json.error.code).toBe('VALIDATION_ERROR');
  }
}
