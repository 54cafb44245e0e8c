import { randomBytes } from 'node:crypto';
import { eq, sql } from 'drizzle-orm';
import smpp from 'smpp';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { channels, channelSyncStates, smsOutbox, smsParts } from '../../src/db/schema.js';
import { boundSmppChannels, messageIdForms, smppProvider } from '../../src/modules/channels/sms/providers/smpp.js';
import { PART_LIMITS } from '../../src/modules/channels/sms/smpp.receive.js';
import { runOperation } from '../../src/run-operation.js';
import { createAutomationEngine } from '../../src/workers/automation-engine.js';
import { builtinEvaluator } from '../../src/workers/evaluator/deterministic.js';
import { createSmppBinds, deliverWindowOf } from '../../src/workers/smpp-binds.js';
import { createSmsSender } from '../../src/workers/sms-sender.js';
import { useTestApp } from '../helpers/app.js';
import { receiptText, startSmsc, type FakeSmsc } from '../helpers/smsc.js';
import { selfSignedCertificate } from '../helpers/smtp-relay.js';

/**
 * SMPP text channels against a real SMSC in the test process (the `smpp` package's server,
 * test/helpers/smsc.ts): binds with a lease, submit_sm, receipts, long texts both ways, a dropped
 * connection and a refused bind.
 */

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let offsetMs = 0;
const clock = () => new Date(Date.now() + offsetMs);
const silent = { error: () => {}, warn: () => {}, info: () => {} };
const SECRETS_KEY = randomBytes(32).toString('base64');
const { t, a } = useTestApp({ credits: 1000, app: { env: { SECRETS_KEY, CHANNELS_ALLOW_PRIVATE: 'true' } } });
let smsc: FakeSmsc;
let sender: ReturnType<typeof createSmsSender>;
const workers: ReturnType<typeof createSmppBinds>[] = [];
const created: string[] = [];

const binds = (owner?: string, extra: Partial<Parameters<typeof createSmppBinds>[0]> = {}) => {
  const w = createSmppBinds({ db: t.database.db, clock, log: silent, run: runOperation, allowPrivate: true, timeoutMs: 3000, leaseMs: 3000, reconnectDelaysMs: [100, 200], random: () => 0.5, deliverRateLimit: t.config.sms.smppDeliverRateLimit, deliverWindow: deliverWindowOf(t.database.kind), ...(owner ? { owner } : {}), ...extra });
  workers.push(w);
  return w;
};

beforeAll(async () => {
  smsc = await startSmsc({ esme1: 'secret1' });
  sender = createSmsSender({ db: t.database.db, clock, log: silent, allowPrivate: true, sendTimeoutMs: 3000, random: () => 0.5, sleep: async () => {} });
});
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop()));
  // Every test's channels go: the next test's worker binds only its own.
  for (const id of created.splice(0)) await a.request('DELETE', `/v1/channels/${id}`);
  smsc.refuseNext.length = 0;
  smsc.idFormat = 'hex';
  smsc.afterSubmit = undefined;
  smsc.beforeSubmitAnswer = undefined;
  smsc.afterBind = undefined;
  smsc.answerEnquireLink = true;
  offsetMs = 0;
});
afterAll(async () => {
  await sender?.stop();
  await smsc?.close();
});

let numbers = 0;
const number = () => `+1212${String(3000000 + ++numbers * 1000 + Math.floor(Math.random() * 1000)).padStart(7, '0')}`;

const provider = (extra: Json = {}) => ({ kind: 'smpp', host: '127.0.0.1', port: smsc.port, tls: false, systemId: 'esme1', password: 'secret1', ...extra });

async function addChannel(extra: Json = {}) {
  const res = await a.request('POST', '/v1/channels', { type: 'sms', name: 'SMPP line', address: number(), provider: provider(), rate: 100, ...extra });
  expect(res.status, res.body).toBe(201);
  created.push(res.json.data.id);
  return res.json.data as Json;
}

async function bound(channel: Json) {
  const w = binds();
  w.start();
  await smsc.until(() => smsc.bound().length === 1, 10_000, 'the bind');
  await until(async () => boundSmppChannels().includes(channel.id), 'the bind registered');
  return w;
}

