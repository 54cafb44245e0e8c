import { eq } from 'drizzle-orm';
import { beforeAll, describe, expect, it } from 'vitest';
import { events } from '../../src/db/schema.js';
import { builtinEvaluator } from '../../src/workers/evaluator/deterministic.js';
import { createAutomationEngine, type AutomationEngine } from '../../src/workers/automation-engine.js';
import { ok, type Tenant, useTestApp } from '../helpers/app.js';

/** Plans of the built-in evaluator that the engine must honour: several trigger events, conditions on the event's time. */

const silent = { error: () => {}, warn: () => {} };
const { t, a } = useTestApp({ credits: 1000 });
let engine: AutomationEngine;

beforeAll(async () => {
  engine = createAutomationEngine({ db: t.database.db, evaluator: builtinEvaluator, clock: () => new Date(), log: silent });
});

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const activeAutomation = async (who: Tenant, instructions: string): Promise<Json> => {
  const created = await ok(await who.request('POST', '/v1/automations', { name: instructions.slice(0, 40), instructions, status: 'active' }), 201);
  await engine.runOnce();
  const row = await ok(await who.request('GET', `/v1/automations/${created.id}`));
  expect(row, JSON.stringify(row)).toMatchObject({ status: 'active' });
  return row;
};
const runs = async (who: Tenant, id: string) => ok(await who.request('GET', `/v1/automations/${id}/executions?limit=100`));

describe('several trigger events', () => {
  it('"created or updated" runs on both events, only for records that meet the condition', async () => {
    const automation = await activeAutomation(a, 'When a customer whose type is VIP is created or updated, write a digest');
    expect(automation).toMatchObject({ triggerEvent: 'customer.created,customer.updated', condition: { field: 'type', operator: 'equals', value: 'VIP' } });

    const vip = await ok(await a.request('POST', '/v1/customers', { name: 'Ada', type: 'VIP' }), 201);
    const plain = await ok(await a.request('POST', '/v1/customers', { name: 'Bob', type: 'individual' }), 201);
    await engine.runOnce();
    await ok(await a.request('PATCH', `/v1/customers/${plain.id}`, { type: 'vip' }));
    await engine.runOnce();
    const deleted = await a.request('DELETE', `/v1/customers/${vip.id}`);
    expect(deleted.status, deleted.body).toBeLessThan(300); // customer.deleted: not a trigger of this automation
    await engine.runOnce();

    const done = await runs(a, automation.id);
    const triggers = await Promise.all(done.map(async (r: Json) => (await t.database.db.select().from(events).where(eq(events.id, r.eventId)))[0]!));
    expect(triggers.map((e) => `${e.type} ${e.resourceId}`).sort()).toEqual([`customer.created ${vip.id}`, `customer.updated ${plain.id}`].sort());
    expect(done.every((r: Json) => r.status === 'succeeded')).toBe(true);
  });
});

describe('conditions on the time of the event, in the automation\'s time zone', () => {
  it('reads the event\'s time in the plan\'s zone: Sunday 23:30 UTC is 18:30 in New York and Monday in Tokyo', async () => {
    const evening = await activeAutomation(a, 'When a new email arrives after 6pm New York time, mark it as read');
    expect(evening).toMatchObject({ timezone: 'America/New_York', condition: { all: [{ field: 'type' }, { timeOfDay: { from: '18:00', to: '00:00' } }] } });
    const weekendTokyo = await activeAutomation(a, 'When a new email arrives on weekends Tokyo time, archive it');
    const weekendUtc = await activeAutomation(a, 'When a new email arrives on weekends, set its importance to low');
    const morning = await activeAutomation(a, 'When a new email arrives before 8am London time, set its urgency to low');

    const message = await ok(await a.request('POST', '/v1/messages', { direction: 'incoming', type: 'email', text: 'Hello' }), 201);
    // The event happened at a known instant: Sunday 2030-01-06 23:30 UTC.
    await t.database.db.update(events).set({ occurredAt: new Date('2030-01-06T23:30:00Z') }).where(eq(events.resourceId, message.id));
    await engine.runOnce();
    await engine.runOnce();

    const after = await ok(await a.request('GET', `/v1/messages/${message.id}`));
    expect(after.readAt).not.toBeNull(); // 18:30 in New York: after 6pm
    expect(after.archivedAt).toBeNull(); // Monday in Tokyo: not a weekend
    expect(after.importance).toBe('low'); // Sunday in UTC: a weekend
    expect(after.urgency).not.toBe('low'); // 23:30 in London: not before 8am
    expect(await runs(a, evening.id)).toHaveLength(1);
    expect(await runs(a, weekendTokyo.id)).toHaveLength(0);
    expect(await runs(a, weekendUtc.id)).toHaveLength(1);
    expect(await runs(a, morning.id)).toHaveLength(0);
  });
});
