import { createHash } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrganization } from '../../src/accounts/accounts.js';
import { SLICE_MS } from '../../src/db/pglite-turns.js';
import { attachmentContents } from '../../src/db/schema.js';
import { openTestDatabase } from '../helpers/database.js';

/**
 * The database client on both databases: bytes written and read back as they are, and (the embedded database
 * runs on the main thread) a long chain of statements shares the event loop instead of holding it.
 */

let database: Awaited<ReturnType<typeof openTestDatabase>>;
let orgId: string;
beforeAll(async () => {
  database = await openTestDatabase();
  orgId = (await createOrganization(database.db, { name: 'Bytes' })).id;
});
afterAll(async () => database.close());

const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

/** Runs statements one after another for `ms`, in a transaction or not; answers how many ran. */
async function chainFor(ms: number, inTransaction: boolean): Promise<number> {
  const chain = async (db: typeof database.db) => {
    let n = 0;
    const until = performance.now() + ms;
    while (performance.now() < until) {
      await db.execute(sql`SELECT ${n}::int AS n`);
      n++;
    }
    return n;
  };
  return inTransaction ? database.db.transaction((tx) => chain(tx as unknown as typeof database.db)) : chain(database.db);
}

/** The longest the event loop went without a turn while `work` ran (a timer asked for every millisecond). */
async function longestHold(work: () => Promise<unknown>): Promise<{ holdMs: number; turns: number }> {
  let last = performance.now();
  let holdMs = 0;
  let turns = 0;
  const tick = setInterval(() => {
    const now = performance.now();
    holdMs = Math.max(holdMs, now - last);
    last = now;
    turns++;
  }, 1);
  try {
    // The timer's first turn comes before the work starts.
    await new Promise((r) => setTimeout(r, 5));
    turns = 0;
    last = performance.now();
    await work();
    holdMs = Math.max(holdMs, performance.now() - last);
  } finally {
    clearInterval(tick);
  }
  return { holdMs, turns };
}

describe('the database client', () => {
  it('writes bytes as they are and reads them back whole (every byte value, 4 MB)', async () => {
    const content = Buffer.alloc(4 * 1024 * 1024);
    for (let i = 0; i < content.length; i++) content[i] = (i * 7 + (i >> 8)) & 0xff;
    const hash = sha256(content);
    await database.db.insert(attachmentContents).values({ organizationId: orgId, sha256: hash, size: content.length, content });
    const [stored] = await database.db.execute<{ length: number; digest: string }>(
      sql`SELECT length(content) AS length, encode(sha256(content), 'hex') AS digest FROM attachment_contents WHERE sha256 = ${hash}`,
    ).then((r) => r.rows);
    expect(stored).toEqual({ length: content.length, digest: hash });
    const [back] = await database.db.select({ content: attachmentContents.content }).from(attachmentContents).where(sql`${attachmentContents.sha256} = ${hash}`);
    expect(Buffer.compare(back!.content, content)).toBe(0);
  });

  for (const inTransaction of [false, true]) {
    it(`lets the event loop turn during a long chain of statements${inTransaction ? ' in one transaction' : ''}`, async () => {
      let ran = 0;
      const { holdMs, turns } = await longestHold(async () => (ran = await chainFor(40 * SLICE_MS, inTransaction)));
      expect(ran).toBeGreaterThan(10);
      // On the embedded database every statement settles within the turn: without the shared turns the timer
      // would not fire once in the whole chain (600 ms). PostgreSQL answers over a socket: turns come anyway.
      expect(turns).toBeGreaterThanOrEqual(5);
      expect(holdMs).toBeLessThan(20 * SLICE_MS);
    });
  }
});
