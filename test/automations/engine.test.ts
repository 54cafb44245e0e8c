import { eq, sql } from 'drizzle-orm';
import { beforeAll, describe, expect, it } from 'vitest';
import { automationExecutions, automations, events, organizations } from '../../src/db/schema.js';
import { CLIENT_TRANSITIONS, type AutomationStatus } from '../../src/modules/automations/automations.lifecycle.js';
import { AUTOMATION_STATUSES } from '../../src/modules/automations/automations.schemas.js';
import { builtinEvaluator } from '../../src/workers/evaluator/deterministic.js';
import { createAutomationEngine, type AutomationEngine } from '../../src/workers/automation-engine.js';
import { ok, type Tenant, useTestApp } from '../helpers/app.js';

/** The engine's clock: the real time unless a test fixes it, so tests move time instead of waiting. */
let fixed: Date | null = null;
const clock = () => fixed ?? new Date();
const silent = { error: () => {}, warn: () => {} };

const { t, a, b } = useTestApp({ credits: 1000, app: { clock } });
let engine: AutomationEngine;

beforeAll(async () => {
  engine = createAutomationEngine({ db: t.database.db, evaluator: builtinEvaluator, clock, log: silent });
});

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const create = async (who: Tenant, body: Json) => ok(await who.request('POST', '/v1/automations', body), 201);
const get = async (who: Tenant, id: string) => ok(await who.request('GET', `/v1/automations/${id}`));
const executions = async (who: Tenant, id: string) => ok(await who.request('GET', `/v1/automations/${id}/executions?limit=100`));
const incoming = (who: Tenant, body: Json = {}) => who.request('POST', '/v1/messages', { direction: 'incoming', type: 'email', text: 'Hello', ...body });

/** Puts an automation straight into a status (and gives it a plan), as the engine would have. */
async function force(id: string, status: AutomationStatus, extra: Partial<typeof automations.$inferInsert> = {}) {
  await t.database.db
    .update(automations)
    .set({ status, evaluateAfter: null, actions: [{ operation: 'messages.update', input: { id: '{{event.resourceId}}', readAt: '{{now}}' } }], ...extra })
    .where(eq(automations.id, id));
}

