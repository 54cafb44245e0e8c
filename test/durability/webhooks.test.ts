import { describe, expect, it } from 'vitest';
import { freePort } from '../helpers/listen.js';
import { startReceiver } from '../helpers/webhook-receiver.js';
import { send, startServer, useStore } from './server-process.js';

/**
 * Deliveries survive a crash: events written while the receiver is down are queued in the database; the
 * server is killed with -9, started again, the receiver comes up, and every event arrives.
 */

const store = useStore();

describe(`webhooks across kill -9 (${process.env.SB_TEST_DB ?? 'pglite'})`, () => {
  it('delivers every acknowledged event after a restart, though the receiver was down when they were written', async () => {
    const env = { ...store.env, WEBHOOK_ALLOW_INSECURE: 'true' };
    const port = await freePort(); // nothing listens here yet
    const server = await startServer(env);
    const created = await send(server.url, 'POST', '/v1/webhooks', store.key, { url: `http://127.0.0.1:${port}/hook`, eventTypes: ['contact.created'] });
    expect(created.status, created.body).toBe(201);

    const ids: string[] = [];
    for (let i = 0; i < 25; i++) {
      const res = await send(server.url, 'POST', '/v1/contacts', store.key, { name: `Queued ${i}` });
      expect(res.status).toBe(201);
      ids.push((JSON.parse(res.body) as { data: { id: string } }).data.id);
    }
    server.proc.kill('SIGKILL');
    await server.exited;

    const receiver = await startReceiver(port);
    try {
      const again = await startServer(env);
      // The first attempts failed (connection refused) and wait for their retry (about 5 s, then 1 min):
      // retry them now through the API, as an operator would, instead of waiting.
      const endpointId = (JSON.parse(created.body) as { data: { id: string } }).data.id;
      const deadline = Date.now() + 90_000; // deliveries a killed process held are taken over when their lease (20 s) runs out
      while (new Set(receiver.received.map((r) => r.headers['webhook-id'])).size < 25 && Date.now() < deadline) {
        const list = JSON.parse((await send(again.url, 'GET', `/v1/webhooks/${endpointId}/deliveries?limit=100`, store.key)).body) as { data: { id: string; status: string }[] };
        for (const d of list.data.filter((x) => x.status === 'failed' || x.status === 'pending')) {
          await send(again.url, 'POST', `/v1/webhooks/${endpointId}/deliveries/${d.id}/retry`, store.key);
        }
        await new Promise((r) => setTimeout(r, 500));
      }
      const delivered = new Set(receiver.received.map((r) => (JSON.parse(r.body) as { data: { id: string } }).data.id));
      expect(ids.filter((id) => !delivered.has(id))).toEqual([]);
    } finally {
      await receiver.close();
    }
  }, 150_000);
});
