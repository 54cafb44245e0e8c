import { eq, sql } from 'drizzle-orm';
import { Webhook as Verifier } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../src/db/client.js';
import { webhookDeliveries } from '../../src/db/schema.js';
import { createWebhookDelivery, GIVE_UP_AFTER_MS, retryDelay } from '../../src/workers/webhook-delivery.js';
import { useTestApp, type Tenant } from '../helpers/app.js';
import { testDbKind } from '../helpers/database.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

/** The delivery worker's clock: the real time unless a test moves it, so retries are reached without sleeping. */
let offsetMs = 0;
const clock = () => new Date(Date.now() + offsetMs);
const silent = { error: () => {}, warn: () => {} };

const { t, a, b } = useTestApp({ app: { env: { WEBHOOK_ALLOW_INSECURE: 'true' } } });
let receiver: Receiver;
let worker: ReturnType<typeof createWebhookDelivery>;

beforeAll(async () => {
  receiver = await startReceiver();
  worker = createWebhookDelivery({ db: t.database.db, clock, log: silent, allowInsecure: true, random: () => 0.5 });
});
afterAll(() => receiver?.close());

async function createEndpoint(who: Tenant, body: Record<string, unknown> = {}) {
  const res = await who.request('POST', '/v1/webhooks', { url: receiver.url, ...body });
  expect(res.status, res.body).toBe(201);
  return res.json.data as { id: string; secret: string; url: string; eventTypes: string[] };
}

