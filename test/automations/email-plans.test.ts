import { randomBytes } from 'node:crypto';
import { eq, sql } from 'drizzle-orm';
import { simpleParser } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { events, messages } from '../../src/db/schema.js';
import { createMailSender } from '../../src/workers/mail-sender.js';
import { builtinEvaluator } from '../../src/workers/evaluator/deterministic.js';
import { createAutomationEngine, type AutomationEngine } from '../../src/workers/automation-engine.js';
import { ok, useTestApp } from '../helpers/app.js';
import { verifyDomainFor } from '../helpers/domains.js';
import { headerOf, startRelay, type Relay } from '../helpers/smtp-relay.js';

/**
 * Email steps written by the built-in evaluator, run by the engine and sent by the mail sender through a
 * real SMTP server playing the channel's relay: reply to and forward the triggering message, send a new
 * email through its channel.
 */

const silent = { error: () => {}, warn: () => {} };
const clock = () => new Date();
const { t, a } = useTestApp({ credits: 1000, app: { env: { SECRETS_KEY: randomBytes(32).toString('base64'), CHANNELS_ALLOW_PRIVATE: 'true' } } });
let relay: Relay;
let engine: AutomationEngine;
let sender: ReturnType<typeof createMailSender>;

beforeAll(async () => {
  relay = await startRelay();
  engine = createAutomationEngine({ db: t.database.db, evaluator: builtinEvaluator, clock, log: silent });
  sender = createMailSender({ db: t.database.db, clock, log: silent, allowPrivate: true, sendTimeoutMs: 5000, random: () => 0.5 });
});
afterAll(() => relay?.close());

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('email steps of the built-in vocabulary', () => {
  it('replies to, forwards, and writes about an invoice from billing through the channel it came through', async () => {
    await verifyDomainFor(t.database.db, a.orgId, 'acme.example');
    const channel = await ok(
      await a.request('POST', '/v1/channels', {
        type: 'email',
        name: 'Acme Support',
        address: 'support@acme.example',
        inbound: { mode: 'smtp' },
        outbound: { host: '127.0.0.1', port: relay.port, secure: false, username: relay.user, password: relay.pass, tls: 'none' },
      }),
      201,
    );
    const instructions = [
      "When an email from billing@vendor.example arrives, reply 'Thanks, we received your invoice'",
      'When an email from billing@vendor.example arrives, forward it to sales@acme.example',
      'When an email from billing@vendor.example arrives, send an email to boss@acme.example with the subject "Invoice" saying "An invoice from Billing arrived."',
    ];
    const ids: string[] = [];
    for (const text of instructions) {
      const created = await ok(await a.request('POST', '/v1/automations', { name: text.slice(0, 60), instructions: text, status: 'active' }), 201);
      ids.push(created.id);
    }
    await engine.runOnce();
    for (const id of ids) expect(await ok(await a.request('GET', `/v1/automations/${id}`))).toMatchObject({ status: 'active' });

    // An invoice arrives through the channel (recorded as inbound mail would be: the message and its event know the channel).
    const arrives = async (summary: string, text: string) => {
      const message = await ok(
        await a.request('POST', '/v1/messages', { direction: 'incoming', type: 'email', sender: 'billing@vendor.example', recipient: 'support@acme.example', summary, text }),
        201,
      );
      await t.database.db.update(messages).set({ channelId: channel.id }).where(eq(messages.id, message.id));
      await t.database.db
        .update(events)
        .set({ data: sql`jsonb_set(${events.data}::jsonb, '{channelId}', ${JSON.stringify(channel.id)}::jsonb)::json` })
        .where(eq(events.resourceId, message.id));
    };
    await arrives('Invoice 42', 'Please find the invoice.');
    await engine.runOnce();
    await engine.runOnce();
    for (const id of ids) {
      const runs = await ok(await a.request('GET', `/v1/automations/${id}/executions`));
      expect(runs, JSON.stringify(runs)).toMatchObject([{ status: 'succeeded' }]);
    }
    while ((await sender.runOnce()) > 0);
    const mails = await relay.waitFor(3, 10_000);

    const parsed = await Promise.all(mails.map(async (m) => ({ to: m.to, auto: headerOf(m.raw, 'Auto-Submitted'), mail: await simpleParser(m.raw) })));
    const reply = parsed.find((p) => p.to.includes('billing@vendor.example'))!;
    expect(reply.mail.subject).toMatch(/^Re:/);
    expect(reply.mail.text).toContain('Thanks, we received your invoice');
    expect(reply.auto).toBe('auto-replied');
    const forward = parsed.find((p) => p.to.includes('sales@acme.example'))!;
    expect(forward.mail.subject).toMatch(/^Fwd:/);
    expect(forward.mail.text).toContain('Please find the invoice.');
    const note = parsed.find((p) => p.to.includes('boss@acme.example'))!;
    expect(note.mail.subject).toBe('Invoice');
    expect(note.mail.text).toContain('An invoice from Billing arrived.');
    for (const p of parsed) expect(p.mail.from?.value[0]?.address).toBe('support@acme.example');

    // A second invoice the same day: the reply automation answers a sender at most once a day (RFC 3834), so
    // its run is skipped with the reason, and neither counts as a failure nor as one of its executions.
    await arrives('Invoice 43', 'Another invoice.');
    await engine.runOnce();
    await engine.runOnce();
    const [latest] = (await ok(await a.request('GET', `/v1/automations/${ids[0]}/executions`))) as unknown as Json[];
    expect(latest).toMatchObject({ status: 'skipped' });
    expect(latest!.error).toMatch(/at most once a day/);
    expect(await ok(await a.request('GET', `/v1/automations/${ids[0]}`))).toMatchObject({ status: 'active', currentExecutions: 1 });
  });
});
