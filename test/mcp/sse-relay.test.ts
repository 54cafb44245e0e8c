import { Redis } from 'ioredis';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import type { Tenant } from '../helpers/app.js';
import { freePort } from '../helpers/listen.js';
import { skipWithout } from '../helpers/requirements.js';
import { mintToken, startLiveApp, type LiveApp } from './helpers.js';

/**
 * Two instances of the service behind one PUBLIC_URL, sharing the database and Redis: a POST for an
 * /sse session that lands on the instance without the stream is relayed to the one holding it.
 * Runs when TEST_REDIS_URL names a Redis server (e.g. redis://127.0.0.1:6379).
 */
const redisUrl = process.env.TEST_REDIS_URL;

describe.skipIf(skipWithout(!!redisUrl, 'Redis (TEST_REDIS_URL)'))('/sse across instances (Redis relay)', () => {
  let first: LiveApp;
  let second: FastifyInstance;
  let secondOrigin: string;
  let tenant: Tenant;
  const clients: Redis[] = [];

  beforeAll(async () => {
    const redisA = new Redis(redisUrl!);
    const redisB = new Redis(redisUrl!);
    clients.push(redisA, redisB);
    first = await startLiveApp({ redis: redisA });
    const port = await freePort();
    secondOrigin = `http://127.0.0.1:${port}`;
    second = await buildApp({ config: first.config, database: first.database, redis: redisB });
    await second.listen({ port, host: '127.0.0.1' });
    tenant = await first.tenant();
  });
  afterAll(async () => {
    await second.close();
    await first.close();
    for (const c of clients) c.disconnect();
  });

  it('relays a POST received by another instance onto the stream, and still checks the (user, client)', async () => {
    const owner = await mintToken(first, tenant);
    const intruder = await mintToken(first, tenant, { clientId: owner.clientId });
    const controller = new AbortController();
    const stream = await fetch(`${first.origin}/sse`, { headers: { authorization: `Bearer ${owner.token}` }, signal: controller.signal });
    expect(stream.status).toBe(200);
    const reader = stream.body!.getReader();
    let buffer = '';
    const waitFor = async (re: RegExp) => {
      while (!re.test(buffer)) {
        const { value, done } = await reader.read();
        if (done) throw new Error('stream ended');
        buffer += new TextDecoder().decode(value);
      }
      return re.exec(buffer)!;
    };
    const endpoint = (await waitFor(/event: endpoint\ndata: ([^\n]+)\n/))[1]!;

    const post = (token: string, body: unknown, path = endpoint) =>
      fetch(`${secondOrigin}${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const init = { jsonrpc: '2.0', id: 'init-1', method: 'initialize', params: { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };

    expect((await post(intruder.token, init)).status).toBe(403);
    expect((await post(owner.token, init, '/sse/messages?sessionId=00000000-0000-4000-8000-000000000000')).status).toBe(404);
    expect((await post(owner.token, init)).status).toBe(202);
    const answer = await waitFor(/event: message\ndata: (\{[^\n]*"id":"init-1"[^\n]*)\n/);
    expect(JSON.parse(answer[1]!).result.serverInfo.name).toBe('switchboard');

    expect((await post(owner.token, { jsonrpc: '2.0', method: 'notifications/initialized' })).status).toBe(202);
    expect((await post(owner.token, { jsonrpc: '2.0', id: 'list-1', method: 'tools/list' })).status).toBe(202);
    const list = await waitFor(/event: message\ndata: (\{[^\n]*"id":"list-1"[^\n]*)\n/);
    expect(JSON.parse(list[1]!).result.tools.length).toBeGreaterThan(0);
    controller.abort();
  });
});
