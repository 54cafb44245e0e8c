import { readFileSync } from 'node:fs';
import { eq } from 'drizzle-orm';
import { beforeAll, describe, expect, it } from 'vitest';
import { automationExecutions, events, organizations } from '../../src/db/schema.js';
import { summarizePlan } from '../../src/modules/automations/plan-summary.js';
import type { Plan } from '../../src/modules/automations/plan.js';
import type { AutomationEngine } from '../../src/workers/automation-engine.js';
import { ok, type Tenant } from '../helpers/app.js';
import { mintToken, v1Client, type LiveApp } from '../mcp/helpers.js';
import { useLiveEngine } from './live-engine.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const live = useLiveEngine(1000);
let t: LiveApp;
let a: Tenant;
let engine: AutomationEngine;
beforeAll(() => void ({ t, a, engine } = live));

const get = async (id: string, who: Tenant = a) => ok(await who.request('GET', `/v1/automations/${id}`));
const credits = async (who: Tenant = a) => (await t.database.db.select({ c: organizations.credits }).from(organizations).where(eq(organizations.id, who.orgId)))[0]!.c;
const create = async (body: Json, who: Tenant = a) => ok(await who.request('POST', '/v1/automations', body), 201);

const welcome = {
  name: 'Welcome note',
  // Words the built-in evaluator cannot read: a written plan is checked, not evaluated.
  instructions: 'Colorless green ideas sleep furiously',
  triggerEvent: 'contact.created',
  condition: { field: 'name', operator: 'starts_with', value: 'VIP' },
  actions: [{ operation: 'contacts.update', input: { id: '{{event.resourceId}}', notes: 'Welcomed {{event.data.name}} at {{now}}' } }],
};

describe('a plan written by a person', () => {
  it('is checked, not evaluated, costs what a create costs, carries its summary and still needs approval', async () => {
    const before = await credits();
    const created = await create(welcome);
    expect(created).toMatchObject({ status: 'pending_evaluation', actions: welcome.actions, triggerEvent: 'contact.created' });
    expect(await credits()).toBe(before - 1);
    await engine.runOnce();
    const checked = await get(created.id);
    expect(checked).toMatchObject({ status: 'pending_approval', statusReason: null, permissions: { operations: ['contacts.update'] }, actions: welcome.actions });
    expect(checked.planSummary).toEqual(expect.any(String));
    expect(await credits()).toBe(before - 1);

    await ok(await a.request('POST', `/v1/automations/${created.id}/approve`));
    const vip = await ok(await a.request('POST', '/v1/contacts', { name: 'VIP Ada' }), 201);
    const plain = await ok(await a.request('POST', '/v1/contacts', { name: 'Bob' }), 201);
    await engine.runOnce();
    expect((await ok(await a.request('GET', `/v1/contacts/${vip.id}`))).notes).toMatch(/^Welcomed VIP Ada at \d{4}-/);
    expect((await ok(await a.request('GET', `/v1/contacts/${plain.id}`))).notes).toBeNull();
    await ok(await a.request('POST', `/v1/automations/${created.id}/archive`));
  });

  it('is refused with the evaluator\'s own checks: unknown operations, forbidden areas, inputs the schema refuses, permissions beyond the author', async () => {
    const cases: [Json, RegExp, Tenant?][] = [
      [{ actions: [{ operation: 'contacts.explode', input: {} }] }, /unknown operation "contacts.explode"/],
      [{ actions: [{ operation: 'automations.create', input: { name: 'x', instructions: 'y' } }] }, /"automations" area are not allowed/],
      [{ actions: [{ operation: 'contacts.delete', input: { id: 'not-a-uuid' } }] }, /Step 1 \(contacts.delete\): input id/],
      [{ triggerEvent: 'contact.exploded' }, /not an event type of the catalog/],
      [{ condition: { field: 'name', operator: 'resembles', value: 'x' } }, /condition/],
      [{}, /lacks the "contacts:write" permission/, await a.keyWith(['automations:read', 'automations:write'])],
    ];
    for (const [change, reason, who] of cases) {
      const created = await create({ ...welcome, ...change }, who);
      await engine.runOnce();
      const row = await get(created.id);
      expect(row.status, JSON.stringify(change)).toBe('code_generation_failed');
      expect(row.statusReason, JSON.stringify(change)).toMatch(reason);
      expect(row.planSummary).toBeNull();
    }
  });

  it('needs the trigger beside the steps; a cron expression makes a scheduled plan', async () => {
    const { triggerEvent: _t, ...noTrigger } = welcome;
    const res = await a.request('POST', '/v1/automations', noTrigger);
    expect(res.status).toBe(400);
    expect(res.json.error.details.properties.triggerEvent.errors[0]).toMatch(/Required with `actions`/);

    const scheduled = await create({
      name: 'Daily note',
      instructions: 'Every day at 9, a note',
      cronExpression: '0 9 * * *',
      actions: [{ operation: 'contacts.create', input: { name: 'Daily {{now}}' } }],
    });
    expect(scheduled.triggerEvent).toBe('schedule.tick');
    await engine.runOnce();
    expect(await get(scheduled.id)).toMatchObject({ status: 'pending_approval', cronExpression: '0 9 * * *', triggerEvent: 'schedule.tick' });
  });

  it('may replace an evaluated plan by PATCH (checked again, free, back to approval); null forgets it and the instructions are evaluated again (charged)', async () => {
    const created = await create({ name: 'Read billing', instructions: 'When a new email arrives from billing@acme.test, mark it as read' });
    await engine.runOnce();
    await ok(await a.request('POST', `/v1/automations/${created.id}/approve`));
    const evaluated = await get(created.id);
    expect(evaluated.actions[0].operation).toBe('messages.update');

    const before = await credits();
    const steps = [{ operation: 'messages.update', input: { id: '{{event.resourceId}}', archivedAt: '{{now}}' } }];
    const patched = await ok(await a.request('PATCH', `/v1/automations/${created.id}`, { actions: steps }));
    expect(patched).toMatchObject({ status: 'pending_evaluation', actions: steps });
    await engine.runOnce();
    const rechecked = await get(created.id);
    expect(rechecked).toMatchObject({ status: 'pending_approval', actions: steps, triggerEvent: 'message.received' });
    expect(rechecked.condition).toEqual(evaluated.condition);
    expect(await credits()).toBe(before);

    await ok(await a.request('PATCH', `/v1/automations/${created.id}`, { actions: null }));
    expect(await credits()).toBe(before - 1);
    await engine.runOnce();
    expect((await get(created.id)).actions).toEqual(evaluated.actions);
  });
});

