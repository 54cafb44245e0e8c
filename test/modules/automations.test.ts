import { eq, sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { automations, organizations } from '../../src/db/schema.js';
import { useTestApp, type Tenant } from '../helpers/app.js';

const { t, a, b } = useTestApp({ credits: 1000 });

const UUID = '3f1c1b2e-8a4d-4c6e-9f0a-1b2c3d4e5f60';

const credits = async (who: Tenant) =>
  (await t.database.db.select({ c: organizations.credits }).from(organizations).where(eq(organizations.id, who.orgId)))[0]!.c;

const rowCount = async (who: Tenant) =>
  Number((await t.database.db.select({ n: sql`count(*)` }).from(automations).where(eq(automations.organizationId, who.orgId)))[0]!.n);

const create = async (who: Tenant, body: Record<string, unknown>) => {
  const res = await who.request('POST', '/v1/automations', body);
  expect(res.status, res.body).toBe(201);
  return res.json.data as { id: string; [k: string]: unknown };
};

const storedTrigger = async (id: string) =>
  (await t.database.db.select({ type: automations.triggerType, cron: automations.cronExpression }).from(automations).where(eq(automations.id, id)))[0]!;

const full = {
  name: 'Weekly digest',
  instructions: 'Send me a digest of unread messages',
  description: 'Digest for the team',
  triggerEvent: 'schedule.tick',
  triggerType: 'scheduled',
  cronExpression: '0 9 * * 1',
  condition: { unreadOnly: true },
  enabled: false,
  groupId: UUID,
  groupName: 'Digests',
  groupMetadata: { purpose: 'reporting', createdBy: 'assistant', aiTaskId: 'task-42', tags: ['digest', 'weekly'] },
  maxExecutions: 52,
  currentExecutions: 3,
  expiresAt: '2030-01-01T00:00:00+02:00',
  status: 'active',
};

describe('automations', () => {
  it('creates with every field, never returns triggerType, reads, lists, updates and soft-deletes', async () => {
    const res = await a.request('POST', '/v1/automations', full);
    expect(res.status).toBe(201);
    const au = res.json.data;
    const { triggerType: _t, expiresAt: _e, ...echoed } = full;
    expect(au).toMatchObject({ ...echoed, organizationId: a.orgId, createdBy: a.keyId, permissions: {}, deletedAt: null });
    expect(au.expiresAt).toBe('2029-12-31T22:00:00.000Z');
    expect(au).not.toHaveProperty('triggerType');
    expect(await storedTrigger(au.id)).toEqual({ type: 'scheduled', cron: '0 9 * * 1' });

    const got = await a.request('GET', `/v1/automations/${au.id}`);
    expect(got.status).toBe(200);
    expect(got.json.data).toEqual(au);
    expect(got.body).not.toContain('triggerType');

    const list = await a.request('GET', '/v1/automations?limit=100');
    expect(list.status).toBe(200);
    expect(list.json.data.map((x: { id: string }) => x.id)).toContain(au.id);
    expect(list.body).not.toContain('triggerType');
    expect(list.json.meta.pagination.total).toBeUndefined();

    const patched = await a.request('PATCH', `/v1/automations/${au.id}`, { name: 'Daily digest', cronExpression: '0 9 * * *', status: 'paused', maxExecutions: null });
    expect(patched.status).toBe(200);
    // A new schedule changes when it fires: it goes back to evaluation (then approval), whatever status was asked for.
    expect(patched.json.data).toMatchObject({ name: 'Daily digest', cronExpression: '0 9 * * *', status: 'pending_evaluation', maxExecutions: null, instructions: full.instructions });
    expect(patched.json.data).not.toHaveProperty('triggerType');

    const del = await a.request('DELETE', `/v1/automations/${au.id}`);
    expect(del.status).toBe(200);
    expect(del.json.data.deletedAt).not.toBeNull();
    expect(del.json.data).not.toHaveProperty('triggerType');
    expect((await a.request('GET', `/v1/automations/${au.id}`)).status).toBe(404);
    expect((await a.request('PATCH', `/v1/automations/${au.id}`, { name: 'x' })).status).toBe(404);
    expect((await a.request('DELETE', `/v1/automations/${au.id}`)).status).toBe(404);
    const after = await a.request('GET', '/v1/automations?limit=100');
    expect(after.json.data.map((x: { id: string }) => x.id)).not.toContain(au.id);
  });

  it('applies the defaults: placeholder triggerEvent, status pending_evaluation, inferred event trigger', async () => {
    const au = await create(a, { name: 'Tag invoices', instructions: 'When an invoice email arrives, tag it as finance' });
    expect(au).toMatchObject({
      triggerEvent: 'automation.pending',
      status: 'pending_evaluation',
      actions: null,
      statusReason: null,
      enabled: true,
      currentExecutions: 0,
      maxExecutions: null,
      cronExpression: null,
      condition: null,
      description: null,
      groupId: null,
      groupMetadata: null,
      expiresAt: null,
    });
    expect(au).not.toHaveProperty('triggerType');
    expect(await storedTrigger(au.id)).toEqual({ type: 'event', cron: null });
  });

  it('infers a scheduled trigger from cronExpression or from the instructions', async () => {
    const byCron = await create(a, { name: 'n', instructions: 'Summarise the inbox', cronExpression: '*/15 * * * *' });
    expect(await storedTrigger(byCron.id)).toEqual({ type: 'scheduled', cron: '*/15 * * * *' });

    const byWords = await create(a, { name: 'n', instructions: 'Every Monday morning, send the weekly report', cronExpression: '0 8 * * 1' });
    expect(await storedTrigger(byWords.id)).toMatchObject({ type: 'scheduled' });

    // Schedule wording without a cron expression: scheduled, and evaluation infers the cron from the words.
    const noCron = await create(a, { name: 'n', instructions: 'Send a summary every day at 9am' });
    expect(await storedTrigger(noCron.id)).toEqual({ type: 'scheduled', cron: null });
    const asEvent = await create(a, { name: 'n', instructions: 'Send a summary every day at 9am', triggerType: 'event' });
    expect(await storedTrigger(asEvent.id)).toEqual({ type: 'event', cron: null });

    // "every time" is not a schedule.
    const event = await create(a, { name: 'n', instructions: 'Every time a message arrives from a VIP, notify me' });
    expect(await storedTrigger(event.id)).toMatchObject({ type: 'event' });
  });

  it('validates every rule of the create body', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ instructions: 'x' }, 'name'],
      [{ name: 'x' }, 'instructions'],
      [{ name: '', instructions: 'x' }, 'name'],
      [{ name: 'x', instructions: '' }, 'instructions'],
      [{ name: 'x', instructions: 'x', currentExecutions: -1 }, 'currentExecutions'],
      [{ name: 'x', instructions: 'x', currentExecutions: 1.5 }, 'currentExecutions'],
      [{ name: 'x', instructions: 'x', maxExecutions: 'ten' }, 'maxExecutions'],
      [{ name: 'x', instructions: 'x', status: 'running' }, 'status'],
      [{ name: 'x', instructions: 'x', triggerType: 'manual' }, 'triggerType'],
      [{ name: 'x', instructions: 'x', triggerType: 'scheduled', cronExpression: 'every day' }, 'cronExpression'],
      [{ name: 'x', instructions: 'x', cronExpression: '61 * * * *' }, 'cronExpression'],
      [{ name: 'x', instructions: 'x', cronExpression: '* *' }, 'cronExpression'],
      [{ name: 'x', instructions: 'x', cronExpression: '' }, 'cronExpression'],
      [{ name: 'x', instructions: 'x', triggerType: 'event', cronExpression: '0 9 * * *' }, 'cronExpression'],
      [{ name: 'x', instructions: 'x', triggerEvent: 'nodots' }, 'triggerEvent'],
      [{ name: 'x', instructions: 'x', groupId: 'not-a-uuid' }, 'groupId'],
      [{ name: 'x', instructions: 'x', condition: 'always' }, 'condition'],
      [{ name: 'x', instructions: 'x', enabled: 'yes' }, 'enabled'],
      [{ name: 'x', instructions: 'x', expiresAt: 'tomorrow' }, 'expiresAt'],
      [{ name: 'x', instructions: 'x', groupMetadata: { tags: 'a' } }, 'groupMetadata'],
      [{ name: 'x', instructions: 'x', groupMetadata: { purpose: 1 } }, 'groupMetadata'],
      [{ name: 'x', instructions: 'x', groupMetadata: { other: 'x' } }, 'groupMetadata'],
    ];
    const before = await credits(a);
    for (const [body, field] of cases) {
      const res = await a.request('POST', '/v1/automations', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json.error.code).toBe('VALIDATION_ERROR');
      const node = res.json.error.details.properties[field];
      expect(node, JSON.stringify(body)).toBeDefined();
      expect(node.errors.length > 0 || Object.keys(node.properties ?? {}).length > 0, JSON.stringify(body)).toBe(true);
    }
    const extra = await a.request('POST', '/v1/automations', { name: 'x', instructions: 'x', permissions: {} });
    expect(extra.status).toBe(400);
    expect(extra.json.error.details.errors[0]).toMatch(/permissions/);
    // A refused request costs nothing.
    expect(await credits(a)).toBe(before);

    // The valid edges.
    await create(a, { name: 'x', instructions: 'x', currentExecutions: 0 });
    await create(a, { name: 'x', instructions: 'x', cronExpression: '0 0 9 * * 1-5' });
    await create(a, { name: 'x', instructions: 'x', cronExpression: '@daily' });
    for (const status of ['draft', 'pending_evaluation', 'evaluation_failed', 'code_generation_failed', 'pending_approval', 'active', 'paused', 'completed', 'expired', 'failed', 'archived']) {
      expect((await create(a, { name: 'x', instructions: 'x', status })).status).toBe(status);
    }
  });

  it('debits 1 credit per create, in the same transaction; with 0 credits: 402 and nothing written', async () => {
    const before = await credits(a);
    await create(a, { name: 'n', instructions: 'x' });
    expect(await credits(a)).toBe(before - 1);

    const broke = await t.tenant({ credits: 0 });
    const res = await broke.request('POST', '/v1/automations', { name: 'n', instructions: 'x' });
    expect(res.status).toBe(402);
    expect(res.json.error.code).toBe('INSUFFICIENT_CREDITS');
    expect(await rowCount(broke)).toBe(0);
    expect(await credits(broke)).toBe(0);

    // The last credit buys exactly one automation.
    const one = await t.tenant({ credits: 1 });
    expect((await one.request('POST', '/v1/automations', { name: 'n', instructions: 'x' })).status).toBe(201);
    expect((await one.request('POST', '/v1/automations', { name: 'n', instructions: 'x' })).status).toBe(402);
    expect(await rowCount(one)).toBe(1);
    expect(await credits(one)).toBe(0);
  });

  it('updates without cost and keeps the trigger consistent', async () => {
    const au = await create(a, { name: 'n', instructions: 'x' });
    const before = await credits(a);
    const res = await a.request('PATCH', `/v1/automations/${au.id}`, { description: 'now described', enabled: false, currentExecutions: 7 });
    expect(res.status).toBe(200);
    expect(res.json.data).toMatchObject({ description: 'now described', enabled: false, currentExecutions: 7, name: 'n' });
    expect(await credits(a)).toBe(before);

    // currentExecutions >= 0 still holds; bad values change nothing.
    const neg = await a.request('PATCH', `/v1/automations/${au.id}`, { currentExecutions: -1 });
    expect(neg.status).toBe(400);
    expect(neg.json.error.details.properties.currentExecutions.errors).toHaveLength(1);
    expect((await a.request('PATCH', `/v1/automations/${au.id}`, { status: 'bogus' })).status).toBe(400);
    expect((await a.request('PATCH', `/v1/automations/${au.id}`, { name: '' })).status).toBe(400);
    expect((await a.request('GET', `/v1/automations/${au.id}`)).json.data.currentExecutions).toBe(7);

    // event -> scheduled needs a cron; sending one switches the trigger.
    expect((await a.request('PATCH', `/v1/automations/${au.id}`, { triggerType: 'scheduled' })).status).toBe(400);
    const sched = await a.request('PATCH', `/v1/automations/${au.id}`, { cronExpression: '0 7 * * *' });
    expect(sched.status).toBe(200);
    expect(sched.json.data).not.toHaveProperty('triggerType');
    expect(await storedTrigger(au.id)).toEqual({ type: 'scheduled', cron: '0 7 * * *' });
    expect((await a.request('PATCH', `/v1/automations/${au.id}`, { cronExpression: null })).status).toBe(400);
    expect((await a.request('PATCH', `/v1/automations/${au.id}`, { cronExpression: 'nope' })).status).toBe(400);
    // scheduled -> event clears the cron.
    const ev = await a.request('PATCH', `/v1/automations/${au.id}`, { triggerType: 'event' });
    expect(ev.status).toBe(200);
    expect(ev.json.data.cronExpression).toBeNull();
    expect(await storedTrigger(au.id)).toEqual({ type: 'event', cron: null });
  });

  it('keeps organizations apart: a foreign automation is a 404 and stays unchanged', async () => {
    const au = await create(a, { name: 'Private', instructions: 'x' });
    expect((await b.request('GET', `/v1/automations/${au.id}`)).status).toBe(404);
    expect((await b.request('PATCH', `/v1/automations/${au.id}`, { name: 'Hacked' })).status).toBe(404);
    expect((await b.request('DELETE', `/v1/automations/${au.id}`)).status).toBe(404);
    const theirs = (await b.request('GET', '/v1/automations?limit=100')).json.data as { id: string }[];
    expect(theirs.map((x) => x.id)).not.toContain(au.id);
    expect((await a.request('GET', `/v1/automations/${au.id}`)).json.data.name).toBe('Private');
    expect((await a.request('GET', '/v1/automations/not-a-uuid')).status).toBe(400);
  });

  it('answers 401 without a key and 403 without the permission (and debits nothing)', async () => {
    const none = await t.app.inject({ method: 'POST', url: '/v1/automations', payload: { name: 'n', instructions: 'x' } });
    expect(none.statusCode).toBe(401);
    expect(JSON.parse(none.body).error.code).toBe('UNAUTHORIZED');
    const au = await create(a, { name: 'n', instructions: 'x' });
    const reader = await a.keyWith(['automations:read']);
    expect((await reader.request('GET', '/v1/automations')).status).toBe(200);
    expect((await reader.request('GET', `/v1/automations/${au.id}`)).status).toBe(200);
    const before = await credits(a);
    const count = await rowCount(a);
    for (const [method, url, body] of [
      ['POST', '/v1/automations', { name: 'n', instructions: 'x' }],
      ['PATCH', `/v1/automations/${au.id}`, { name: 'x' }],
      ['DELETE', `/v1/automations/${au.id}`, undefined],
    ] as const) {
      const denied = await reader.request(method, url, body);
      expect(denied.status).toBe(403);
      expect(denied.json.error.code).toBe('FORBIDDEN');
    }
    expect(await credits(a)).toBe(before);
    expect(await rowCount(a)).toBe(count);
    expect((await (await a.keyWith(['folders:read'])).request('GET', '/v1/automations')).status).toBe(403);
  });
});
