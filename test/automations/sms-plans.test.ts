import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtinEvaluator } from '../../src/workers/evaluator/deterministic.js';
import { createAutomationEngine, type AutomationEngine } from '../../src/workers/automation-engine.js';
import { createSmsSender } from '../../src/workers/sms-sender.js';
import { ok, useTestApp } from '../helpers/app.js';
import { postWebhook, startFakeTwilio, type FakeTwilio } from '../helpers/twilio.js';
import type { Tenant } from '../helpers/app.js';
import { AccountBrowser } from '../helpers/approval-page.js';

/**
 * Text steps of the built-in vocabulary, run by the engine and sent by the SMS sender to a local server
 * playing Twilio: "when a text arrives from …, reply …" and "text +1… '…'" after a transaction; and the
 * rules of automatic messages for texts (once a day per automation and number, the hourly rate), with the
 * texts of two organizations carried from one's channel to the other's as the phone network would.
 */

const silent = { error: () => {}, warn: () => {} };
const clock = () => new Date();
const { t, a } = useTestApp({ credits: 1000, app: { env: { SECRETS_KEY: randomBytes(32).toString('base64'), CHANNELS_ALLOW_PRIVATE: 'true' } } });
let twilio: FakeTwilio;
let engine: AutomationEngine;
let sender: ReturnType<typeof createSmsSender>;

beforeAll(async () => {
  twilio = await startFakeTwilio();
  engine = createAutomationEngine({ db: t.database.db, evaluator: builtinEvaluator, clock, log: silent });
  sender = createSmsSender({ db: t.database.db, clock, log: silent, allowPrivate: true, sendTimeoutMs: 5000, sleep: async () => {} });
});
afterAll(async () => {
  await sender?.stop();
  await twilio?.close();
});

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const OURS = '+12122003001';
const CUSTOMER = '+12122003002';
const OWNER = '+12122003003';
let sids = 0;

async function text(channelId: string, from: string, body: string, to = OURS) {
  const res = await postWebhook(t.app, `/hooks/sms/${channelId}`, { MessageSid: `SMauto${++sids}`, From: from, To: to, Body: body }, twilio.authToken);
  expect(res.status).toBe(200);
}

async function settle() {
  await engine.runOnce();
  await engine.runOnce();
  await sender.runOnce();
  await sender.idle();
}