describe('planSummary', () => {
  it('is generated from the plan and shown by REST, MCP and the OpenAPI document', async () => {
    const created = await create({ name: 'Billing', instructions: 'When a new email arrives from billing@acme.test, mark it as read' });
    expect(created.planSummary).toBeNull();
    await engine.runOnce();
    const row = await get(created.id);
    const plan: Plan = {
      triggerType: 'event',
      triggerEvent: row.triggerEvent,
      cronExpression: row.cronExpression,
      timezone: row.timezone,
      condition: row.condition,
      actions: row.actions,
      permissions: row.permissions,
    };
    expect(row.planSummary).toBe(summarizePlan(plan));
    expect(row.planSummary).not.toContain(row.instructions);

    const listed = await ok(await a.request('GET', '/v1/automations?limit=100'));
    expect(listed.find((x: Json) => x.id === created.id).planSummary).toBe(row.planSummary);

    const { token } = await mintToken(t, a);
    const client = await v1Client(t.origin, token, 'mcp');
    try {
      const res = await client.callTool({ name: 'automations_read', arguments: { method: 'get', id: created.id } });
      expect(((res.structuredContent as Json).data as Json).planSummary).toBe(row.planSummary);
      const { tools } = await client.listTools();
      const tool = tools.find((x) => x.name === 'automations_read')!;
      expect(JSON.stringify(tool.outputSchema)).toContain('planSummary');
    } finally {
      await client.close();
    }

    const doc = (await a.request('GET', '/v1/openapi.json')).json as Json;
    expect(doc.components.schemas.Automation.properties.planSummary.description).toMatch(/generated from the plan/);
  });
});

