import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWebhookDelivery } from '../../src/workers/webhook-delivery.js';
import { useTestApp } from '../helpers/app.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

/**
 * An endpoint stored while WEBHOOK_ALLOW_INSECURE=true (http to a loopback receiver) is checked again at
 * every send: once the setting is off, nothing reaches it, and the delivery says why.
 */

const silent = { error: () => {}, warn: () => {} };
const { t, a } = useTestApp({ app: { env: { WEBHOOK_ALLOW_INSECURE: 'true' } } });
let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(() => receiver?.close());

describe('WEBHOOK_ALLOW_INSECURE turned off', () => {
  it('stops deliveries to an http loopback endpoint stored while it was on', async () => {
    const created = await a.request('POST', '/v1/webhooks', { url: receiver.url, eventTypes: ['contact.created'] });
    expect(created.status, created.body).toBe(201);
    const endpointId = created.json.data.id as string;
    const clock = () => new Date();

    // While allowed, a delivery arrives.
    await a.request('POST', '/v1/contacts', { name: 'Allowed' });
    await createWebhookDelivery({ db: t.database.db, clock, log: silent, allowInsecure: true }).runOnce();
    expect(receiver.received).toHaveLength(1);

    // The same process restarted with the setting off: the stored http://127.0.0.1 URL is refused at send time.
    await a.request('POST', '/v1/contacts', { name: 'Refused' });
    await createWebhookDelivery({ db: t.database.db, clock, log: silent, allowInsecure: false }).runOnce();
    expect(receiver.received).toHaveLength(1);
    const deliveries = (await a.request('GET', `/v1/webhooks/${endpointId}/deliveries`)).json.data as { status: string; statusCode: number | null; error: string | null }[];
    const refused = deliveries.find((d) => d.status !== 'succeeded');
    expect(refused).toMatchObject({ statusCode: null });
    expect(refused?.error).toMatch(/Must use https/);
  });
});