async function until(check: () => Promise<boolean>, what: string, timeoutMs = 10_000) {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`Timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function drain() {
  await sender.runOnce();
  await sender.idle();
}

const get = async (id: string) => (await a.request('GET', `/v1/messages/${id}`)).json.data as Json;

async function send(channel: Json, to: string, text: string) {
  const res = await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: [to], text });
  expect(res.status, res.body).toBe(201);
  return res.json.data as Json;
}

async function received(channel: Json) {
  const list = (await a.request('GET', '/v1/messages?limit=100')).json.data as Json[];
  return list.filter((m) => m.channelId === channel.id && m.direction === 'incoming');
}

async function eventsOf(type: string, resourceId: string) {
  const list = (await a.request('GET', `/v1/events?type=${type}&limit=100`)).json.data as Json[];
  return list.filter((e) => e.resourceId === resourceId);
}

/** A customer's text as the SMSC delivers it. */
const mo = (from: string, to: string, extra: Json) => ({ source_addr: from.slice(1), source_addr_ton: 1, source_addr_npi: 1, destination_addr: to.slice(1), dest_addr_ton: 1, dest_addr_npi: 1, data_coding: 0, ...extra });

describe('SMPP channels', () => {
  it('accepts an SMPP provider: the password is write-only and encrypted, passwordSet answered; bad fields are 400s at their place', async () => {
    const channel = await addChannel();
    expect(channel).toMatchObject({ type: 'sms', provider: { kind: 'smpp', host: '127.0.0.1', port: smsc.port, tls: false, systemId: 'esme1', systemType: null, passwordSet: true }, inbound: { mode: 'sms', webhookUrl: null, statusUrl: null } });
    expect(JSON.stringify(channel)).not.toContain('secret1');
    const [row] = await t.database.db.select({ secret: channels.outboundSecret }).from(channels).where(eq(channels.id, channel.id));
    expect(row!.secret).not.toContain('secret1');
    const patched = await a.request('PATCH', `/v1/channels/${channel.id}`, { provider: provider({ systemType: 'VMA', password: 'other' }) });
    expect(patched.status, patched.body).toBe(200);
    expect(patched.json.data.provider).toMatchObject({ systemType: 'VMA', passwordSet: true });
    const bad = await a.request('POST', '/v1/channels', { type: 'sms', name: 'x', address: number(), provider: provider({ password: 'far too long', port: 0 }) });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.json.error.details)).toContain('password');
    expect(JSON.stringify(bad.json.error.details)).toContain('port');
    const defaults = await a.request('POST', '/v1/channels', { type: 'sms', name: 'x', address: number(), provider: { kind: 'smpp', host: 'smsc.example.com', systemId: 's', password: 'p' } });
    expect(defaults.status, defaults.body).toBe(201);
    created.push(defaults.json.data.id);
    expect(defaults.json.data.provider).toMatchObject({ port: 2775, tls: true });
  });

  it('POST /channels/{id}/test binds and unbinds, and names a refused bind', async () => {
    const channel = await addChannel();
    const before = smsc.binds.accepted;
    const ok = await a.request('POST', `/v1/channels/${channel.id}/test`);
    expect(ok.json.data, ok.body).toMatchObject({ ok: true, outbound: { ok: true, steps: [{ step: 'connect', ok: true }, { step: 'bind', ok: true }] } });
    expect(smsc.binds.accepted).toBe(before + 1);
    await smsc.until(() => smsc.bound().length === 0, 2000, 'the unbind');
    await a.request('PATCH', `/v1/channels/${channel.id}`, { provider: provider({ password: 'wrong' }) });
    const refused = await a.request('POST', `/v1/channels/${channel.id}/test`);
    expect(refused.json.data).toMatchObject({ ok: false, outbound: { ok: false } });
    expect(refused.json.data.outbound.error).toMatch(/bind: The SMSC refused the bind: ESME_RINVPASWD/);
  });

  it('reaches an SMSC on a private address only with CHANNELS_ALLOW_PRIVATE', async () => {
    const steps = await smppProvider({ host: '127.0.0.1', port: smsc.port, tls: false, systemId: 'esme1', password: 'secret1', systemType: null }, undefined).check({ allowPrivate: false, timeoutMs: 2000 });
    expect(steps[0]).toMatchObject({ step: 'connect', ok: false });
    expect(steps[0]!.detail).toMatch(/CHANNELS_ALLOW_PRIVATE/);
  });

  it('speaks TLS when tls is true: an SMSC certificate nobody vouches for is refused', async () => {
    const tlsSmsc = await startSmsc({ esme1: 'secret1' }, selfSignedCertificate());
    try {
      const steps = await smppProvider({ host: '127.0.0.1', port: tlsSmsc.port, tls: true, systemId: 'esme1', password: 'secret1', systemType: null }, undefined).check({ allowPrivate: true, timeoutMs: 3000 });
      expect(steps[0]).toMatchObject({ step: 'connect', ok: false });
      expect(steps[0]!.detail).toMatch(/certificate/i);
      expect(tlsSmsc.binds.accepted + tlsSmsc.binds.refused).toBe(0);
    } finally {
      await tlsSmsc.close();
    }
  });

  it('matches receipt ids given in hex in one place and in decimal in the other', () => {
    expect(messageIdForms('5a0f3')).toEqual(expect.arrayContaining(['5a0f3', '5A0F3', '368883']));
    expect(messageIdForms('0000368883')).toEqual(expect.arrayContaining(['368883', '5a0f3']));
  });
});

describe('SMPP sending and receipts', () => {
  it('submits a queued text over the bind: the message_id becomes providerMessageId, receipts move it forward only', async () => {
    const channel = await addChannel();
    await bound(channel);
    const to = number();
    // Hex ids from the SMSC, a receipt in the text form naming it in decimal.
    const first = await send(channel, to, 'Your code is 1234');
    await drain();
    expect(smsc.submits.at(-1)!.text).toBe('Your code is 1234');
    expect(smsc.submits.at(-1)!.pdu).toMatchObject({ destination_addr: to.slice(1), dest_addr_ton: 1, registered_delivery: 1, data_coding: 0 });
    const id1 = smsc.submits.at(-1)!.messageId;
    expect(await get(first.id)).toMatchObject({ status: 'sent', providerMessageId: id1, providerName: 'smpp' });
    expect(await smsc.deliver(mo(to, channel.address, { esm_class: 0x04, short_message: receiptText(BigInt(`0x${id1}`).toString(10).padStart(10, '0'), 'DELIVRD') }))).toBe(0);
    expect(await get(first.id)).toMatchObject({ status: 'delivered' });
    expect((await eventsOf('message.delivered', first.id)).length).toBe(1);
    // A late ENROUTE after DELIVRD changes nothing.
    expect(await smsc.deliver(mo(to, channel.address, { esm_class: 0x04, short_message: receiptText(id1, 'ENROUTE') }))).toBe(0);
    expect(await get(first.id)).toMatchObject({ status: 'delivered' });

    // Decimal ids from the SMSC, a receipt in the TLV form naming it in hex.
    smsc.idFormat = 'decimal';
    const second = await send(channel, to, 'Second');
    await drain();
    const id2 = smsc.submits.at(-1)!.messageId;
    expect(await get(second.id)).toMatchObject({ status: 'sent', providerMessageId: id2 });
    expect(await smsc.deliver(mo(to, channel.address, { esm_class: 0x04, short_message: '', receipted_message_id: BigInt(id2).toString(16).toUpperCase(), message_state: 5 }))).toBe(0);
    expect(await get(second.id)).toMatchObject({ status: 'failed', statusReason: expect.stringContaining('UNDELIV') });
    expect((await eventsOf('message.failed', second.id)).length).toBe(1);
    // A receipt for an id nobody knows is answered and changes nothing.
    expect(await smsc.deliver(mo(to, channel.address, { esm_class: 0x04, short_message: receiptText('ffff0000', 'DELIVRD') }))).toBe(0);
  });

  it('fails a refused submit with the SMSC status, retries a throttled one with backoff', async () => {
    const channel = await addChannel();
    await bound(channel);
    smsc.refuseNext.push(smpp.ESME_RINVDSTADR);
    const refused = await send(channel, number(), 'Nope');
    await drain();
    expect(await get(refused.id)).toMatchObject({ status: 'failed', statusReason: expect.stringContaining('ESME_RINVDSTADR') });

    smsc.refuseNext.push(smpp.ESME_RTHROTTLED);
    const throttled = await send(channel, number(), 'Later');
    const submits = smsc.submits.length;
    await drain();
    const [row] = await t.database.db.select().from(smsOutbox).where(eq(smsOutbox.messageId, throttled.id));
    expect(row).toMatchObject({ status: 'pending', attempt: 1, lastError: expect.stringContaining('ESME_RTHROTTLED') });
    expect(row!.nextAttemptAt.getTime()).toBeGreaterThan(Date.now() + 5000);
    expect((await get(throttled.id)).status).toBe('queued');
    offsetMs = 20 * 60_000;
    await drain();
    expect(smsc.submits.length).toBe(submits + 1);
    expect(await get(throttled.id)).toMatchObject({ status: 'sent' });
  });

  it('splits a long text into UDH parts (GSM-7 data_coding 0, UCS-2 data_coding 8)', async () => {
    const channel = await addChannel();
    await bound(channel);
    const gsm = `${'Hello from the long text. '.repeat(8)}€ end`;
    const before = smsc.submits.length;
    const m = await send(channel, number(), gsm);
    await drain();
    const parts = smsc.submits.slice(before);
    expect(parts.length).toBe(2);
    expect(parts.map((p) => p.pdu.data_coding)).toEqual([0, 0]);
    expect(parts.map((p) => [p.udh![0], p.udh![3], p.udh![4]])).toEqual([
      [0, 2, 1],
      [0, 2, 2],
    ]);
    expect(parts[0]!.udh![2]).toBe(parts[1]!.udh![2]);
    expect(parts.map((p) => p.text).join('')).toBe(gsm);
    expect(await get(m.id)).toMatchObject({ status: 'sent', providerMessageId: parts[0]!.messageId, metadata: { sms: { encoding: 'GSM-7', segments: 2 } } });

    const ucs = 'Grüße aus Łódź 🙂 '.repeat(8);
    const at = smsc.submits.length;
    await send(channel, number(), ucs);
    await drain();
    const uparts = smsc.submits.slice(at);
    expect(uparts.length).toBe(3);
    expect(uparts.map((p) => p.pdu.data_coding)).toEqual([8, 8, 8]);
    expect(uparts.map((p) => p.text).join('')).toBe(ucs);
  });
});

describe('SMPP long texts that fail midway', () => {
  it('sends a throttled later part again after a short wait; a later part refused fails the text, naming the part', async () => {
    const channel = await addChannel();
    await bound(channel);
    const long = 'Part of a long text. '.repeat(10);
    smsc.refuseNext.push(0, smpp.ESME_RTHROTTLED);
    const before = smsc.submits.length;
    const ok = await send(channel, number(), long);
    await drain();
    expect(smsc.submits.slice(before).map((p) => p.text).join('')).toBe(long);
    expect(await get(ok.id)).toMatchObject({ status: 'sent' });

    smsc.refuseNext.push(0, smpp.ESME_RINVDSTADR);
    const bad = await send(channel, number(), long);
    await drain();
    expect(await get(bad.id)).toMatchObject({ status: 'failed', statusReason: expect.stringMatching(/ESME_RINVDSTADR.*part 2 of 2/) });
    // Never sent again: part 1 left.
    offsetMs = 60 * 60_000;
    const after = smsc.submits.length;
    await drain();
    expect(smsc.submits.length).toBe(after);
  });
});

describe('SMPP receiving', () => {
  it('writes a delivered text before answering its deliver_sm', async () => {
    const channel = await addChannel();
    await bound(channel);
    const from = number();
    expect(await smsc.deliver(mo(from, channel.address, { short_message: 'Hello over SMPP' }))).toBe(0);
    // Answered: committed already.
    const got = await received(channel);
    expect(got).toHaveLength(1);
    expect(got[0]).toMatchObject({ type: 'sms', text: 'Hello over SMPP', sender: { phoneNumber: from }, recipient: { phoneNumber: channel.address }, providerName: 'smpp', status: 'received' });
    expect((await eventsOf('message.received', got[0]!.id)).length).toBe(1);
    // The channel as it is now: a help text set after the bind answers HELP.
    await a.request('PATCH', `/v1/channels/${channel.id}`, { helpText: 'Acme over SMPP. Reply STOP to stop.' });
    expect(await smsc.deliver(mo(from, channel.address, { short_message: 'HELP' }))).toBe(0);
    await drain();
    expect(smsc.submits.at(-1)).toMatchObject({ text: 'Acme over SMPP. Reply STOP to stop.', pdu: { destination_addr: from.slice(1) } });
  });

  it('reads what the SMSC delivers right behind its answer to the bind', async () => {
    const channel = await addChannel();
    const from = number();
    const answers: number[] = [];
    smsc.afterBind = () => {
      smsc.afterBind = undefined;
      const session = smsc.bound()[0]!;
      for (const text of ['Held for you 1', 'Held for you 2']) session.deliver_sm(mo(from, channel.address, { short_message: text }), (resp) => answers.push(resp.command_status));
    };
    await bound(channel);
    await smsc.until(() => answers.length === 2, 5000, 'both answered');
    expect(answers).toEqual([0, 0]);
    expect((await received(channel)).map((m) => m.text).sort()).toEqual(['Held for you 1', 'Held for you 2']);
  });

  it('stores the parts of long texts as they arrive and joins them (8-bit and 16-bit references, any order)', async () => {
    const channel = await addChannel();
    await bound(channel);
    const from = number();
    const udh8 = (ref: number, total: number, seq: number) => Buffer.from([0x05, 0x00, 0x03, ref, total, seq]);
    expect(await smsc.deliver(mo(from, channel.address, { short_message: { udh: udh8(7, 3, 2), message: 'second, ' } }))).toBe(0);
    expect(await t.database.db.select().from(smsParts).where(eq(smsParts.channelId, channel.id))).toHaveLength(1);
    expect(await received(channel)).toHaveLength(0);
    expect(await smsc.deliver(mo(from, channel.address, { short_message: { udh: udh8(7, 3, 1), message: 'First, ' } }))).toBe(0);
    expect(await smsc.deliver(mo(from, channel.address, { short_message: { udh: udh8(7, 3, 3), message: 'third.' } }))).toBe(0);
    let got = await received(channel);
    expect(got.map((m) => m.text)).toEqual(['First, second, third.']);
    expect(await t.database.db.select().from(smsParts).where(eq(smsParts.channelId, channel.id))).toHaveLength(0);

    const udh16 = (ref: number, total: number, seq: number) => Buffer.from([0x06, 0x08, 0x04, ref >> 8, ref & 0xff, total, seq]);
    expect(await smsc.deliver(mo(from, channel.address, { data_coding: 8, short_message: { udh: udh16(0x1234, 2, 1), message: 'Łódź ' } }))).toBe(0);
    expect(await smsc.deliver(mo(from, channel.address, { data_coding: 8, short_message: { udh: udh16(0x1234, 2, 2), message: 'wita 🙂' } }))).toBe(0);
    got = await received(channel);
    expect(got.map((m) => m.text).sort()).toEqual(['First, second, third.', 'Łódź wita 🙂']);
  });

  it('binds again after a dropped connection: a part before and a part after the drop are joined, sending goes on', async () => {
    const channel = await addChannel();
    await bound(channel);
    const from = number();
    const udh8 = (seq: number) => Buffer.from([0x05, 0x00, 0x03, 42, 2, seq]);
    expect(await smsc.deliver(mo(from, channel.address, { short_message: { udh: udh8(1), message: 'Before the drop, ' } }))).toBe(0);
    const accepted = smsc.binds.accepted;
    smsc.drop();
    await smsc.until(() => smsc.binds.accepted > accepted && smsc.bound().length === 1, 10_000, 'the bind again');
    expect(await smsc.deliver(mo(from, channel.address, { short_message: { udh: udh8(2), message: 'after it.' } }))).toBe(0);
    expect((await received(channel)).map((m) => m.text)).toEqual(['Before the drop, after it.']);
    await until(async () => boundSmppChannels().includes(channel.id), 'the bind registered');
    await send(channel, number(), 'Still sending');
    await drain();
    expect(smsc.submits.at(-1)!.text).toBe('Still sending');
  });

  it('drops and binds again a connection whose SMSC stops answering enquire_link', async () => {
    const channel = await addChannel();
    const w = binds(undefined, { enquireLinkMs: 150, timeoutMs: 300 });
    w.start();
    await smsc.until(() => smsc.bound().length === 1, 10_000, 'the bind');
    const accepted = smsc.binds.accepted;
    await new Promise((r) => setTimeout(r, 600));
    expect(smsc.binds.accepted).toBe(accepted);
    smsc.answerEnquireLink = false;
    await smsc.until(() => smsc.binds.accepted > accepted, 5000, 'a new bind');
    smsc.answerEnquireLink = true;
    expect(w.held()).toContain(channel.id);
  });

  it('stops at once when stopped while a new bind is being recorded, and unbinds', async () => {
    await addChannel();
    // Stopped at moments around the bind's answer: before, while and after the bind is recorded.
    for (const delayMs of [0, 1, 2, 3, 4, 6, 8, 12, 16, 25]) {
      const w = binds();
      let stopping: Promise<void> | undefined;
      smsc.afterBind = () => void setTimeout(() => (stopping ??= w.stop()), delayMs);
      w.start();
      await smsc.until(() => stopping !== undefined, 10_000, 'the bind');
      const stopped = await Promise.race([stopping!.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 3000))]);
      expect(stopped, `stopped ${delayMs} ms after the bind`).toBe(true);
      await smsc.until(() => smsc.bound().length === 0, 3000, 'the unbind');
    }
  });

  it('puts the channel in error with a clear lastError when the bind is refused; the right password brings it back', async () => {
    const channel = await addChannel({ provider: provider({ password: 'wrong' }) });
    const w = binds();
    w.start();
    await until(async () => (await a.request('GET', `/v1/channels/${channel.id}`)).json.data.status === 'error', 'the channel in error');
    const got = (await a.request('GET', `/v1/channels/${channel.id}`)).json.data;
    expect(got.lastError).toMatch(/^provider: SMPP: The SMSC refused the bind: ESME_RINVPASWD.*check provider\.systemId, provider\.password/);
    expect(smsc.bound()).toHaveLength(0);
    // Texts to it wait in the queue: no other process sends them.
    const m = await send(channel, number(), 'Waiting');
    await drain();
    expect((await get(m.id)).status).toBe('queued');
    // The right password: bound again (after the backoff), the channel active, the waiting text sent.
    await a.request('PATCH', `/v1/channels/${channel.id}`, { provider: provider() });
    await smsc.until(() => smsc.bound().length === 1, 10_000, 'the bind with the right password');
    await until(async () => (await a.request('GET', `/v1/channels/${channel.id}`)).json.data.status === 'active', 'the channel active');
    expect((await a.request('GET', `/v1/channels/${channel.id}`)).json.data.lastError).toBeNull();
    await until(async () => boundSmppChannels().includes(channel.id), 'the bind registered');
    await drain();
    expect(await get(m.id)).toMatchObject({ status: 'sent' });
  });

  it('binds each channel in one process only (a lease); the other takes over when it stops', async () => {
    const channel = await addChannel();
    const one = binds('process-one');
    const two = binds('process-two');
    await Promise.all([one.runOnce(), two.runOnce()]);
    await smsc.until(() => smsc.bound().length === 1, 10_000, 'one bind');
    expect([...one.held(), ...two.held()].filter((id) => id === channel.id)).toHaveLength(1);
    await new Promise((r) => setTimeout(r, 300));
    expect(smsc.bound()).toHaveLength(1);
    const holder = one.held().includes(channel.id) ? one : two;
    const other = holder === one ? two : one;
    await holder.stop();
    await smsc.until(() => smsc.bound().length === 0, 5000, 'the unbind');
    await other.runOnce();
    await smsc.until(() => smsc.bound().length === 1, 10_000, 'the other bind');
    expect(other.held()).toContain(channel.id);
    const [state] = await t.database.db.select().from(channelSyncStates).where(eq(channelSyncStates.channelId, channel.id));
    expect(state?.leaseOwner).toBe(holder === one ? 'process-two' : 'process-one');
  });

  it('answers a deliver_sm whose write fails with a temporary error; delivered again, it is stored', async () => {
    const channel = await addChannel();
    await bound(channel);
    const from = number();
    const part = { short_message: { udh: Buffer.from([0x05, 0x00, 0x03, 9, 2, 1]), message: 'Kept ' } };
    await t.database.db.execute(sql.raw('ALTER TABLE sms_parts RENAME TO sms_parts_away'));
    try {
      expect(await smsc.deliver(mo(from, channel.address, part))).toBe(0x64); // ESME_RX_T_APPN
    } finally {
      await t.database.db.execute(sql.raw('ALTER TABLE sms_parts_away RENAME TO sms_parts'));
    }
    expect(await smsc.deliver(mo(from, channel.address, part))).toBe(0);
    expect(await smsc.deliver(mo(from, channel.address, { short_message: { udh: Buffer.from([0x05, 0x00, 0x03, 9, 2, 2]), message: 'safe.' } }))).toBe(0);
    expect((await received(channel)).map((m) => m.text)).toEqual(['Kept safe.']);
  });

  it('a receipt right after the submit_sm_resp (before the send is recorded) still finds its message', async () => {
    const channel = await addChannel();
    await bound(channel);
    // As SMSCs do, a receipt answered with an error is delivered again.
    const answers: number[] = [];
    const deliver = (s: { messageId: string }, session: smpp.Session) =>
      void session.deliver_sm({ ...mo('+14155550100', channel.address, {}), esm_class: 0x04, short_message: receiptText(s.messageId, 'DELIVRD') }, (resp) => {
        answers.push(resp.command_status);
        if (resp.command_status !== 0 && answers.length < 5) setTimeout(() => deliver(s, session), 100);
      });
    smsc.afterSubmit = deliver;
    const m = await send(channel, number(), 'Quick one');
    await drain();
    await until(async () => (await get(m.id)).status === 'delivered', 'the receipt');
    expect(await get(m.id)).toMatchObject({ status: 'delivered', providerMessageId: smsc.submits.at(-1)!.messageId });
    await smsc.until(() => answers.at(-1) === 0, 5000, 'the receipt answered');
  });

  it('a receipt the SMSC sends before its submit_sm_resp, in a read of its own, is held and applied when the answer comes', async () => {
    const channel = await addChannel();
    await bound(channel);
    const answers: number[] = [];
    smsc.beforeSubmitAnswer = async (s, session) => {
      session.deliver_sm({ ...mo('+14155550100', channel.address, {}), esm_class: 0x04, short_message: receiptText(s.messageId, 'DELIVRD') }, (resp) => answers.push(resp.command_status));
      // Long enough for the service to read the receipt alone and look its id up before the answer leaves.
      await new Promise((r) => setTimeout(r, 300));
    };
    const m = await send(channel, number(), 'Receipt first');
    await drain();
    await until(async () => (await get(m.id)).status === 'delivered', 'the held receipt applied');
    expect(await get(m.id)).toMatchObject({ status: 'delivered', providerMessageId: smsc.submits.at(-1)!.messageId });
    expect(await eventsOf('message.delivered', m.id)).toHaveLength(1);
    await smsc.until(() => answers.length === 1, 5000, 'the receipt answered');
    expect(answers).toEqual([0]);
  });

  it('unbinds a disabled channel; deletes the parts of a long text that never completed after 30 minutes', async () => {
    const channel = await addChannel();
    const w = await bound(channel);
    const from = number();
    expect(await smsc.deliver(mo(from, channel.address, { short_message: { udh: Buffer.from([0x05, 0x00, 0x03, 77, 3, 1]), message: 'Lonely part' } }))).toBe(0);
    await t.database.db.update(smsParts).set({ receivedAt: new Date(Date.now() - 31 * 60 * 1000) }).where(eq(smsParts.channelId, channel.id));
    await a.request('PATCH', `/v1/channels/${channel.id}`, { status: 'disabled' });
    await w.runOnce();
    await smsc.until(() => smsc.bound().length === 0, 5000, 'the unbind');
    expect(w.held()).not.toContain(channel.id);
    expect(boundSmppChannels()).not.toContain(channel.id);
    expect(await t.database.db.select().from(smsParts).where(eq(smsParts.channelId, channel.id))).toHaveLength(0);
  });
});

describe('SMPP from a hostile or careless SMSC', () => {
  /** A deliver_sm as bytes, its last TLV (message_state, one byte) cut off: the package cannot decode it. */
  function undecodable(from: string, to: string) {
    const whole = new smpp.PDU('deliver_sm', { ...mo(from, to, { short_message: 'cut short' }), sequence_number: 424242 }).toBuffer();
    const bytes = Buffer.concat([whole, Buffer.from([0x04, 0x27, 0x00, 0x00])]);
    bytes.writeUInt32BE(bytes.length, 0);
    return bytes;
  }

  it('binds again at once after a PDU it cannot read (undecodable, or longer than SMPP allows), not at the next enquire_link', async () => {
    const channel = await addChannel();
    await bound(channel);
    const from = number();
    const oversized = Buffer.alloc(16);
    oversized.writeUInt32BE(1024 * 1024, 0); // a command_length of 1 MB
    oversized.writeUInt32BE(0x00000005, 4); // deliver_sm
    for (const bad of [undecodable(from, channel.address), oversized]) {
      const accepted = smsc.binds.accepted;
      smsc.bound()[0]!.socket.write(bad);
      await smsc.until(() => smsc.binds.accepted > accepted && smsc.bound().length === 1, 2000, 'the bind again within 2 s');
      await until(async () => boundSmppChannels().includes(channel.id), 'the bind registered', 2000);
    }
    expect(await smsc.deliver(mo(from, channel.address, { short_message: 'After the bad PDUs' }), 2000)).toBe(0);
    expect((await received(channel)).map((m) => m.text)).toEqual(['After the bad PDUs']);
    await send(channel, number(), 'Still sending');
    await drain();
    expect(smsc.submits.at(-1)!.text).toBe('Still sending');
  });

  it('reads a 20 KB message_payload (SMPP allows 64 KB) and stores the whole text', async () => {
    const channel = await addChannel();
    await bound(channel);
    const from = number();
    const big = Array.from({ length: 2000 }, (_, i) => `word${String(i).padStart(5, '0')} `).join('');
    expect(big.length).toBe(20_000);
    expect(await smsc.deliver(mo(from, channel.address, { short_message: '', message_payload: big }), 5000)).toBe(0);
    const got = await received(channel);
    expect(got).toHaveLength(1);
    expect(got[0]!.text).toBe(big);
    expect(got[0]!.metadata.sms).toMatchObject({ encoding: 'GSM-7' });
  });

  it('stores texts and parts of long texts that carry NUL characters (which the database cannot hold) without them, answered OK, not redelivered for ever', async () => {
    const channel = await addChannel();
    await bound(channel);
    const from = number();
    // UCS-2 (data_coding 8) and Latin-1 (data_coding 3) can carry U+0000; PostgreSQL's text cannot.
    const udh = (seq: number) => Buffer.from([0x05, 0x00, 0x03, 51, 2, seq]);
    expect(await smsc.deliver(mo(from, channel.address, { data_coding: 8, short_message: { udh: udh(1), message: 'Null\u0000 in ' } }))).toBe(0);
    expect(await smsc.deliver(mo(from, channel.address, { data_coding: 3, short_message: { udh: udh(2), message: Buffer.from('a part\u0000.', 'latin1') } }))).toBe(0);
    expect(await smsc.deliver(mo(from, channel.address, { data_coding: 8, short_message: 'One\u0000 part' }))).toBe(0);
    expect(await smsc.deliver(mo(from, channel.address, { short_message: '', message_payload: Buffer.from('\u0000Payload\u0000', 'latin1'), data_coding: 3 }))).toBe(0);
    expect((await received(channel)).map((m) => m.text).sort()).toEqual(['Null in a part.', 'One part', 'Payload']);
    expect(await t.database.db.select().from(smsParts).where(eq(smsParts.channelId, channel.id))).toHaveLength(0);
  });

  it('keeps at most PART_LIMITS of texts that never complete: 20,000 dangling parts from one bind do not pile up, the newest are kept', async () => {
    const channel = await addChannel();
    await bound(channel);
    // Sender, reference and count of parts are free: each part opens a text of its own.
    const dangling = Array.from({ length: 20_000 }, (_, i) => ({
      ...mo(`+1415${String(5_000_000 + i).padStart(7, '0')}`, channel.address, {}),
      short_message: { udh: Buffer.from([0x05, 0x00, 0x03, i % 256, 2 + (i % 200), 1]), message: `part ${i} `.repeat(10) },
    }));
    // Past the channel's rate (SMPP_DELIVER_RATE_LIMIT, 6,000 a minute) they are answered ESME_RTHROTTLED; the
    // others are stored, each answered once stored.
    const statuses = await smsc.flood(dangling, 240_000);
    const stored = statuses.flatMap((s, i) => (s === 0 ? [i] : []));
    expect(stored.length + statuses.filter((s) => s === smpp.ESME_RTHROTTLED).length).toBe(dangling.length);
    expect(stored.length).toBeGreaterThan(PART_LIMITS.parts * 5);
    const rows = await t.database.db.select().from(smsParts).where(eq(smsParts.channelId, channel.id));
    expect(rows.length).toBeLessThanOrEqual(PART_LIMITS.parts);
    expect(new Set(rows.map((r) => `${r.sender}:${r.ref}:${r.total}`)).size).toBeLessThanOrEqual(PART_LIMITS.texts);
    // The newest are the ones kept.
    expect(rows.some((r) => r.text.startsWith(`part ${stored.at(-1)} `))).toBe(true);
  }, 300_000);
});

describe('SMPP end to end', () => {
  it('an automation answers a text that came over the bind; the receipt turns the answer delivered', async () => {
    const engine = createAutomationEngine({ db: t.database.db, evaluator: builtinEvaluator, clock, log: silent });
    const channel = await addChannel();
    await bound(channel);
    const customer = number();
    const auto = await a.request('POST', '/v1/automations', { name: 'answer', instructions: `When a text arrives from ${customer}, reply 'Thanks, we will call you back'`, status: 'active' });
    expect(auto.status, auto.body).toBe(201);
    await engine.runOnce();
    // The SMSC sends each text's receipt right after accepting it, naming it in decimal (its answer: hex).
    smsc.afterSubmit = (s, session) => void session.deliver_sm({ ...mo(customer, channel.address, {}), esm_class: 0x04, short_message: receiptText(BigInt(`0x${s.messageId}`).toString(10), 'DELIVRD') });
    expect(await smsc.deliver(mo(customer, channel.address, { short_message: 'Are you open today?' }))).toBe(0);
    await engine.runOnce();
    await engine.runOnce();
    await drain();
    expect(smsc.submits.at(-1)).toMatchObject({ text: 'Thanks, we will call you back', pdu: { destination_addr: customer.slice(1) } });
    const list = (await a.request('GET', '/v1/messages?limit=100')).json.data as Json[];
    const answer = list.find((m) => m.channelId === channel.id && m.direction === 'outgoing')!;
    await until(async () => (await get(answer.id)).status === 'delivered', 'the receipt');
    const thread = (await a.request('GET', `/v1/messages?threadId=${answer.threadId}`)).json.data as Json[];
    expect(thread.map((m) => m.text).sort()).toEqual(['Are you open today?', 'Thanks, we will call you back']);
  });
});