describe('the walk: create with only name and instructions, evaluate, approve, trigger', () => {
  it('runs once per incoming message from the sender it names, and its effect is visible through REST', async () => {
    const created = await create(a, { name: 'Billing mail', instructions: 'When a new email arrives from billing@acme.test, mark it as read' });
    expect(created).toMatchObject({ status: 'pending_evaluation', triggerEvent: 'automation.pending', actions: null });

    await engine.runOnce();
    const evaluated = await get(a, created.id);
    expect(evaluated).toMatchObject({ status: 'pending_approval', triggerEvent: 'message.received', statusReason: null });
    expect(evaluated.actions).toEqual([{ operation: 'messages.update', input: { id: '{{event.resourceId}}', readAt: '{{now}}' } }]);
    expect(evaluated.permissions).toEqual({ operations: ['messages.update'] });

    // Not active yet: a matching message is left alone.
    const early = await ok(await incoming(a, { sender: 'billing@acme.test' }), 201);
    await engine.runOnce();
    expect((await ok(await a.request('GET', `/v1/messages/${early.id}`))).readAt).toBeNull();

    expect((await ok(await a.request('POST', `/v1/automations/${created.id}/approve`))).status).toBe('active');
    const match = await ok(await incoming(a, { sender: { name: 'Billing', email: 'Billing@Acme.test' } }), 201);
    const other = await ok(await incoming(a, { sender: 'someone@else.test' }), 201);
    const outgoing = await ok(await a.request('POST', '/v1/messages', { direction: 'outgoing', type: 'email', recipient: 'billing@acme.test' }), 201);
    await engine.runOnce();

    expect((await ok(await a.request('GET', `/v1/messages/${match.id}`))).readAt).not.toBeNull();
    expect((await ok(await a.request('GET', `/v1/messages/${other.id}`))).readAt).toBeNull();
    expect((await ok(await a.request('GET', `/v1/messages/${outgoing.id}`))).readAt).toBeNull();

    const runs = await executions(a, created.id);
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({ status: 'succeeded', error: null, steps: [{ operation: 'messages.update', resourceId: match.id }], scheduledFor: null });
    const [trigger] = await t.database.db.select().from(events).where(eq(events.id, runs[0].eventId));
    expect(trigger).toMatchObject({ type: 'message.received', resourceId: match.id });
    expect((await get(a, created.id)).currentExecutions).toBe(1);

    // The run's own write is an event caused by the automation.
    const updates = await ok(await a.request('GET', '/v1/events?type=message.updated'));
    expect(updates[0]).toMatchObject({ resourceId: match.id, actor: { type: 'automation', id: created.id } });

    // Running again finds nothing new: exactly one execution per (automation, event).
    await engine.runOnce();
    expect(await executions(a, created.id)).toHaveLength(1);

    // Another organization sees neither the automation nor its executions.
    expect((await b.request('GET', `/v1/automations/${created.id}/executions`)).status).toBe(404);
  });

  it('an automation created "active" is evaluated and runs without an approval step', async () => {
    const created = await create(a, { name: 'Archive newsletters', instructions: 'Archive every new email containing "newsletter"', status: 'active' });
    await engine.runOnce();
    expect(await get(a, created.id)).toMatchObject({ status: 'active', triggerEvent: 'message.received' });
    const m = await ok(await incoming(a, { text: 'Our monthly newsletter is here' }), 201);
    await engine.runOnce();
    expect((await ok(await a.request('GET', `/v1/messages/${m.id}`))).archivedAt).not.toBeNull();
  });

  it('instructions it cannot understand end in evaluation_failed with a reason', async () => {
    const created = await create(a, { name: 'Nonsense', instructions: 'Colorless green ideas sleep furiously' });
    await engine.runOnce();
    const row = await get(a, created.id);
    expect(row.status).toBe('evaluation_failed');
    expect(row.statusReason).toEqual(expect.any(String));
  });

  it('a plan beyond the creator\'s permissions ends in code_generation_failed', async () => {
    const limited = await a.keyWith(['automations:write', 'automations:read']);
    const created = await create(limited, { name: 'Mark read', instructions: 'When a new email arrives, mark it as read' });
    await engine.runOnce();
    const row = await get(a, created.id);
    expect(row.status).toBe('code_generation_failed');
    expect(row.statusReason).toMatch(/messages:write/);
  });

  it('an explicit draft waits until it is patched to pending_evaluation', async () => {
    const created = await create(a, { name: 'Later', instructions: 'When a new email arrives, mark it as read', status: 'draft' });
    await engine.runOnce();
    expect((await get(a, created.id)).status).toBe('draft');
    await ok(await a.request('PATCH', `/v1/automations/${created.id}`, { status: 'pending_evaluation' }));
    await engine.runOnce();
    expect((await get(a, created.id)).status).toBe('pending_approval');
  });
});

describe('credits', () => {
  const balance = async (who: Tenant) => (await t.database.db.select({ c: organizations.credits }).from(organizations).where(eq(organizations.id, who.orgId)))[0]!.c;

  it('new instructions cost one more credit; with none left the answer is 402 and nothing changes', async () => {
    const poor = await t.tenant({ credits: 1 });
    const created = await create(poor, { name: 'One', instructions: 'When a new email arrives, mark it as read' });
    expect(await balance(poor)).toBe(0);
    const eventsBefore = await t.database.db.select({ n: sql<number>`count(*)::int` }).from(events).where(eq(events.organizationId, poor.orgId));

    const refused = await poor.request('PATCH', `/v1/automations/${created.id}`, { instructions: 'When a new email arrives, archive it' });
    expect(refused.status).toBe(402);
    expect(refused.json.error.code).toBe('INSUFFICIENT_CREDITS');
    expect((await get(poor, created.id)).instructions).toBe('When a new email arrives, mark it as read');
    const again = await poor.request('POST', '/v1/automations', { name: 'Two', instructions: 'x' });
    expect(again.status).toBe(402);
    // A write that rolled back left no event.
    const eventsAfter = await t.database.db.select({ n: sql<number>`count(*)::int` }).from(events).where(eq(events.organizationId, poor.orgId));
    expect(eventsAfter[0]!.n).toBe(eventsBefore[0]!.n);

    await t.database.db.update(organizations).set({ credits: 5 }).where(eq(organizations.id, poor.orgId));
    await engine.runOnce();
    expect((await get(poor, created.id)).status).toBe('pending_approval');
    const changed = await ok(await poor.request('PATCH', `/v1/automations/${created.id}`, { instructions: 'When a new email arrives, archive it' }));
    expect(changed.status).toBe('pending_evaluation');
    expect(await balance(poor)).toBe(4);
    // Other fields are free.
    await ok(await poor.request('PATCH', `/v1/automations/${created.id}`, { name: 'Renamed' }));
    expect(await balance(poor)).toBe(4);
  });
});