describe('webhook endpoints', () => {
  it('a write is delivered once, signed so that the Standard Webhooks verification accepts it', async () => {
    const endpoint = await createEndpoint(a, { eventTypes: ['contact.created'] });
    expect(endpoint.secret).toMatch(/^whsec_/);
    expect((await a.request('GET', `/v1/webhooks/${endpoint.id}`)).json.data.secret).toBeUndefined();
    receiver.received.length = 0;

    const contact = await a.request('POST', '/v1/contacts', { name: 'Ada' });
    await a.request('POST', '/v1/folders', { name: 'Not subscribed' });
    await worker.runOnce();
    await worker.runOnce();

    expect(receiver.received).toHaveLength(1);
    const [got] = receiver.received;
    const payload = new Verifier(endpoint.secret).verify(got!.body, got!.headers as Record<string, string>) as Record<string, unknown>;
    expect(payload).toMatchObject({ type: 'contact.created', data: { id: contact.json.data.id, name: 'Ada' } });
    expect(got!.headers['webhook-id']).toBe(payload.id);

    const deliveries = await a.request('GET', `/v1/webhooks/${endpoint.id}/deliveries`);
    expect(deliveries.json.data).toHaveLength(1);
    expect(deliveries.json.data[0]).toMatchObject({ eventType: 'contact.created', status: 'succeeded', attempt: 1, statusCode: 200, error: null, nextAttemptAt: null });
    await a.request('DELETE', `/v1/webhooks/${endpoint.id}`);
  });

  it('retries a failed delivery after the backoff (500, then 200)', async () => {
    const endpoint = await createEndpoint(a, { eventTypes: ['folder.created'] });
    receiver.received.length = 0;
    receiver.statuses.push(500);
    await a.request('POST', '/v1/folders', { name: 'Retry me' });
    await worker.runOnce();
    expect(receiver.received).toHaveLength(1);
    let [d] = (await a.request('GET', `/v1/webhooks/${endpoint.id}/deliveries`)).json.data;
    expect(d).toMatchObject({ status: 'pending', attempt: 1, statusCode: 500, error: 'The endpoint answered HTTP 500' });
    // The wait runs from the end of the attempt.
    const wait = new Date(d.nextAttemptAt).getTime() - new Date(d.lastAttemptAt).getTime();
    expect(wait).toBeGreaterThanOrEqual(retryDelay(1, () => 0.5));
    expect(wait).toBeLessThan(retryDelay(1, () => 0.5) + 1000);

    await worker.runOnce(); // not due yet
    expect(receiver.received).toHaveLength(1);
    offsetMs += 6_000;
    await worker.runOnce();
    expect(receiver.received).toHaveLength(2);
    expect(receiver.received[0]!.headers['webhook-id']).toBe(receiver.received[1]!.headers['webhook-id']);
    [d] = (await a.request('GET', `/v1/webhooks/${endpoint.id}/deliveries`)).json.data;
    expect(d).toMatchObject({ status: 'succeeded', attempt: 2, statusCode: 200 });

    // A manual retry sends it once more.
    const retried = await a.request('POST', `/v1/webhooks/${endpoint.id}/deliveries/${d.id}/retry`);
    expect(retried.status, retried.body).toBe(200);
    await worker.runOnce();
    expect(receiver.received).toHaveLength(3);
    await a.request('DELETE', `/v1/webhooks/${endpoint.id}`);
  });

  it('gives up after 3 days of failures and disables the endpoint with a reason', async () => {
    const endpoint = await createEndpoint(a, { eventTypes: ['business.created'] });
    await a.request('POST', '/v1/businesses', { name: 'Never reached' });
    receiver.statuses.push(...Array<number>(40).fill(503));
    for (let i = 0; i < 40; i++) {
      await worker.runOnce();
      const [d] = (await a.request('GET', `/v1/webhooks/${endpoint.id}/deliveries`)).json.data;
      if (d.status === 'failed') break;
      offsetMs = new Date(d.nextAttemptAt).getTime() - Date.now() + 1000;
    }
    const [d] = (await a.request('GET', `/v1/webhooks/${endpoint.id}/deliveries`)).json.data;
    expect(d.status).toBe('failed');
    expect(new Date(d.lastAttemptAt).getTime() - new Date(d.createdAt).getTime()).toBeLessThanOrEqual(GIVE_UP_AFTER_MS);
    const after = (await a.request('GET', `/v1/webhooks/${endpoint.id}`)).json.data;
    expect(after.enabled).toBe(false);
    expect(after.disabledReason).toMatch(/failed for 3 days.*503/);
    receiver.statuses.length = 0;
    // Enabling it again clears the reason.
    const enabled = await a.request('PATCH', `/v1/webhooks/${endpoint.id}`, { enabled: true });
    expect(enabled.json.data).toMatchObject({ enabled: true, disabledReason: null });
    await a.request('DELETE', `/v1/webhooks/${endpoint.id}`);
    offsetMs = 0;
  });

  it('rotating the secret signs with both secrets for the overlap', async () => {
    const endpoint = await createEndpoint(a, { eventTypes: ['webhook.updated', 'contact.updated'] });
    const rotated = await a.request('POST', `/v1/webhooks/${endpoint.id}/rotate-secret`);
    expect(rotated.status, rotated.body).toBe(200);
    const newSecret = rotated.json.data.secret as string;
    expect(newSecret).not.toBe(endpoint.secret);
    receiver.received.length = 0;
    await worker.runOnce(); // the rotation itself is a webhook.updated event
    expect(receiver.received).toHaveLength(1);
    const got = receiver.received[0]!;
    expect(String(got.headers['webhook-signature']).split(' ')).toHaveLength(2);
    const events = (await a.request('GET', '/v1/events?type=webhook.updated')).json.data;
    expect(JSON.stringify(events)).not.toContain('whsec_');
    for (const secret of [endpoint.secret, newSecret]) {
      const payload = new Verifier(secret).verify(got.body, got.headers as Record<string, string>) as { data: Record<string, unknown> };
      expect(payload.data.secret).toBeUndefined(); // the event never carries the secret
    }
    await a.request('DELETE', `/v1/webhooks/${endpoint.id}`);
  });

  it('test events reach the endpoint; another organization sees none of it', async () => {
    const endpoint = await createEndpoint(a, { eventTypes: ['domain.created'] });
    receiver.received.length = 0;
    const sent = await a.request('POST', `/v1/webhooks/${endpoint.id}/test`);
    expect(sent.status, sent.body).toBe(200);
    expect(sent.json.data).toMatchObject({ eventType: 'webhook.test', status: 'pending' });
    await worker.runOnce();
    expect(JSON.parse(receiver.received[0]!.body)).toMatchObject({ type: 'webhook.test', data: { webhookId: endpoint.id } });

    expect((await b.request('GET', `/v1/webhooks/${endpoint.id}`)).status).toBe(404);
    expect((await b.request('GET', `/v1/webhooks/${endpoint.id}/deliveries`)).status).toBe(404);
    expect((await b.request('POST', `/v1/webhooks/${endpoint.id}/test`)).status).toBe(404);
    expect((await b.request('GET', '/v1/webhooks')).json.data).toEqual([]);
    // b's writes are not delivered to a's endpoint.
    receiver.received.length = 0;
    await b.request('POST', '/v1/domains', { domain: 'b-only.example' });
    await worker.runOnce();
    expect(receiver.received).toHaveLength(0);
    await a.request('DELETE', `/v1/webhooks/${endpoint.id}`);
  });

  it('a rolled-back write queues no delivery', async () => {
    const endpoint = await createEndpoint(a, { eventTypes: ['*'] });
    const before = await t.database.db.select().from(webhookDeliveries).where(eq(webhookDeliveries.endpointId, endpoint.id));
    const bad = await a.request('POST', '/v1/folders', { name: 'x', parentFolderId: '00000000-0000-4000-8000-000000000000' });
    expect(bad.status).toBe(400);
    const after = await t.database.db.select().from(webhookDeliveries).where(eq(webhookDeliveries.endpointId, endpoint.id));
    expect(after).toHaveLength(before.length);
    await a.request('DELETE', `/v1/webhooks/${endpoint.id}`);
  });
});

