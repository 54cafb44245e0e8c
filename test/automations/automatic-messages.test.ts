import { generateKeyPairSync, randomBytes } from 'node:crypto';
import nodemailer from 'nodemailer';
import { and, eq, inArray } from 'drizzle-orm';
import SMTPConnection from 'nodemailer/lib/smtp-connection';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../src/db/client.js';
import { automaticMessages, automationExecutions, messages } from '../../src/db/schema.js';
import { AutomaticMessageRefused, claimAutomaticMessages } from '../../src/modules/channels/automatic-messages.js';
import { createAutomationEngine, type AutomationEngine } from '../../src/workers/automation-engine.js';
import { builtinEvaluator } from '../../src/workers/evaluator/deterministic.js';
import { createMailSender } from '../../src/workers/mail-sender.js';
import type { SmtpReceiver } from '../../src/workers/smtp-receiver.js';
import { ok, type Tenant, useTestApp } from '../helpers/app.js';
import { testDbKind } from '../helpers/database.js';
import { verifyDomainFor } from '../helpers/domains.js';
import { startTestReceiver } from '../helpers/smtp-receiver.js';

/**
 * Automatic mail stays silent where it must (RFC 3834, RFC 5321 §4.5.5), for real: mail arrives through the
 * service's SMTP receiver, automations answer it, and the mail sender delivers their mail back into the same
 * receiver (each channel's relay is the receiver), so two organizations' automations can answer each other.
 */

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const silent = { error: () => {}, warn: () => {} };
const clock = () => new Date();
const { t, a, b } = useTestApp({ credits: 1000, app: { env: { SECRETS_KEY: randomBytes(32).toString('base64'), CHANNELS_ALLOW_PRIVATE: 'true', MCP_API_KEYS: 'true' } } });
let receiver: SmtpReceiver;
let port = 0;
let engine: AutomationEngine;
let sender: ReturnType<typeof createMailSender>;

beforeAll(async () => {
  ({ receiver, port } = await startTestReceiver(t.database.db));
  engine = createAutomationEngine({ db: t.database.db, evaluator: builtinEvaluator, clock, log: silent });
  sender = createMailSender({ db: t.database.db, clock, log: silent, allowPrivate: true, sendTimeoutMs: 5000, random: () => 0.5 });
});
afterAll(() => receiver?.stop());

let n = 0;
const unique = (who: string, domain: string) => `${who}-${++n}-${Math.random().toString(36).slice(2, 8)}@${domain}`;

/** A channel that receives through the service's SMTP receiver and sends through it too. */
const channel = async (tenant: Tenant, domain: string) => {
  await verifyDomainFor(t.database.db, tenant.orgId, domain);
  return ok(
    await tenant.request('POST', '/v1/channels', {
      type: 'email',
      name: 'Desk',
      address: unique('desk', domain),
      inbound: { mode: 'smtp' },
      outbound: { host: '127.0.0.1', port, secure: false, tls: 'none' },
    }),
    201,
  );
};

const PLANS = {
  send: [{ operation: 'messages.send', input: { channelId: '{{event.data.channelId}}', to: ['{{sender.address}}'], subject: 'We got your mail', text: 'Thanks!' } }],
  reply: [{ operation: 'messages.reply', input: { id: '{{event.resourceId}}', text: 'Thanks!' } }],
  forward: [{ operation: 'messages.forward', input: { id: '{{event.resourceId}}', to: ['{{sender.address}}'], text: 'Back to you' } }],
} as const;
type Kind = keyof typeof PLANS;

/** An active automation that runs `kind` on every received message (a plan written by a person, approved by the API key). */
async function automation(tenant: Tenant, kind: Kind): Promise<string> {
  const created = await ok(
    await tenant.request('POST', '/v1/automations', { name: `Answer (${kind})`, instructions: `Answer every mail (${kind})`, triggerEvent: 'message.received', actions: PLANS[kind], status: 'active' }),
    201,
  );
  return created.id as string;
}

/** Runs the engine and the sender until neither has work left (at most `rounds` times). */
async function settle(rounds = 8) {
  for (let i = 0; i < rounds; i++) {
    const ran = await engine.runOnce();
    let sent = 0;
    for (let s = await sender.runOnce(); s > 0; s = await sender.runOnce()) sent += s;
    if (ran === 0 && sent === 0) return;
  }
}