describe('lifecycle', () => {
  it('PATCH status follows the transitions table for every pair of statuses', async () => {
    const created = await create(a, { name: 'Transitions', instructions: 'When a new email arrives, mark it as read', status: 'draft' });
    for (const from of AUTOMATION_STATUSES) {
      for (const to of AUTOMATION_STATUSES) {
        await force(created.id, from);
        const res = await a.request('PATCH', `/v1/automations/${created.id}`, { status: to });
        const allowed = from === to || CLIENT_TRANSITIONS[from].includes(to);
        expect(res.status, `${from} -> ${to}: ${res.body}`).toBe(allowed ? 200 : 400);
        if (allowed) {
          expect(res.json.data.status).toBe(to);
        } else {
          expect(res.json.error.code).toBe('VALIDATION_ERROR');
          const issue = res.json.error.details.properties.status.errors[0] as string;
          for (const target of CLIENT_TRANSITIONS[from]) expect(issue).toContain(`"${target}"`);
        }
      }
    }
  });

  it('approve, pause, resume and archive move the automation and refuse moves from the wrong status', async () => {
    const created = await create(a, { name: 'Moves', instructions: 'When a new email arrives, mark it as read' });
    const post = (action: string) => a.request('POST', `/v1/automations/${created.id}/${action}`);
    expect((await post('approve')).status).toBe(400); // still pending_evaluation
    await engine.runOnce();
    expect((await ok(await post('approve'))).status).toBe('active');
    expect((await post('resume')).status).toBe(400);
    expect((await ok(await post('pause'))).status).toBe('paused');
    expect((await ok(await post('resume'))).status).toBe('active');
    expect((await ok(await post('archive'))).status).toBe('archived');
    const stuck = await post('resume');
    expect(stuck.status).toBe(400);
    expect((await a.request('PATCH', `/v1/automations/${created.id}`, { status: 'active' })).status).toBe(400);
    expect((await b.request('POST', `/v1/automations/${created.id}/pause`)).status).toBe(404);
    const readOnly = await a.keyWith(['automations:read']);
    expect((await readOnly.request('POST', `/v1/automations/${created.id}/archive`)).status).toBe(403);
  });

  it('a paused automation does not run, and its missed events are not replayed', async () => {
    const created = await create(a, { name: 'Paused', instructions: 'When a new email arrives containing "paused-test", archive it', status: 'active' });
    await engine.runOnce();
    await ok(await a.request('POST', `/v1/automations/${created.id}/pause`));
    const m = await ok(await incoming(a, { text: 'paused-test one' }), 201);
    await engine.runOnce();
    await ok(await a.request('POST', `/v1/automations/${created.id}/resume`));
    await engine.runOnce();
    expect((await ok(await a.request('GET', `/v1/messages/${m.id}`))).archivedAt).toBeNull();
    expect(await executions(a, created.id)).toHaveLength(0);
  });

  it('maxExecutions completes it, expiresAt expires it, five failures in a row fail it', async () => {
    const capped = await create(a, { name: 'Twice', instructions: 'When a new email arrives containing "capped-test", mark it as read', status: 'active', maxExecutions: 2 });
    await engine.runOnce();
    for (let i = 0; i < 3; i++) await incoming(a, { text: `capped-test ${i}` });
    await engine.runOnce();
    expect(await get(a, capped.id)).toMatchObject({ status: 'completed', currentExecutions: 2 });

    const expiring = await create(a, { name: 'Soon over', instructions: 'When a new email arrives, mark it as read', status: 'active', expiresAt: new Date(Date.now() + 60_000).toISOString() });
    await engine.runOnce();
    expect((await get(a, expiring.id)).status).toBe('active');
    fixed = new Date(Date.now() + 120_000);
    const late = await ok(await incoming(a, { text: 'after expiry' }), 201);
    await engine.runOnce();
    expect((await get(a, expiring.id)).status).toBe('expired');
    expect((await executions(a, expiring.id)).some((r: Json) => r.eventId && r.status === 'succeeded' && r.steps[0]?.resourceId === late.id)).toBe(false);

    const broken = await create(a, { name: 'Broken', instructions: 'When a new email arrives containing "broken-test", mark it as read', status: 'active' });
    await engine.runOnce();
    // A step the operation's schema refuses on every run.
    await force(broken.id, 'active', { actions: [{ operation: 'messages.update', input: { id: '{{event.resourceId}}', readAt: 'not a date' } }] });
    for (let i = 0; i < 5; i++) await incoming(a, { text: `broken-test ${i}` });
    await engine.runOnce();
    const failed = await get(a, broken.id);
    expect(failed.status).toBe('failed');
    expect(failed.statusReason).toMatch(/5 runs in a row failed.*VALIDATION_ERROR/);
    const runs = await executions(a, broken.id);
    expect(runs.filter((r: Json) => r.status === 'failed')).toHaveLength(5);
    fixed = null;
  });
});

