import { describe, expect, it } from 'vitest';
import { createWhatsAppChannel, loadWhatsAppChannel } from '../../src/modules/channels/whatsapp/whatsapp.repository.js';
import { WhatsAppChannelCreateInput } from '../../src/modules/channels/whatsapp/whatsapp.schemas.js';
import { testWhatsAppChannel } from '../../src/modules/channels/whatsapp/whatsapp.test-channel.js';
import { transmitWhatsApp } from '../../src/modules/channels/whatsapp/whatsapp.transmit.js';
import { useTestApp, type Tenant } from '../helpers/app.js';
import { useFakeGraph, whatsappTestEnv } from '../helpers/whatsapp-app.js';

/** Sending WhatsApp messages through Meta (a local fake Graph API) and what Meta's answers do to the channel. */

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const { t, a, b } = useTestApp({ app: { env: whatsappTestEnv() } });
const graph = useFakeGraph();
const ctx = { allowPrivate: true, timeoutMs: 2000 };

async function addChannel(who: Tenant) {
  const input = WhatsAppChannelCreateInput.parse({ type: 'whatsapp', name: 'Support', address: '+14155550100', provider: { kind: 'meta', phoneNumberId: graph.phoneNumberId, accessToken: graph.accessToken, appSecret: 'secret', apiBaseUrl: graph.url } });
  return createWhatsAppChannel(t.database.db, who.orgId, input);
}

async function eventsOf(who: Tenant, type: string, resourceId: string) {
  const list = (await who.request('GET', `/v1/events?type=${type}&limit=100`)).json.data as Json[];
  return list.filter((e) => e.resourceId === resourceId);
}

describe('transmitting', () => {
  it("puts the channel in error at once when Meta refuses its token, and active again when Meta takes a message", async () => {
    const created = await addChannel(a);
    const channel = (await loadWhatsAppChannel(t.database.db, created.id))!;
    expect(await transmitWhatsApp(t.database.db, channel, { to: '14155550123', text: 'hello' }, ctx)).toMatchObject({ kind: 'sent' });
    expect(graph.sent.at(-1)!.body).toMatchObject({ to: '14155550123', type: 'text', text: { body: 'hello' } });
    graph.revoke();
    expect(await transmitWhatsApp(t.database.db, channel, { to: '14155550123', text: 'hello' }, ctx)).toMatchObject({ kind: 'failed', credentials: true, code: '190' });
    const broken = (await a.request('GET', `/v1/channels/${created.id}`)).json.data;
    expect(broken.status).toBe('error');
    expect(broken.lastError).toMatch(/^provider: Meta: Meta answered 401 \(error 190: Error validating access token/);
    expect(broken.lastError).toContain('provider.accessToken');
    expect(await eventsOf(a, 'channel.error', created.id)).toHaveLength(1);
    graph.revoke(false);
    const again = (await loadWhatsAppChannel(t.database.db, created.id))!;
    expect(await transmitWhatsApp(t.database.db, again, { to: '14155550123', template: { name: 'hello_world', language: 'en_US' } }, ctx)).toMatchObject({ kind: 'sent' });
    expect((await a.request('GET', `/v1/channels/${created.id}`)).json.data.status).toBe('active');
    expect(await eventsOf(a, 'channel.recovered', created.id)).toHaveLength(1);
  });

  it('refuses a second channel of the organization with the same number or phone number id', async () => {
    await expect(addChannel(a)).rejects.toMatchObject({ code: 'VALIDATION_ERROR', details: { properties: { address: expect.anything() } } });
  });

  it('tests the channel: the token reads the phone number', async () => {
    const created = await addChannel(b);
    const channel = (await loadWhatsAppChannel(t.database.db, created.id))!;
    expect(await testWhatsAppChannel(channel, ctx)).toMatchObject({ ok: true, inbound: { mode: 'whatsapp', ok: true }, outbound: { ok: true, steps: [{ step: 'phoneNumber', ok: true }] } });
    graph.revoke();
    try {
      expect(await testWhatsAppChannel(channel, ctx)).toMatchObject({ ok: false, outbound: { ok: false, error: expect.stringContaining('error 190') } });
    } finally {
      graph.revoke(false);
    }
  });
});