const received = (channelIds: string[]) =>
  t.database.db
    .select({ id: messages.id, channelId: messages.channelId, sender: messages.sender, metadata: messages.metadata })
    .from(messages)
    .where(and(inArray(messages.channelId, channelIds), eq(messages.direction, 'incoming')));

const runsOf = (automationId: string) => t.database.db.select().from(automationExecutions).where(eq(automationExecutions.automationId, automationId));

/** Delivers a raw message into the receiver with the envelope given (an empty `mailFrom` is the null return path `<>`). */
async function deliver(opts: { mailFrom: string; to: string; headers: Record<string, string>; body?: string }) {
  const head = Object.entries({ 'Message-ID': `<${Math.random().toString(36).slice(2)}@outside.example>`, Date: new Date().toUTCString(), Subject: 'Hello', ...opts.headers })
    .map(([k, v]) => `${k}: ${v}`)
    .join('\r\n');
  const raw = `${head}\r\n${opts.headers['Content-Type'] ? '' : 'Content-Type: text/plain; charset=utf-8\r\n'}\r\n${opts.body ?? 'Hello there.'}\r\n`;
  const connection = new SMTPConnection({ host: '127.0.0.1', port, secure: false, ignoreTLS: true });
  await new Promise<void>((resolve, reject) => {
    connection.once('error', reject);
    connection.connect(() => resolve());
  });
  try {
    await new Promise<void>((resolve, reject) => connection.send({ from: opts.mailFrom, to: [opts.to] }, raw, (err) => (err ? reject(err) : resolve())));
  } finally {
    connection.quit();
  }
}

describe('two organizations whose automations answer every mail', () => {
  it.each<Kind>(['send', 'reply', 'forward'])('exchange at most two mails (%s)', async (kind) => {
    const [deskA, deskB] = [await channel(a, 'a-org.example'), await channel(b, 'b-org.example')];
    const ids = [await automation(a, kind), await automation(b, kind)];
    try {
      await exchange(kind, deskA, deskB, ids);
    } finally {
      await a.request('DELETE', `/v1/automations/${ids[0]}`);
      await b.request('DELETE', `/v1/automations/${ids[1]}`);
    }
  });
});