describe('loops', () => {
  it('an automation never triggers itself, and chains stop at depth 3', async () => {
    const org = await t.tenant({ credits: 100 });
    const plan = [{ operation: 'messages.create', input: { direction: 'incoming', type: 'note', text: 'chain' } }];
    const ids: string[] = [];
    for (const name of ['X', 'Y']) {
      const created = await create(org, { name, instructions: 'When a new email arrives, mark it as read', status: 'active' });
      await engine.runOnce();
      await force(created.id, 'active', { triggerEvent: 'message.received', condition: null, actions: plan, permissions: { operations: ['messages.create'] } });
      ids.push(created.id);
    }
    await incoming(org, { text: 'start' });
    await engine.runOnce();
    const [count] = await t.database.db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM messages WHERE organization_id = ${org.orgId}`).then((r) => r.rows);
    // 1 written by a person, then 2 per depth (each automation answers the other's message) for depths 1, 2, 3.
    expect(count!.n).toBe(7);
    for (const id of ids) {
      const runs = await executions(org, id);
      expect(runs.map((r: Json) => r.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    }
  });
});

describe('schedules (injected clock)', () => {
  it('fires at each cron tick once, and after downtime only the last tick within an hour', async () => {
    fixed = new Date('2031-03-02T08:00:00Z'); // a Sunday
    const created = await create(a, { name: 'Weekly digest', instructions: 'Every Monday at 9, summarise new messages.', status: 'active' });
    await engine.runOnce();
    const evaluated = await get(a, created.id);
    expect(evaluated).toMatchObject({ status: 'active', cronExpression: '0 9 * * 1', triggerEvent: 'schedule.tick' });
    expect(evaluated.nextRunAt).toBe('2031-03-03T09:00:00.000Z');

    fixed = new Date('2031-03-03T09:00:30Z');
    await engine.runOnce();
    await engine.runOnce();
    let runs = await executions(a, created.id);
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({ status: 'succeeded', scheduledFor: '2031-03-03T09:00:00.000Z', eventId: null });
    const digest = await ok(await a.request('GET', `/v1/messages/${runs[0].steps[0].resourceId}`));
    expect(digest.text).toMatch(/message/);
    expect((await get(a, created.id)).nextRunAt).toBe('2031-03-10T09:00:00.000Z');

    // Down for three weeks: the ticks of the 10th and 17th are gone; the 24th is 30 minutes late and still runs.
    fixed = new Date('2031-03-24T09:30:00Z');
    await engine.runOnce();
    runs = await executions(a, created.id);
    expect(runs.map((r: Json) => r.scheduledFor)).toEqual(['2031-03-24T09:00:00.000Z', '2031-03-03T09:00:00.000Z']);

    // More than an hour late: skipped, and the next tick is planned.
    fixed = new Date('2031-03-31T11:00:00Z');
    await engine.runOnce();
    expect(await executions(a, created.id)).toHaveLength(2);
    expect((await get(a, created.id)).nextRunAt).toBe('2031-04-07T09:00:00.000Z');
    fixed = null;
  });
});

describe('events', () => {
  it('every write records its event; reads need events:read; another organization sees none', async () => {
    const contact = await ok(await a.request('POST', '/v1/contacts', { name: 'Ada' }), 201);
    const email = await ok(await a.request('POST', `/v1/contacts/${contact.id}/emails`, { email: 'ada@example.test' }), 201);
    const list = await ok(await a.request('GET', '/v1/events?limit=5'));
    expect(list[0]).toMatchObject({ type: 'contact.email.created', resourceId: email.id, actor: { type: 'api_key', id: a.keyId }, data: { email: 'ada@example.test' } });
    expect(list[1]).toMatchObject({ type: 'contact.created', resourceId: contact.id });
    const one = await ok(await a.request('GET', `/v1/events/${list[0].id}`));
    expect(one).toEqual(list[0]);
    expect((await b.request('GET', `/v1/events/${list[0].id}`)).status).toBe(404);
    const noRead = await a.keyWith(['contacts:read']);
    expect((await noRead.request('GET', '/v1/events')).status).toBe(403);
    // A write refused by validation records nothing.
    const before = (await ok(await a.request('GET', '/v1/events?limit=1')))[0].id;
    expect((await a.request('POST', '/v1/contacts', { nope: 1 })).status).toBe(400);
    expect((await ok(await a.request('GET', '/v1/events?limit=1')))[0].id).toBe(before);
  });

  it('an incoming message records message.created and message.received; an outgoing one message.sent', async () => {
    const m = await ok(await incoming(b), 201);
    const out = await ok(await b.request('POST', '/v1/messages', { direction: 'outgoing', type: 'sms' }), 201);
    const rows = await t.database.db.select({ type: events.type, resourceId: events.resourceId }).from(events).where(eq(events.organizationId, b.orgId));
    expect(rows.filter((r) => r.resourceId === m.id).map((r) => r.type).sort()).toEqual(['message.created', 'message.received']);
    expect(rows.filter((r) => r.resourceId === out.id).map((r) => r.type).sort()).toEqual(['message.created', 'message.sent']);
  });
});

describe('events nobody listens for', () => {
  const recorded = async (resourceId: string) => (await t.database.db.select().from(events).where(eq(events.resourceId, resourceId)))[0]!;

  it('are recorded dispatched; an active automation of their type, in their organization, leaves them to the engine', async () => {
    const c = await t.tenant({ credits: 1000 });
    const first = await ok(await c.request('POST', '/v1/contacts', { name: 'Nobody listens' }), 201);
    expect((await recorded(first.id)).dispatchedAt).not.toBeNull();

    // Another organization's automation on the type, and this organization's on another type or not active: still nobody.
    const elsewhere = await create(b, { name: 'Theirs', instructions: 'When a new email arrives from billing@acme.test, mark it as read' });
    await force(elsewhere.id, 'active', { triggerEvent: 'contact.created' });
    const otherType = await create(c, { name: 'Mine, on mail', instructions: 'When a new email arrives from billing@acme.test, mark it as read' });
    await force(otherType.id, 'active', { triggerEvent: 'message.received' });
    const paused = await create(c, { name: 'Mine, paused', instructions: 'When a new email arrives from billing@acme.test, mark it as read' });
    await force(paused.id, 'paused', { triggerEvent: 'contact.created' });
    const second = await ok(await c.request('POST', '/v1/contacts', { name: 'Still nobody' }), 201);
    expect((await recorded(second.id)).dispatchedAt).not.toBeNull();

    // An automation on several types, one of them this one: the event waits for the engine, which offers it.
    const listening = await create(c, { name: 'Mine, on contacts', instructions: 'When a new email arrives from billing@acme.test, mark it as read' });
    await force(listening.id, 'active', { triggerEvent: 'contact.created,contact.updated' });
    const third = await ok(await c.request('POST', '/v1/contacts', { name: 'Someone listens' }), 201);
    const waiting = await recorded(third.id);
    expect(waiting.dispatchedAt).toBeNull();
    await engine.runOnce();
    expect((await recorded(third.id)).dispatchedAt).not.toBeNull();
    const runs = await t.database.db.select().from(automationExecutions).where(eq(automationExecutions.automationId, listening.id));
    expect(runs.map((r) => r.eventId)).toEqual([waiting.id]);
  });
});

describe('executions table', () => {
  it('has one row per run and none for other organizations', async () => {
    const rows = await t.database.db.select({ org: automationExecutions.organizationId }).from(automationExecutions);
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.every((r) => r.org !== b.orgId)).toBe(true);
  });
});
