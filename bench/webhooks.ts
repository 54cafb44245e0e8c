import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Row } from './report.js';

/**
 * Webhook throughput: `writes` contacts are written (20 at a time) while `endpoints` endpoints on a local
 * receiver subscribe to `contact.created`; the figure is deliveries received per second, from the first
 * write to the last delivery. The service must run with WEBHOOK_ALLOW_INSECURE=true (a loopback receiver).
 */
export async function webhookThroughput(database: string, origin: string, auth: Record<string, string>, endpoints: number, writes = 1000): Promise<Row> {
  const scenario = `webhook deliveries/s (${endpoints} endpoint${endpoints > 1 ? 's' : ''})`;
  let received = 0;
  const receiver = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      received++;
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  const headers = { ...auth, 'content-type': 'application/json' };
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${origin}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    const json = (await res.json()) as { data?: { id: string } };
    if (!res.ok) throw new Error(`${method} ${path}: HTTP ${res.status} ${JSON.stringify(json)}`);
    return json.data!;
  };
  const ids: string[] = [];
  try {
    for (let i = 0; i < endpoints; i++) ids.push((await call('POST', '/v1/webhooks', { url, eventTypes: ['contact.created'] })).id);
    const start = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        while (next < writes) {
          next++;
          await call('POST', '/v1/contacts', { name: 'Webhook bench' });
        }
      }),
    );
    const expected = writes * endpoints;
    const deadline = Date.now() + 120_000;
    while (received < expected && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const seconds = (performance.now() - start) / 1000;
    if (received < expected) return { database, scenario, status: 'unavailable', note: `${received} of ${expected} deliveries within 120 s` };
    return { database, scenario, status: 'measured', note: `${(expected / seconds).toFixed(0)} deliveries/s: ${expected} deliveries of ${writes} writes in ${seconds.toFixed(1)} s` };
  } catch (err) {
    return { database, scenario, status: 'unavailable', note: (err as Error).message };
  } finally {
    for (const id of ids) await call('DELETE', `/v1/webhooks/${id}`).catch(() => undefined);
    receiver.close();
  }
}