describe('text steps of the built-in vocabulary', () => {
  it('answers a text from a number once a day, never a STOP; texts the owner when a big payment is recorded', async () => {
    const channel = await ok(
      await a.request('POST', '/v1/channels', { type: 'sms', name: 'Shop', address: OURS, provider: { kind: 'twilio', accountSid: twilio.accountSid, authToken: twilio.authToken, apiBaseUrl: twilio.url } }),
      201,
    );
    const reply = await ok(await a.request('POST', '/v1/automations', { name: 'answer', instructions: `When a text arrives from ${CUSTOMER}, reply 'Thanks, we will call you back'`, status: 'active' }), 201);
    const big = await ok(await a.request('POST', '/v1/automations', { name: 'big', instructions: `When a transaction over 1000 EUR is recorded, text ${OWNER} 'Big payment'`, status: 'active' }), 201);
    await engine.runOnce();

    await text(channel.id, CUSTOMER, 'Are you open today?');
    await settle();
    const toCustomer = () => twilio.sent.filter((s) => s.form.get('To') === CUSTOMER).map((s) => s.form.get('Body'));
    expect(toCustomer()).toEqual(['Thanks, we will call you back']);

    // Once a day per number; a STOP is never answered (and records the opt-out).
    await text(channel.id, CUSTOMER, 'Hello again');
    await text(channel.id, CUSTOMER, 'STOP');
    await settle();
    expect(toCustomer()).toHaveLength(1);
    const runs = (await ok(await a.request('GET', `/v1/automations/${reply.id}/executions?limit=10`))) as unknown as Json[];
    expect(runs.map((r) => r.status).sort()).toEqual(['skipped', 'skipped', 'succeeded']);

    const customer = await ok(await a.request('POST', '/v1/customers', { name: 'Big buyer' }), 201);
    await ok(await a.request('POST', `/v1/customers/${customer.id}/transactions`, { amount: '1500.00', currency: 'EUR', status: 'completed', type: 'payment' }), 201);
    await ok(await a.request('POST', `/v1/customers/${customer.id}/transactions`, { amount: '15.00', currency: 'EUR', status: 'completed', type: 'payment' }), 201);
    await settle();
    expect(twilio.sent.filter((s) => s.form.get('To') === OWNER).map((s) => s.form.get('Body'))).toEqual(['Big payment']);
    expect((await ok(await a.request('GET', `/v1/automations/${big.id}/executions`)))[0]).toMatchObject({ status: 'succeeded' });
  });

  it("never answers a short code, an alphanumeric sender or one of the organization's own numbers", async () => {
    const provider = { kind: 'twilio', accountSid: twilio.accountSid, authToken: twilio.authToken, apiBaseUrl: twilio.url };
    const line = await ok(await a.request('POST', '/v1/channels', { type: 'sms', name: 'Line', address: '+12122003011', provider }), 201);
    const other = await ok(await a.request('POST', '/v1/channels', { type: 'sms', name: 'Other line', address: '+12122003012', provider }), 201);
    const answer = await ok(await a.request('POST', '/v1/automations', { name: 'answer all', instructions: "When a text arrives, reply 'We got your text'", status: 'active' }), 201);
    await engine.runOnce();
    expect((await ok(await a.request('GET', `/v1/automations/${answer.id}`))).status).toBe('active');

    const before = twilio.sent.length;
    await text(line.id, '12345', 'Your code is 1234', line.address);
    await text(line.id, 'ACMEBANK', 'Balance alert', line.address);
    await text(line.id, other.address, 'From our other line', line.address);
    await settle();
    expect(twilio.sent.slice(before).map((s) => s.form.get('To'))).toEqual([]);
    const runs = (await ok(await a.request('GET', `/v1/automations/${answer.id}/executions?limit=10`))) as unknown as Json[];
    // Skipped with the reason, never failed: a flood of short-code texts must not fail the automation.
    expect(runs.map((r) => r.status)).toEqual(['skipped', 'skipped', 'skipped']);
    expect(runs.map((r) => r.error).sort()).toEqual([
      expect.stringMatching(/\+12122003012 is one of the organization's own numbers/),
      expect.stringMatching(/12345 is a short code/),
      expect.stringMatching(/ACMEBANK is an alphanumeric sender/),
    ]);
    expect((await ok(await a.request('GET', `/v1/automations/${answer.id}`))).status).toBe('active');

    // A customer's number is answered, from the line it texted.
    await text(line.id, '+12122003013', 'Hello', line.address);
    await settle();
    expect(twilio.sent.slice(before).map((s) => [s.form.get('From'), s.form.get('To'), s.form.get('Body')])).toEqual([['+12122003011', '+12122003013', 'We got your text']]);
  });
});

describe('automatic texts follow the rules of automatic messages', () => {
  const provider = () => ({ kind: 'twilio', accountSid: twilio.accountSid, authToken: twilio.authToken, apiBaseUrl: twilio.url });
  const line = async (tenant: Tenant, address: string) => ok(await tenant.request('POST', '/v1/channels', { type: 'sms', name: 'Line', address, provider: provider() }), 201);
  const active = async (tenant: Tenant, instructions: string) => {
    const created = await ok(await tenant.request('POST', '/v1/automations', { name: instructions.slice(0, 60), instructions, status: 'active' }), 201);
    return created.id as string;
  };
  const runsOf = async (tenant: Tenant, id: string) => ((await ok(await tenant.request('GET', `/v1/automations/${id}/executions?limit=100&sortOrder=asc`))) as unknown as Json[]);

  it('two organizations that text each other whenever a text arrives stop after one text each', async () => {
    const [c, d] = [await t.tenant({ credits: 10 }), await t.tenant({ credits: 10 })];
    const [numC, numD] = ['+12122004001', '+12122004002'];
    const lines = new Map([[numC, await line(c, numC)], [numD, await line(d, numD)]]);
    const ids = [await active(c, `When a text arrives, text ${numD} 'We got your text'`), await active(d, `When a text arrives, text ${numC} 'Thanks, noted'`)];
    await engine.runOnce();
    expect((await ok(await c.request('GET', `/v1/automations/${ids[0]}`))).status).toBe('active');
    expect((await ok(await d.request('GET', `/v1/automations/${ids[1]}`))).status).toBe('active');

    // The phone network: what the provider accepted for one of the two numbers arrives at its channel.
    let carried = twilio.sent.length;
    const carry = async () => {
      for (const sent of twilio.sent.slice(carried)) {
        const to = lines.get(sent.form.get('To')!);
        if (to) await text(to.id, sent.form.get('From')!, sent.form.get('Body')!, to.address);
      }
      carried = twilio.sent.length;
    };
    const start = twilio.sent.length;
    await text(lines.get(numC)!.id, CUSTOMER, 'Anyone there?', numC);
    for (let round = 0; round < 12; round++) {
      await settle();
      await carry();
    }
    const between = twilio.sent.slice(start).map((s) => [s.form.get('From'), s.form.get('To'), s.form.get('Body')]);
    expect(between).toEqual([
      [numC, numD, 'We got your text'],
      [numD, numC, 'Thanks, noted'],
    ]);
    // The next text C got from D is not answered again today: skipped with the reason, not failed.
    const runs = await runsOf(c, ids[0]!);
    expect(runs.map((r) => r.status)).toEqual(['succeeded', 'skipped']);
    expect(runs[1]!.error).toMatch(/already sent \+12122004002 an automatic message today/);
    expect((await runsOf(d, ids[1]!)).map((r) => r.status)).toEqual(['succeeded']);
    await ok(await c.request('DELETE', `/v1/automations/${ids[0]}`));
    await ok(await d.request('DELETE', `/v1/automations/${ids[1]}`));
  });

  it('every text counts against AUTOMATIC_MESSAGES_PER_HOUR: replies, and each number of a text to several', async () => {
    const limited = createAutomationEngine({ db: t.database.db, evaluator: builtinEvaluator, clock, log: silent, limits: { automaticMessagesPerHour: 2 } });
    const settleLimited = async () => {
      await limited.runOnce();
      await sender.runOnce();
      await sender.idle();
    };
    const c = await t.tenant({ credits: 10 });
    const lineC = await line(c, '+12122004011');
    const reply = await active(c, "When a text arrives, reply 'Thanks, we will call you back'");
    await limited.runOnce();
    for (const from of ['+12122004021', '+12122004022', '+12122004023']) {
      await text(lineC.id, from, 'Call me', lineC.address);
      await settleLimited();
    }
    const runs = await runsOf(c, reply);
    expect(runs.map((r) => r.status)).toEqual(['succeeded', 'succeeded', 'skipped']);
    expect(runs[2]!.error).toMatch(/already sent automatic messages to 2 recipients in the last hour; at most 2 an hour \(AUTOMATIC_MESSAGES_PER_HOUR\)/);
    expect(twilio.sent.filter((s) => s.form.get('From') === lineC.address).map((s) => s.form.get('To'))).toEqual(['+12122004021', '+12122004022']);
    await ok(await c.request('DELETE', `/v1/automations/${reply}`));

    // A text to three numbers is three automatic messages, past a rate of two: none is sent.
    const d = await t.tenant({ credits: 10 });
    const lineD = await line(d, '+12122004012');
    const alert = await active(d, "When a text arrives, text +12122004031, +12122004032 and +12122004033 'New text on the line'");
    await limited.runOnce();
    await text(lineD.id, '+12122004024', 'Hello', lineD.address);
    await settleLimited();
    const [run] = await runsOf(d, alert);
    expect(run).toMatchObject({ status: 'skipped', error: expect.stringMatching(/at most 2 an hour/) });
    expect(twilio.sent.filter((s) => s.form.get('From') === lineD.address)).toEqual([]);
    await ok(await d.request('DELETE', `/v1/automations/${alert}`));
  });
});

describe('a written plan that texts whoever texted', () => {
  it('"when a text arrives, text {{sender.phoneNumber}} …" passes the plan check, reads as a text in its summary, is approved and texts the sender back', async () => {
    const c = await t.tenant({ credits: 10 });
    const lineC = await ok(
      await c.request('POST', '/v1/channels', { type: 'sms', name: 'Front desk', address: '+12122005001', provider: { kind: 'twilio', accountSid: twilio.accountSid, authToken: twilio.authToken, apiBaseUrl: twilio.url } }),
      201,
    );
    const created = await ok(
      await c.request('POST', '/v1/automations', {
        name: 'Text back',
        instructions: 'When a text arrives, text the sender back',
        triggerEvent: 'message.received',
        condition: { field: 'type', operator: 'equals', value: 'sms' },
        actions: [{ operation: 'messages.send', input: { to: ['{{sender.phoneNumber}}'], text: 'Thanks, we got your text' } }],
      }),
      201,
    );
    await engine.runOnce();
    const checked = await ok(await c.request('GET', `/v1/automations/${created.id}`));
    expect(checked.status, checked.statusReason).toBe('pending_approval');
    expect(checked.planSummary).toBe(
      'Runs when a message is received, only if its type is "sms". It sends a text to the sender\'s number through the organization\'s text channel, the channel "Front desk" (+12122005001), with the text "Thanks, we got your text".',
    );
    // The approval page says that it answers whoever wrote, and marks no fixed number.
    const page = await new AccountBrowser(t.app).signIn(`/account/automations/${created.id}`, await c.user());
    expect(page.body).toContain('It answers whoever wrote the message that triggers it');
    expect(page.body).not.toContain('Leaves your organization');
    expect(await ok(await c.request('POST', `/v1/automations/${created.id}/approve`))).toMatchObject({ status: 'active' });

    const before = twilio.sent.length;
    await text(lineC.id, '+12122005002', 'Are you open on Sunday?', lineC.address);
    await settle();
    // A short code is not texted back: the run is skipped with the reason (not a failed step).
    await text(lineC.id, '55555', 'Your code is 1234', lineC.address);
    await settle();
    expect(twilio.sent.slice(before).map((s) => [s.form.get('From'), s.form.get('To'), s.form.get('Body')])).toEqual([['+12122005001', '+12122005002', 'Thanks, we got your text']]);
    const runs = (await ok(await c.request('GET', `/v1/automations/${created.id}/executions?sortOrder=asc`))) as unknown as Json[];
    expect(runs.map((r) => r.status)).toEqual(['succeeded', 'skipped']);
    expect(runs[1]!.error).toMatch(/55555 is a short code/);
    await ok(await c.request('DELETE', `/v1/automations/${created.id}`));
  });

  it('the built-in "text +1…" reads as a text through the organization\'s text channel, never as an email with the subject "undefined"', async () => {
    const c = await t.tenant({ credits: 10 });
    await ok(
      await c.request('POST', '/v1/channels', { type: 'sms', name: 'Alerts', address: '+12122005011', provider: { kind: 'twilio', accountSid: twilio.accountSid, authToken: twilio.authToken, apiBaseUrl: twilio.url } }),
      201,
    );
    const created = await ok(await c.request('POST', '/v1/automations', { name: 'big', instructions: `When a transaction over 1000 EUR is recorded, text ${OWNER} 'Big payment'` }), 201);
    await engine.runOnce();
    const { planSummary } = await ok(await c.request('GET', `/v1/automations/${created.id}`));
    expect(planSummary).toMatch(/It sends a text to "\+12122003003" through the organization's text channel, the channel "Alerts" \(\+12122005011\), with the text "Big payment"\.$/);
    expect(planSummary).not.toMatch(/email|subject|undefined/);
    await ok(await c.request('DELETE', `/v1/automations/${created.id}`));
  });
});
