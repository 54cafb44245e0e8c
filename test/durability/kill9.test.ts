import { describe, expect, it } from 'vitest';
import { killAll as stopAll, send, startServer, useStore } from './server-process.js';

/**
 * kill -9 in the middle of a stream of writes: every write the server acknowledged (201) is there after a
 * restart. Runs on the embedded database, and on PostgreSQL when the suite runs against it.
 */

const store = useStore();

describe(`kill -9 (${process.env.SB_TEST_DB ?? 'pglite'})`, () => {
  // Three kill points: early (pools and caches still warming), mid-stream and later under a longer stream.
  it.each([30, 200, 600])('loses no acknowledged write when killed after %i acknowledgements', async (killAfter) => {
    const server = await startServer(store.env);
    const acknowledged: string[] = [];
    const unexpected: string[] = [];
    let attempted = 0;
    let dying = false;

    // 16 writers create contacts back to back until the process dies under them.
    const writer = async (w: number) => {
      for (;;) {
        const n = attempted++;
        try {
          const res = await send(server.url, 'POST', '/v1/contacts', store.key, { name: `Writer ${w} #${n}`, data: { n } });
          if (res.status === 201) acknowledged.push((JSON.parse(res.body) as { data: { id: string } }).data.id);
          else unexpected.push(`${res.status}: ${res.body}`);
        } catch (err) {
          // Connection errors are expected once the process is being killed: those writes were never acknowledged.
          if (!dying) unexpected.push(String(err));
          return;
        }
      }
    };
    const writers = Array.from({ length: 16 }, (_, w) => writer(w));

    // Kill once enough writes are acknowledged (or after 5 s), with requests still in flight.
    const deadline = Date.now() + 10_000;
    while (acknowledged.length < killAfter && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    dying = true;
    server.proc.kill('SIGKILL');
    const exit = await server.exited;
    await Promise.all(writers);
    expect(unexpected).toEqual([]);
    expect(exit.signal).toBe('SIGKILL');
    expect(acknowledged.length).toBeGreaterThan(20);
    expect(attempted).toBeGreaterThan(acknowledged.length); // some were in flight when it died

    const again = await startServer(store.env);
    const missing: string[] = [];
    for (let i = 0; i < acknowledged.length; i += 16) {
      const batch = acknowledged.slice(i, i + 16);
      const answers = await Promise.all(batch.map((id) => send(again.url, 'GET', `/v1/contacts/${id}`, store.key)));
      answers.forEach((a, j) => a.status !== 200 && missing.push(`${batch[j]} -> ${a.status}`));
    }
    expect(missing).toEqual([]);
    process.stdout.write(`kill -9 (${store.kind}) after ${killAfter}: acknowledged ${acknowledged.length}, lost ${missing.length}\n`);
    await stopAll();
  }, 120_000);
});