describe('a dry run: POST /automations/{id}/preview', () => {
  it('answers whether the condition holds and each step rendered, for the latest matching event or the one named, writing and charging nothing', async () => {
    const org = await t.tenant({ credits: 100 });
    const created = await create(welcome, org);
    await engine.runOnce();
    const bob = await ok(await org.request('POST', '/v1/contacts', { name: 'Bob' }), 201);
    const vip = await ok(await org.request('POST', '/v1/contacts', { name: 'VIP Ada' }), 201);
    const [bobEvent] = await t.database.db.select().from(events).where(eq(events.resourceId, bob.id));

    const counts = async () => ({
      events: (await t.database.db.select().from(events).where(eq(events.organizationId, org.orgId))).length,
      runs: (await t.database.db.select().from(automationExecutions).where(eq(automationExecutions.organizationId, org.orgId))).length,
      credits: await credits(org),
      automation: await get(created.id, org),
    });
    const before = await counts();

    const latest = await ok(await org.request('POST', `/v1/automations/${created.id}/preview`, {}));
    expect(latest.event).toMatchObject({ type: 'contact.created' });
    expect(latest.conditionHolds).toBe(true);
    expect(latest.steps).toHaveLength(1);
    expect(latest.steps[0].operation).toBe('contacts.update');
    expect(latest.steps[0].input.id).toBe(vip.id);
    expect(latest.steps[0].input.notes).toMatch(/^Welcomed VIP Ada at \d{4}-/);

    const named = await ok(await org.request('POST', `/v1/automations/${created.id}/preview`, { eventId: bobEvent!.id }));
    expect(named).toMatchObject({ event: { id: bobEvent!.id }, conditionHolds: false });
    expect(named.steps[0].input).toMatchObject({ id: bob.id, notes: expect.stringMatching(/^Welcomed Bob at/) });

    expect(await counts()).toEqual(before);
    expect((await ok(await org.request('GET', `/v1/contacts/${vip.id}`))).notes).toBeNull();

    // Someone without the plan's permissions may not look; another organization's event is a 404.
    const limited = await org.keyWith(['automations:read', 'automations:write']);
    const denied = await limited.request('POST', `/v1/automations/${created.id}/preview`, {});
    expect(denied.status).toBe(403);
    expect(denied.json.error.message).toMatch(/"contacts:write"/);
    const foreign = await ok(await a.request('POST', '/v1/contacts', { name: 'Elsewhere' }), 201);
    const [foreignEvent] = await t.database.db.select().from(events).where(eq(events.resourceId, foreign.id));
    expect((await org.request('POST', `/v1/automations/${created.id}/preview`, { eventId: foreignEvent!.id })).status).toBe(404);
  });

  it('works through MCP too, and an automation without a plan is a 400', async () => {
    const created = await create({ name: 'Not yet', instructions: 'When a new email arrives, mark it as read' });
    const res = await a.request('POST', `/v1/automations/${created.id}/preview`, {});
    expect(res.status).toBe(400);
    expect(res.json.error.details.properties.status.errors[0]).toMatch(/no plan yet/);
    await engine.runOnce();
    const { token } = await mintToken(t, a);
    const client = await v1Client(t.origin, token, 'mcp');
    try {
      const out = await client.callTool({ name: 'automations_write', arguments: { method: 'preview', id: created.id } });
      expect(out.isError, JSON.stringify(out.content)).toBeFalsy();
      expect(((out.structuredContent as Json).data as Json).steps[0].operation).toBe('messages.update');
    } finally {
      await client.close();
    }
  });
});

describe('expiresAt on approval', () => {
  it('null means never: approving succeeds; a past expiresAt is refused; docs/automations.md says the same', async () => {
    const never = await create({ name: 'Forever', instructions: 'When a new email arrives, mark it as read', expiresAt: null });
    await engine.runOnce();
    expect(await ok(await a.request('POST', `/v1/automations/${never.id}/approve`))).toMatchObject({ status: 'active', expiresAt: null });

    const later = await create({ name: 'Soon', instructions: 'When a new email arrives, mark it as read', expiresAt: new Date(Date.now() + 60_000).toISOString() });
    await engine.runOnce();
    await ok(await a.request('PATCH', `/v1/automations/${later.id}`, { expiresAt: new Date(Date.now() - 1000).toISOString() }));
    const refused = await a.request('POST', `/v1/automations/${later.id}/approve`);
    expect(refused.status).toBe(400);
    expect(refused.json.error.details.properties.status.errors[0]).toMatch(/null or a future time/);

    const readme = readFileSync(new URL('../../docs/automations.md', import.meta.url), 'utf8');
    expect(readme).toContain('A move to `active` needs a plan and an `expiresAt` that is null (never expires) or in the future');
  });
});
