import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { testDbKind } from '../helpers/database.js';
import { useStore, send, sendUntilServed, spawnServer, startServer } from './server-process.js';

/**
 * The embedded database does not lock its directory itself: a second server on the same DATA_DIR must
 * refuse clearly while the first runs, and take over a lock left by a process that was killed.
 */

const store = useStore(testDbKind === 'pglite');

describe.skipIf(testDbKind !== 'pglite')('data directory lock (embedded database)', () => {
  it('refuses a second server while the first runs, and takes over after kill -9', async () => {
    const first = await startServer(store.env);
    const created = await send(first.url, 'POST', '/v1/contacts', store.key, { name: 'Before the crash' });
    expect(created.status).toBe(201);

    const second = await spawnServer(store.env);
    const refused = await Promise.race([second.exited, new Promise<'running'>((r) => setTimeout(() => r('running'), 30_000))]);
    expect(refused, second.output()).not.toBe('running');
    expect(refused).toMatchObject({ code: 1 });
    expect(second.output()).toMatch(/in use by another Switchboard process/);
    expect(second.output()).toContain(`pid ${first.pid}`);
    // The first server is unharmed.
    expect((await send(first.url, 'GET', '/v1/contacts?limit=1', store.key)).status).toBe(200);

    first.proc.kill('SIGKILL');
    await first.exited;
    expect(readFileSync(join(store.dataDir, 'switchboard.pid'), 'utf8').trim()).toBe(String(first.pid)); // stale lock left behind

    const third = await startServer(store.env);
    expect(readFileSync(join(store.dataDir, 'switchboard.pid'), 'utf8').trim()).toBe(String(third.pid));
    const id = (JSON.parse(created.body) as { data: { id: string } }).data.id;
    // Asked again on a 503, as a client would: it must find the contact written before the crash.
    const got = await sendUntilServed(third.url, 'GET', `/v1/contacts/${id}`, store.key);
    expect(got.status, got.body).toBe(200);
    third.proc.kill('SIGTERM');
    expect(await third.exited).toEqual({ code: 0, signal: null });
  }, 120_000);
});
