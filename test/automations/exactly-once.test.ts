import { eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { revokeApiKey } from '../../src/accounts/accounts.js';
import { openDatabase, type Database } from '../../src/db/client.js';
import { automationExecutions, automations } from '../../src/db/schema.js';
import { builtinEvaluator } from '../../src/workers/evaluator/deterministic.js';
import { createAutomationEngine, type AutomationEngine } from '../../src/workers/automation-engine.js';
import { createTestApp, type Tenant, type TestApp } from '../helpers/app.js';
import { testDbKind } from '../helpers/database.js';

/**
 * Two engines on two connection pools of one PostgreSQL database stand for two server processes: every
 * (automation, event) runs once and every cron tick fires once, however their passes interleave.
 */
describe.runIf(testDbKind === 'postgres')('exactly once with two engines on one PostgreSQL database', () => {
  let fixed: Date | null = null;
  const clock = () => fixed ?? new Date();
  const silent = { error: () => {}, warn: () => {} };
  let t: TestApp;
  let second: Database;
  let a: Tenant;
  let engines: AutomationEngine[];

  beforeAll(async () => {
    t = await createTestApp({ clock });
    second = await openDatabase({ url: (t.database as Database & { url: string }).url, poolSize: 5 });
    a = await t.tenant({ credits: 100 });
    engines = [t.database, second].map((d) => createAutomationEngine({ db: d.db, evaluator: builtinEvaluator, clock, log: silent }));
  });
  afterAll(async () => {
    await second?.close();
    await t?.close();
  });

  /** Both engines, side by side, until neither finds work. */
  async function drain() {
    for (;;) {
      const done = await Promise.all(engines.map((e) => e.runOnce()));
      if (done.every((n) => n === 0)) return;
    }
  }

  it('runs an event-triggered automation once per event', async () => {
    const res = await a.request('POST', '/v1/automations', { name: 'Read all', instructions: 'When a new email arrives, mark it as read', status: 'active' });
    expect(res.status).toBe(201);
    const id = res.json.data.id as string;
    await drain();
    expect((await a.request('GET', `/v1/automations/${id}`)).json.data.status).toBe('active');

    const messageIds: string[] = [];
    for (let i = 0; i < 60; i++) {
      const m = await a.request('POST', '/v1/messages', { direction: 'incoming', type: 'email', text: `n${i}` });
      messageIds.push(m.json.data.id);
    }
    await drain();

    const runs = await t.database.db.select().from(automationExecutions).where(eq(automationExecutions.automationId, id));
    expect(runs).toHaveLength(60);
    expect(new Set(runs.map((r) => r.eventId)).size).toBe(60);
    expect(runs.every((r) => r.status === 'succeeded')).toBe(true);
    const [row] = await t.database.db.select().from(automations).where(eq(automations.id, id));
    expect(row!.currentExecutions).toBe(60);
    const unread = await t.database.db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM messages WHERE organization_id = ${a.orgId} AND read_at IS NULL`);
    expect(unread.rows[0]!.n).toBe(0);
  });

  it('fires each cron tick once', async () => {
    fixed = new Date('2032-05-01T10:00:30Z');
    const res = await a.request('POST', '/v1/automations', { name: 'Minutely', instructions: 'Every minute, write a summary of the messages since the last run', status: 'active' });
    const id = res.json.data.id as string;
    await drain();
    expect((await a.request('GET', `/v1/automations/${id}`)).json.data).toMatchObject({ status: 'active', cronExpression: '* * * * *' });
    for (let minute = 1; minute <= 5; minute++) {
      fixed = new Date(Date.parse('2032-05-01T10:00:30Z') + minute * 60_000);
      await drain();
    }
    const runs = await t.database.db.select().from(automationExecutions).where(eq(automationExecutions.automationId, id));
    expect(runs.map((r) => r.scheduledFor!.toISOString()).sort()).toEqual(['10:01', '10:02', '10:03', '10:04', '10:05'].map((m) => `2032-05-01T${m}:00.000Z`));
    fixed = null;
  });

  it('a key revoked through another process stops the next run, whichever engine takes it', async () => {
    // An organization of its own: the automations above would read the messages too.
    const org = await t.tenant({ credits: 100 });
    const creator = await org.keyWith(['*']);
    const body = {
      name: 'Read on arrival',
      instructions: 'Mark arriving mail read',
      triggerEvent: 'message.received',
      actions: [{ operation: 'messages.update', input: { id: '{{event.resourceId}}', readAt: '{{now}}' } }],
    };
    const id = (await creator.request('POST', '/v1/automations', body)).json.data.id as string;
    await drain();
    expect((await creator.request('POST', `/v1/automations/${id}/approve`)).status).toBe(200);
    const first = (await org.request('POST', '/v1/messages', { direction: 'incoming', type: 'email', text: 'before' })).json.data.id as string;
    await drain();
    expect((await org.request('GET', `/v1/messages/${first}`)).json.data.readAt).not.toBeNull();

    await revokeApiKey(second.db, creator.keyId);
    const later = (await org.request('POST', '/v1/messages', { direction: 'incoming', type: 'email', text: 'after' })).json.data.id as string;
    await drain();
    expect((await org.request('GET', `/v1/messages/${later}`)).json.data.readAt).toBeNull();
    expect((await org.request('GET', `/v1/automations/${id}`)).json.data).toMatchObject({ status: 'paused', statusReason: expect.stringMatching(/revoked/) });
  });

  it('the fan-out cap of one originating write holds with two engines dispatching side by side', async () => {
    const org = await t.tenant({ credits: 100 });
    for (let i = 0; i < 3; i++) {
      const body = {
        name: `Breeder ${i}`,
        instructions: 'Three contacts per new contact',
        triggerEvent: 'contact.created',
        actions: [0, 1, 2].map((n) => ({ operation: 'contacts.create', input: { name: `Child ${i}.${n}` } })),
      };
      const id = (await org.request('POST', '/v1/automations', body)).json.data.id as string;
      await drain();
      expect((await org.request('POST', `/v1/automations/${id}/approve`)).status).toBe(200);
    }
    await org.request('POST', '/v1/contacts', { name: 'Seed' });
    await drain();
    const runs = await t.database.db.select().from(automationExecutions).where(eq(automationExecutions.organizationId, org.orgId));
    expect(runs.filter((r) => r.status !== 'skipped')).toHaveLength(50);
  });
});