describe('webhook endpoint input', () => {
  it.each([
    ['ftp://example.com/hook', /https/],
    ['not a url', /absolute URL/],
    ['https://user:pw@example.com/hook', /credentials/],
  ])('refuses %s', async (url, message) => {
    const res = await a.request('POST', '/v1/webhooks', { url });
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe('VALIDATION_ERROR');
    expect(JSON.stringify(res.json.error.details)).toMatch(message);
  });

  it('refuses unknown event types and unknown fields', async () => {
    expect((await a.request('POST', '/v1/webhooks', { url: receiver.url, eventTypes: ['contact.exploded'] })).status).toBe(400);
    expect((await a.request('POST', '/v1/webhooks', { url: receiver.url, eventTypes: [] })).status).toBe(400);
    expect((await a.request('POST', '/v1/webhooks', { url: receiver.url, secret: 'mine' })).status).toBe(400);
  });

  it('caps the endpoints of an organization', async () => {
    const c = await t.tenant();
    for (let i = 0; i < 20; i++) expect((await c.request('POST', '/v1/webhooks', { url: receiver.url })).status).toBe(201);
    const over = await c.request('POST', '/v1/webhooks', { url: receiver.url });
    expect(over.status).toBe(400);
    expect(over.json.error.message).toMatch(/at most 20/);
  });
});

describe.runIf(testDbKind === 'postgres')('two delivery workers on one PostgreSQL database', () => {
  it('deliver each event once', async () => {
    const second = await openDatabase({ url: (t.database as Database & { url: string }).url, poolSize: 5 });
    try {
      while ((await worker.runOnce()) > 0); // what earlier tests queued
      const endpoint = await createEndpoint(a, { eventTypes: ['contact.created'] });
      receiver.received.length = 0;
      const workers = [t.database, second].map((d) => createWebhookDelivery({ db: d.db, clock, log: silent, allowInsecure: true }));
      for (let i = 0; i < 40; i++) await a.request('POST', '/v1/contacts', { name: `c${i}` });
      for (;;) {
        const done = await Promise.all(workers.map((w) => w.runOnce()));
        if (done.every((n) => n === 0)) break;
      }
      const ids = receiver.received.map((r) => String(r.headers['webhook-id']));
      expect(ids).toHaveLength(40);
      expect(new Set(ids).size).toBe(40);
      // In order for the one endpoint: the contacts arrive as they were written.
      expect(receiver.received.map((r) => (JSON.parse(r.body) as { data: { name: string } }).data.name)).toEqual(Array.from({ length: 40 }, (_, i) => `c${i}`));
      await a.request('DELETE', `/v1/webhooks/${endpoint.id}`);
    } finally {
      await second.close();
    }
  });

  it("a claim never takes an endpoint's deliveries past one that another process holds (its batch stays in order)", async () => {
    const second = await openDatabase({ url: (t.database as Database & { url: string }).url, poolSize: 2 });
    try {
      while ((await worker.runOnce()) > 0);
      const endpoint = await createEndpoint(a, { eventTypes: ['contact.created'] });
      receiver.received.length = 0;
      for (let i = 0; i < 4; i++) await a.request('POST', '/v1/contacts', { name: `held${i}` });
      const queued = await t.database.db
        .select({ id: webhookDeliveries.id })
        .from(webhookDeliveries)
        .where(eq(webhookDeliveries.endpointId, endpoint.id))
        .orderBy(webhookDeliveries.nextAttemptAt, webhookDeliveries.createdAt, webhookDeliveries.id);
      expect(queued).toHaveLength(4);
      const names = () => receiver.received.map((r) => (JSON.parse(r.body) as { data: { name: string } }).data.name);
      // Another process's claim in flight: it has locked the endpoint's second delivery and not committed yet.
      await second.db.transaction(async (tx) => {
        await tx.execute(sql`SELECT id FROM webhook_deliveries WHERE id = ${queued[1]!.id} FOR UPDATE`);
        await worker.runOnce();
        expect(names()).toEqual(['held0']);
      });
      while ((await worker.runOnce()) > 0);
      expect(names()).toEqual(['held0', 'held1', 'held2', 'held3']);
      await a.request('DELETE', `/v1/webhooks/${endpoint.id}`);
    } finally {
      await second.close();
    }
  });
});