async function exchange(kind: Kind, deskA: Json, deskB: Json, ids: string[]) {
    await engine.runOnce();
    for (const [id, who] of [[ids[0]!, a], [ids[1]!, b]] as const) expect(await ok(await who.request('GET', `/v1/automations/${id}`))).toMatchObject({ status: 'active' });

    // A person at A writes to B; B's automation answers; A's automation must not answer the automatic answer.
    await ok(await a.request('POST', '/v1/messages/send', { channelId: deskA.id, to: [deskB.address], subject: 'Hello B', text: 'Hi!' }), 201);
    await settle();
    const mails = await received([deskA.id, deskB.id]);
    expect(mails.length).toBe(2);
    const [toB, toA] = [mails.filter((m) => m.channelId === deskB.id), mails.filter((m) => m.channelId === deskA.id)];
    expect(toB).toHaveLength(1);
    expect(toA).toHaveLength(1);
    expect((toA[0]!.metadata as Json).email).toMatchObject({ autoSubmitted: kind === 'reply' ? 'auto-replied' : 'auto-generated', autoResponseSuppress: 'All' });
    const [runA] = await runsOf(ids[0]!);
    expect(runA).toMatchObject({ status: 'skipped' });
    expect(runA!.error).toMatch(/itself automatic \(Auto-Submitted: auto-/);
    expect(await runsOf(ids[1]!)).toMatchObject([{ status: 'succeeded' }]);
    // A skipped run is no failure: the automation stays active.
    for (const [id, who] of [[ids[0]!, a], [ids[1]!, b]] as const) expect(await ok(await who.request('GET', `/v1/automations/${id}`))).toMatchObject({ status: 'active' });
}

describe('the triggering message decides: silence rules', () => {
  let desk: Json;
  let ids: Record<Kind, string>;
  beforeAll(async () => {
    desk = await channel(a, 'silence.example');
    ids = { send: await automation(a, 'send'), reply: await automation(a, 'reply'), forward: await automation(a, 'forward') };
    await engine.runOnce();
  });
  afterAll(async () => {
    for (const id of Object.values(ids ?? {})) await a.request('DELETE', `/v1/automations/${id}`);
  });

  /** Delivers a mail, lets the automations run, and answers each kind's latest run and the mails they queued. */
  async function outcome(opts: { mailFrom?: string; from?: string; headers?: Record<string, string>; body?: string }) {
    const from = opts.from ?? unique('ada', 'customer.example');
    const before = new Set((await received([desk.id])).map((m) => m.id));
    await deliver({ mailFrom: opts.mailFrom ?? from, to: desk.address, headers: { From: from, To: desk.address, ...opts.headers }, ...(opts.body ? { body: opts.body } : {}) });
    const arrived = (await received([desk.id])).filter((m) => !before.has(m.id));
    expect(arrived).toHaveLength(1);
    await engine.runOnce();
    const runs: Record<string, Json> = {};
    for (const kind of Object.keys(PLANS) as Kind[]) {
      const [run] = (await runsOf(ids[kind])).filter((r) => r.eventId && r.createdAt.getTime() >= Date.now() - 60_000).sort((x, y) => y.createdAt.getTime() - x.createdAt.getTime());
      runs[kind] = run!;
    }
    const queued = await t.database.db.select({ id: messages.id }).from(messages).where(and(eq(messages.channelId, desk.id), eq(messages.direction, 'outgoing'), eq(messages.status, 'queued')));
    return { runs, queued: queued.length, message: arrived[0]! };
  }

  const silences: [string, Parameters<typeof outcome>[0], RegExp][] = [
    ['a null return path', { mailFrom: '' }, /null return path/],
    ['MAILER-DAEMON with a null return path', { mailFrom: '', from: 'MAILER-DAEMON@mx.customer.example', headers: { Subject: 'Undelivered Mail Returned to Sender' } }, /null return path/],
    ['MAILER-DAEMON', { from: 'MAILER-DAEMON@mx.customer.example' }, /mailer-daemon/],
    ['postmaster', { from: 'postmaster@customer.example' }, /postmaster/],
    ['owner-…', { from: 'owner-news@lists.customer.example' }, /owner-news/],
    ['…-request', { from: 'news-request@lists.customer.example' }, /news-request/],
    ['a return path of a list', { mailFrom: 'owner-news@lists.customer.example' }, /owner-news/],
    [
      'multipart/report (a bounce, a read receipt)',
      {
        headers: { 'MIME-Version': '1.0', 'Content-Type': 'multipart/report; report-type=disposition-notification; boundary="rpt"' },
        body: '--rpt\r\nContent-Type: text/plain\r\n\r\nYour message was read.\r\n--rpt\r\nContent-Type: message/disposition-notification\r\n\r\nFinal-Recipient: rfc822; ada@customer.example\r\nDisposition: manual-action/MDN-sent-manually; displayed\r\n--rpt--',
      },
      /multipart\/report/,
    ],
    ['Auto-Submitted: auto-replied', { headers: { 'Auto-Submitted': 'auto-replied' } }, /Auto-Submitted: auto-replied/],
    ['Auto-Submitted: auto-notified', { headers: { 'Auto-Submitted': 'auto-notified' } }, /Auto-Submitted: auto-notified/],
    ['Precedence: bulk', { headers: { Precedence: 'bulk' } }, /Precedence: bulk/],
    ['Precedence: junk', { headers: { Precedence: 'junk' } }, /Precedence: junk/],
    ['Precedence: list', { headers: { Precedence: 'list' } }, /Precedence: list/],
    ['List-Id', { headers: { 'List-Id': '<news.customer.example>' } }, /mailing list \(list-id\)/],
    ['List-Unsubscribe alone', { headers: { 'List-Unsubscribe': '<mailto:leave@customer.example>' } }, /mailing list \(list-unsubscribe\)/],
    ['List-Post alone', { headers: { 'List-Post': '<mailto:news@customer.example>' } }, /mailing list \(list-post\)/],
    ['X-Auto-Response-Suppress', { headers: { 'X-Auto-Response-Suppress': 'OOF, AutoReply' } }, /X-Auto-Response-Suppress: OOF, AutoReply/],
  ];

  it.each(silences)('stays silent for %s, and the run says why', async (_name, opts, reason) => {
    const { runs, queued } = await outcome(opts);
    expect(queued).toBe(0);
    for (const kind of Object.keys(PLANS) as Kind[]) {
      expect(runs[kind], kind).toMatchObject({ status: 'skipped' });
      expect(runs[kind]!.error, kind).toMatch(reason);
      expect(runs[kind]!.error, kind).toMatch(/^Skipped: Not sent: /);
    }
  });

  it('answers ordinary mail, also with Auto-Submitted: no and X-Auto-Response-Suppress: None, once a day per automation and recipient', async () => {
    const from = unique('bob', 'customer.example');
    const first = await outcome({ from, headers: { 'Auto-Submitted': 'no', 'X-Auto-Response-Suppress': 'None' } });
    for (const kind of Object.keys(PLANS) as Kind[]) expect(first.runs[kind], kind).toMatchObject({ status: 'succeeded' });
    expect(first.queued).toBe(3);
    await settle();
    // The same sender again the same day: every automation has mailed it already.
    const second = await outcome({ from });
    expect(second.queued).toBe(0);
    for (const kind of Object.keys(PLANS) as Kind[]) {
      expect(second.runs[kind], kind).toMatchObject({ status: 'skipped' });
      expect(second.runs[kind]!.error, kind).toMatch(/already (sent|answered) .* today/);
    }
    // Another sender is answered.
    const other = await outcome({});
    expect(other.queued).toBe(3);
    await settle();
  });
});

describe('recipients', () => {
  it('an automatic reply to a mail with 100 Reply-To addresses goes to one address; a person\'s reply to all of them is refused (at most 50)', async () => {
    const desk = await channel(a, 'replyto.example');
    const id = await automation(a, 'reply');
    await engine.runOnce();
    const replyTo = Array.from({ length: 100 }, (_, i) => `victim-${i}@elsewhere.example`).join(', ');
    await deliver({ mailFrom: 'ada@customer.example', to: desk.address, headers: { From: 'ada@customer.example', To: desk.address, 'Reply-To': replyTo } });
    await engine.runOnce();
    expect(await runsOf(id)).toMatchObject([{ status: 'succeeded' }]);
    const [answer] = await t.database.db.select().from(messages).where(and(eq(messages.channelId, desk.id), eq(messages.direction, 'outgoing')));
    expect((answer!.metadata as Json).email.to).toEqual([{ email: 'victim-0@elsewhere.example' }]);
    expect((answer!.metadata as Json).email.cc).toEqual([]);
    await ok(await a.request('DELETE', `/v1/automations/${id}`));

    const [incoming] = await received([desk.id]);
    const person = await a.request('POST', `/v1/messages/${incoming!.id}/reply`, { text: 'To everyone' });
    expect(person.status, person.body).toBe(400);
    expect(person.json.error).toMatchObject({ code: 'VALIDATION_ERROR', details: { properties: { id: { errors: [expect.stringMatching(/100 addresses .* at most 50/)] } } } });
    const everyone = await a.request('POST', `/v1/messages/${incoming!.id}/reply`, { text: 'To everyone', replyAll: true });
    expect(everyone.status, everyone.body).toBe(400);
    // The same bound through MCP (the API key as the bearer token).
    const viaMcp = await t.app.inject({
      method: 'POST',
      url: '/mcp',
      headers: { authorization: `Bearer ${a.key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
      payload: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'messages_write', arguments: { method: 'reply', id: incoming!.id, text: 'To everyone' } } },
    });
    const rpc = JSON.parse(viaMcp.body.split('\n').find((l) => l.startsWith('data: '))?.slice(6) ?? viaMcp.body) as Json;
    expect(rpc.result, viaMcp.body).toMatchObject({ isError: true });
    expect(JSON.stringify(rpc.result.content)).toMatch(/100 addresses .* at most 50/);
  });

  it('sending and forwarding take at most 50 recipients', async () => {
    const desk = await channel(a, 'bound.example');
    const many = (k: number) => Array.from({ length: k }, (_, i) => `r${i}@elsewhere.example`);
    expect((await a.request('POST', '/v1/messages/send', { channelId: desk.id, to: many(51), subject: 'x', text: 'x' })).status).toBe(400);
    expect((await a.request('POST', '/v1/messages/send', { channelId: desk.id, to: many(30), cc: many(21).map((r) => `cc-${r}`), subject: 'x', text: 'x' })).status).toBe(400);
    const fifty = await a.request('POST', '/v1/messages/send', { channelId: desk.id, to: many(50), subject: 'x', text: 'x' });
    expect(fifty.status, fifty.body).toBe(201);
    expect((await a.request('POST', `/v1/messages/${fifty.json.data.id}/forward`, { to: many(51) })).status).toBe(400);
  });
});

describe('the organization\'s rate of automatic messages', () => {
  it('skips the steps past AUTOMATIC_MESSAGES_PER_HOUR recipients an hour, with the reason', async () => {
    const c = await t.tenant({ credits: 10 }); // a new organization: nothing counted yet this hour
    const desk = await channel(c, 'rate.example');
    const id = await automation(c, 'send');
    const limited = createAutomationEngine({ db: t.database.db, evaluator: builtinEvaluator, clock, log: silent, limits: { automaticMessagesPerHour: 2 } });
    await limited.runOnce();
    for (let i = 0; i < 3; i++) {
      const from = unique('carol', 'customer.example');
      await deliver({ mailFrom: from, to: desk.address, headers: { From: from, To: desk.address } });
      await limited.runOnce();
    }
    const runs = (await runsOf(id)).sort((x, y) => x.createdAt.getTime() - y.createdAt.getTime());
    expect(runs.map((r) => r.status)).toEqual(['succeeded', 'succeeded', 'skipped']);
    expect(runs[2]!.error).toMatch(/already sent automatic messages to 2 recipients in the last hour; at most 2 an hour \(AUTOMATIC_MESSAGES_PER_HOUR\)/);
    await ok(await c.request('DELETE', `/v1/automations/${id}`));
  });
});

describe('a scheduled automation', () => {
  it('mails as often as its schedule says (no answer to anything, so not held to once a day), within the hourly rate', async () => {
    const c = await t.tenant({ credits: 10 });
    const desk = await channel(c, 'schedule.example');
    const created = await ok(
      await c.request('POST', '/v1/automations', {
        name: 'Status every minute',
        instructions: 'Mail the status every minute',
        cronExpression: '* * * * *',
        actions: [{ operation: 'messages.send', input: { channelId: desk.id, to: ['ops@elsewhere.example'], subject: 'Status', text: 'All well' } }],
        status: 'active',
      }),
      201,
    );
    let at = Date.now();
    const ticking = createAutomationEngine({ db: t.database.db, evaluator: builtinEvaluator, clock: () => new Date(at), log: silent, limits: { automaticMessagesPerHour: 2 } });
    await ticking.runOnce(); // evaluates, then sets the first tick
    for (let i = 0; i < 4; i++) {
      at += 61_000;
      await ticking.runOnce();
    }
    const runs = (await runsOf(created.id)).sort((x, y) => x.createdAt.getTime() - y.createdAt.getTime());
    expect(runs.map((r) => r.status)).toEqual(['succeeded', 'succeeded', 'skipped', 'skipped']);
    expect(runs[2]!.error).toMatch(/at most 2 an hour/);
    await ok(await c.request('DELETE', `/v1/automations/${created.id}`));
  });
});

describe('several processes', () => {
  it('count against the daily cap and the hourly rate one after the other: concurrent claims never both pass', async () => {
    const second = testDbKind === 'postgres' ? await openDatabase({ url: (t.database as Database & { url: string }).url, poolSize: 2 }) : undefined;
    try {
      const c = await t.tenant({ credits: 10 });
      const id = await automation(c, 'send');
      const dbs = [t.database.db, (second ?? t.database).db];
      const claim = (recipients: string[], perHour = 100) => ({ orgId: c.orgId, automationId: id, messageId: null, recipients, now: new Date(), perHour, oncePerDay: true });
      // Each transaction holds its claim a moment before it commits, so that the other one runs into it.
      const attempt = (i: number, recipients: string[], perHour?: number) =>
        dbs[i]!.transaction(async (tx) => {
          await claimAutomaticMessages(tx, claim(recipients, perHour));
          await new Promise((r) => setTimeout(r, 300));
        });

      const same = await Promise.allSettled([attempt(0, ['dana@customer.example']), attempt(1, ['dana@customer.example'])]);
      expect(same.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      const refused = same.find((r) => r.status === 'rejected') as PromiseRejectedResult;
      expect(refused.reason).toBeInstanceOf(AutomaticMessageRefused);
      expect(String(refused.reason.message)).toMatch(/already sent dana@customer\.example an automatic message today/);

      // One mail left this hour (perHour 2, one counted): of two recipients claimed at once, one passes.
      const rate = await Promise.allSettled([attempt(0, ['erin@customer.example'], 2), attempt(1, ['frank@customer.example'], 2)]);
      expect(rate.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
      expect(String((rate.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason.message)).toMatch(/at most 2 an hour/);
      expect(await t.database.db.select().from(automaticMessages).where(eq(automaticMessages.organizationId, c.orgId))).toHaveLength(2);
      await ok(await c.request('DELETE', `/v1/automations/${id}`));
    } finally {
      await second?.close();
    }
  });
});

describe('a sender that must be verified', () => {
  it('"from ada@… (verified)" acts only on mail whose From domain passed DMARC, and the summary says which tests trust the From as written', async () => {
    const keys = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const dns: Record<string, string[][]> = {
      'TXT sender.example': [['v=spf1 ip4:127.0.0.1 -all']],
      'TXT sel._domainkey.sender.example': [[`v=DKIM1; k=rsa; p=${keys.publicKey.export({ type: 'spki', format: 'der' }).toString('base64')}`]],
      'TXT _dmarc.sender.example': [['v=DMARC1; p=reject']],
    };
    const resolver = async (name: string, rrtype: string) => {
      const found = dns[`${rrtype} ${name.toLowerCase()}`];
      if (found) return found;
      throw Object.assign(new Error(`ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
    };
    const authenticating = await startTestReceiver(t.database.db, { resolver });
    try {
      const desk = await channel(a, 'verified.example');
      const create = async (instructions: string) => ok(await a.request('POST', '/v1/automations', { name: instructions.slice(0, 60), instructions, status: 'active' }), 201);
      const verified = await create('When an email from ada@sender.example (verified) arrives, mark it as read');
      const trusting = await create('When an email from ada@sender.example arrives, archive it');
      await engine.runOnce();
      const [v, u] = [await ok(await a.request('GET', `/v1/automations/${verified.id}`)), await ok(await a.request('GET', `/v1/automations/${trusting.id}`))];
      expect(v.condition).toEqual({
        all: [
          { field: 'type', operator: 'equals', value: 'email' },
          { field: 'sender', operator: 'equals', value: 'ada@sender.example' },
          { field: 'sender.verified', operator: 'equals', value: true },
        ],
      });
      expect(v.planSummary).toBe(
        'Runs when a message is received, only if its type is "email" and its sender is "ada@sender.example" and its sender is verified (its From domain passed DMARC). It marks the message as read.',
      );
      expect(u.planSummary).toMatch(/The sender is the From header as written, which is not authenticated \(anyone can forge it\)/);

      const transport = nodemailer.createTransport({ host: '127.0.0.1', port: authenticating.port, secure: false, ignoreTLS: true, connectionTimeout: 5000 });
      await transport.sendMail({
        from: 'ada@sender.example',
        to: desk.address,
        subject: 'Signed',
        text: 'from ada, signed',
        dkim: { domainName: 'sender.example', keySelector: 'sel', privateKey: keys.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString() },
      });
      // Forged: the same From, neither signed by sender.example nor sent from its servers.
      await transport.sendMail({ from: 'ada@sender.example', to: desk.address, subject: 'Forged', text: 'from "ada", forged', envelope: { from: 'x@forger.example', to: [desk.address] } });
      await engine.runOnce();
      await engine.runOnce();
      const got = await t.database.db.select().from(messages).where(eq(messages.channelId, desk.id));
      const signed = got.find((m) => m.text === 'from ada, signed')!;
      const forged = got.find((m) => m.text === 'from "ada", forged')!;
      expect((signed.metadata as Json).email.authentication.dmarc).toBe('pass');
      expect((forged.metadata as Json).email.authentication.dmarc).toBe('fail');
      expect(signed.readAt).not.toBeNull();
      expect(forged.readAt).toBeNull();
      // The automation that trusts the From as written acted on both.
      expect(signed.archivedAt).not.toBeNull();
      expect(forged.archivedAt).not.toBeNull();
      for (const id of [verified.id, trusting.id]) await ok(await a.request('DELETE', `/v1/automations/${id}`));
    } finally {
      await authenticating.receiver.stop();
    }
  });
});
