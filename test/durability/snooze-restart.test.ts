import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { afterAll, describe, expect, it } from 'vitest';
import { openDatabase, restorePglite, type Database } from '../../src/db/client.js';
import { createSnoozeWorker } from '../../src/workers/snoozes.js';
import { pgliteTemplate, testDbKind } from '../helpers/database.js';

/**
 * CONTRACT §11 on the embedded database: a snoozed thread opens by itself after a restart, once. The snooze
 * is the thread's own row, so a process that stops before it is due loses nothing, and the next one ends
 * it exactly once (on PostgreSQL, with two processes: test/modules/threads-channels.test.ts).
 */

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
const silent = { error: () => {} };

const rows = async (db: Database, query: ReturnType<typeof sql>) => (await db.db.execute(query)).rows as Record<string, unknown>[];

describe.runIf(testDbKind === 'pglite')('a snooze on the embedded database, across restarts', () => {
  it('ends after the process that set it stopped, exactly once', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'sb-snooze-'));
    dirs.push(dataDir);
    await restorePglite(dataDir, pgliteTemplate());

    let database = await openDatabase({ dataDir });
    const [org] = await rows(database, sql`INSERT INTO organizations (name) VALUES ('Snoozers') RETURNING id`);
    const orgId = org!.id as string;
    await database.db.execute(sql`INSERT INTO messages (organization_id, type, direction, text, thread_id) VALUES (${orgId}, 'sms', 'incoming', 'Call me Monday', 'monday')`);
    await database.db.execute(sql`UPDATE threads SET status = 'snoozed', snoozed_until = now() + interval '1 minute' WHERE organization_id = ${orgId} AND id = 'monday'`);
    // Not due yet: nothing ends, and the process stops.
    expect(await createSnoozeWorker({ db: database.db, clock: () => new Date(), log: silent }).runOnce()).toBe(0);
    await database.close();

    const later = () => new Date(Date.now() + 61_000);
    database = await openDatabase({ dataDir });
    const worker = createSnoozeWorker({ db: database.db, clock: later, log: silent });
    expect([await worker.runOnce(), await worker.runOnce()]).toEqual([1, 0]);
    await database.close();

    database = await openDatabase({ dataDir });
    try {
      expect(await createSnoozeWorker({ db: database.db, clock: later, log: silent }).runOnce()).toBe(0);
      const [thread] = await rows(database, sql`SELECT status, snoozed_until FROM threads WHERE organization_id = ${orgId} AND id = 'monday'`);
      expect(thread).toEqual({ status: 'open', snoozed_until: null });
      const reopened = await rows(database, sql`SELECT data::jsonb->>'reason' AS reason FROM events WHERE organization_id = ${orgId} AND type = 'thread.reopened'`);
      expect(reopened).toEqual([{ reason: 'snooze_ended' }]);
    } finally {
      await database.close();
    }
  });
});
