import { and, eq, sql } from 'drizzle-orm';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { revokeApiKey, setUserDisabled, setUserPassword } from '../../src/accounts/accounts.js';
import { automationExecutions, automations } from '../../src/db/schema.js';
import { revokeGrant, setGrantCategories } from '../../src/oauth/grants.js';
import { DEFAULT_AUTOMATION_LIMITS, type AutomationEngine } from '../../src/workers/automation-engine.js';
import { ok, type Tenant } from '../helpers/app.js';
import { approveOnPage } from '../helpers/approval-page.js';
import { mintToken, v1Client, type LiveApp } from '../mcp/helpers.js';
import { engineFor, useLiveEngine } from './live-engine.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const live = useLiveEngine(10_000);
let t: LiveApp;
let a: Tenant;
let engine: AutomationEngine;
beforeAll(() => void ({ t, a, engine } = live));
// Each test starts without the automations of the ones before (they would act on the same contacts).
afterEach(async () => {
  await t.database.db.update(automations).set({ deletedAt: new Date() }).where(eq(automations.organizationId, a.orgId));
});

const get = async (id: string) => ok(await a.request('GET', `/v1/automations/${id}`));
const contact = async (name: string, who: Tenant = a) => ok(await who.request('POST', '/v1/contacts', { name }), 201);
const contactExists = async (id: string) => (await a.request('GET', `/v1/contacts/${id}`)).status === 200;
const runs = async (id: string) => t.database.db.select().from(automationExecutions).where(eq(automationExecutions.automationId, id));

/** A plan that deletes the contact of every `contact.updated` event whose name is "Doomed": written by a person. */
const deleter = (condition: Json = { field: 'name', operator: 'equals', value: 'Doomed' }) => ({
  name: 'Delete doomed contacts',
  instructions: 'Delete a contact when it is renamed Doomed',
  triggerEvent: 'contact.updated',
  condition,
  actions: [{ operation: 'contacts.delete', input: { id: '{{event.resourceId}}' } }],
});

/** Creates an automation as `who`, lets the engine check its plan and has `approver` approve it. */
async function activeAutomation(who: Tenant, body: Json, approver: Tenant = who): Promise<Json> {
  const created = await ok(await who.request('POST', '/v1/automations', body), 201);
  await engine.runOnce();
  expect((await get(created.id)).status).toBe('pending_approval');
  return ok(await approver.request('POST', `/v1/automations/${created.id}/approve`));
}

describe('who may make an automation act', () => {
  it('a change to the condition by a key without the plan\'s permissions sends it back, refused, and the plan never runs with it', async () => {
    const onlyAutomations = await a.keyWith(['automations:read', 'automations:write']);
    const au = await activeAutomation(a, deleter());
    expect(au).toMatchObject({ status: 'active', actsFor: { type: 'api_key', id: a.keyId, grantId: null } });

    const patched = await ok(await onlyAutomations.request('PATCH', `/v1/automations/${au.id}`, { condition: { field: 'id', operator: 'exists' } }));
    expect(patched).toMatchObject({ status: 'pending_evaluation', planSummary: null, actsFor: { type: 'api_key', id: onlyAutomations.keyId } });
    await engine.runOnce();
    const refused = await get(au.id);
    expect(refused.status).toBe('code_generation_failed');
    expect(refused.statusReason).toMatch(/contacts:write/);

    // An ordinary contact update no longer deletes anything.
    const c = await contact('Someone');
    await ok(await a.request('PATCH', `/v1/contacts/${c.id}`, { name: 'Someone else' }));
    await engine.runOnce();
    expect(await contactExists(c.id)).toBe(true);
  });

  it('every field of what it does or when it fires sends an active automation back to approval, checked against who changed it', async () => {
    const changes: Json[] = [
      { condition: { field: 'name', operator: 'equals', value: 'Gone' } },
      { triggerEvent: 'contact.created' },
      { triggerType: 'scheduled', cronExpression: '0 9 * * *' },
      { cronExpression: '0 9 * * *' },
      { actions: [{ operation: 'contacts.delete', input: { id: '{{event.data.id}}' } }] },
      { instructions: 'Delete a contact when it is renamed Gone' },
    ];
    for (const change of changes) {
      const au = await activeAutomation(a, deleter());
      const other = await a.keyWith(['*']);
      const patched = await ok(await other.request('PATCH', `/v1/automations/${au.id}`, { ...change, status: 'active' }));
      expect(patched.status, JSON.stringify(change)).toBe('pending_evaluation');
      expect(patched.actsFor.id).toBe(other.keyId);
      await engine.runOnce();
      expect((await get(au.id)).status, JSON.stringify(change)).toMatch(/^(pending_approval|code_generation_failed|evaluation_failed)$/);
    }
    // The same values again change nothing: it stays active.
    const au = await activeAutomation(a, deleter());
    const same = await ok(await a.request('PATCH', `/v1/automations/${au.id}`, { condition: deleter().condition, triggerEvent: 'contact.updated', actions: deleter().actions, name: 'Renamed' }));
    expect(same.status).toBe('active');
  });

  it('approve and resume need every permission the plan uses: 403 naming the missing one', async () => {
    const onlyAutomations = await a.keyWith(['automations:read', 'automations:write']);
    const created = await ok(await a.request('POST', '/v1/automations', deleter()), 201);
    await engine.runOnce();
    const denied = await onlyAutomations.request('POST', `/v1/automations/${created.id}/approve`);
    expect(denied.status).toBe(403);
    expect(denied.json.error.code).toBe('FORBIDDEN');
    expect(denied.json.error.message).toMatch(/"contacts:write"/);
    // Nor through PATCH status.
    expect((await onlyAutomations.request('PATCH', `/v1/automations/${created.id}`, { status: 'active' })).status).toBe(403);
    expect((await get(created.id)).status).toBe('pending_approval');

    await ok(await a.request('POST', `/v1/automations/${created.id}/approve`));
    await ok(await a.request('POST', `/v1/automations/${created.id}/pause`));
    const resume = await onlyAutomations.request('POST', `/v1/automations/${created.id}/resume`);
    expect(resume.status).toBe(403);
    expect(resume.json.error.message).toMatch(/"contacts:write"/);
    expect((await get(created.id)).status).toBe('paused');
  });

  it('a revoked API key pauses its automations before their next run, which does not happen; a holder of the permissions resumes it', async () => {
    const creator = await a.keyWith(['*']);
    const au = await activeAutomation(creator, deleter());
    await revokeApiKey(t.database.db, creator.keyId);

    const c = await contact('Victim');
    await ok(await a.request('PATCH', `/v1/contacts/${c.id}`, { name: 'Doomed' }));
    await engine.runOnce();
    expect(await contactExists(c.id)).toBe(true);
    const paused = await get(au.id);
    expect(paused.status).toBe('paused');
    expect(paused.statusReason).toMatch(/API key it acts for was revoked/);
    const [run] = await runs(au.id);
    expect(run).toMatchObject({ status: 'skipped', error: expect.stringMatching(/revoked/) });

    const resumed = await ok(await a.request('POST', `/v1/automations/${au.id}/resume`));
    expect(resumed).toMatchObject({ status: 'active', statusReason: null, actsFor: { type: 'api_key', id: a.keyId } });
    const d = await contact('Next');
    await ok(await a.request('PATCH', `/v1/contacts/${d.id}`, { name: 'Doomed' }));
    await engine.runOnce();
    expect(await contactExists(d.id)).toBe(false);
  });

  it('an automation that records no credential acts for the API key that created it, else is paused', async () => {
    const byKey = await activeAutomation(a, deleter());
    const byUnknown = await activeAutomation(a, deleter({ field: 'name', operator: 'equals', value: 'Doomed too' }));
    const legacy = { actsForType: null, actsForId: null, actsForGrantId: null, actsForPasswordStamp: null };
    await t.database.db.update(automations).set(legacy).where(eq(automations.id, byKey.id));
    await t.database.db.update(automations).set({ ...legacy, createdBy: '3f1c1b2e-8a4d-4c6e-9f0a-1b2c3d4e5f60' }).where(eq(automations.id, byUnknown.id));
    expect((await get(byKey.id)).actsFor).toBeNull();

    const c = await contact('Legacy');
    await ok(await a.request('PATCH', `/v1/contacts/${c.id}`, { name: 'Doomed' }));
    const d = await contact('Legacy too');
    await ok(await a.request('PATCH', `/v1/contacts/${d.id}`, { name: 'Doomed too' }));
    await engine.runOnce();
    expect(await contactExists(c.id)).toBe(false);
    expect(await contactExists(d.id)).toBe(true);
    expect(await get(byUnknown.id)).toMatchObject({ status: 'paused', statusReason: expect.stringMatching(/records no credential/) });
  });

  describe('an automation set up by a person through an OAuth grant', () => {
    /** A person's automation made through MCP and approved by them on the approval page; answers it (active) with the grant and user. */
    async function personal() {
      const person = await a.user();
      const minted = await mintToken(t, a, { userId: person.id });
      const client = await v1Client(t.origin, minted.token, 'mcp');
      try {
        const res = await client.callTool({ name: 'automations_write', arguments: { method: 'create', ...deleter() } });
        expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
        const created = (res.structuredContent as Json).data as Json;
        expect(created.actsFor).toEqual({ type: 'user', id: minted.userId, grantId: minted.grant.id });
        await engine.runOnce();
        // The token only asks; the person approves on the page, and the automation acts for their grant.
        const asked = await client.callTool({ name: 'automations_write', arguments: { method: 'approve', id: created.id } });
        expect(asked.isError, JSON.stringify(asked.content)).toBeFalsy();
        expect(((asked.structuredContent as Json).data as Json).status).toBe('pending_approval');
        expect((await approveOnPage(t.app, person, created.id)).statusCode).toBe(303);
        expect(await get(created.id)).toMatchObject({ status: 'active', actsFor: { type: 'user', id: minted.userId, grantId: minted.grant.id } });
        return { id: created.id as string, ...minted };
      } finally {
        await client.close();
      }
    }

    /** Renames a contact to match the plan and runs the engine: answers whether the contact survived. */
    async function trigger() {
      const c = await contact('Person target');
      await ok(await a.request('PATCH', `/v1/contacts/${c.id}`, { name: 'Doomed' }));
      await engine.runOnce();
      return contactExists(c.id);
    }

    it('runs while the person and grant stand', async () => {
      await personal();
      expect(await trigger()).toBe(false);
    });

    const cases: [string, (p: Awaited<ReturnType<typeof personal>>) => Promise<unknown>, RegExp][] = [
      ['the person is disabled', (p) => setUserDisabled(t.database.db, p.userId, true), /person it acts for was disabled/],
      ['the password is changed', (p) => setUserPassword(t.database.db, p.userId, 'a brand new passphrase'), /password .* was changed/],
      ['the grant is revoked', (p) => revokeGrant(t.database.db, p.grant.id, () => new Date()), /grant it acts for was revoked/],
      ['the grant is narrowed', (p) => setGrantCategories(t.database.db, p.grant.id, ['automations', 'messages'], () => new Date()), /no longer holds "contacts:write"/],
      ['the grant becomes read-only', (p) => setGrantCategories(t.database.db, p.grant.id, ['automations', 'contacts'], () => new Date(), true), /no longer holds "contacts:write"/],
    ];
    for (const [what, act, reason] of cases) {
      it(`is paused at its next run when ${what}`, async () => {
        const p = await personal();
        await act(p);
        expect(await trigger()).toBe(true);
        const row = await get(p.id);
        expect(row.status).toBe('paused');
        expect(row.statusReason).toMatch(reason);
      });
    }
  });
});

describe('fan-out caps', () => {
  it('caps the runs one originating write causes at 50 (it was 129), recording the skipped ones with the reason', async () => {
    const org = await t.tenant({ credits: 1000 });
    const capped = engine;
    // Three automations of three steps on contact.created: each new contact triggers all three again.
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const body = {
        name: `Breeder ${i}`,
        instructions: 'Create three contacts for every new contact',
        triggerEvent: 'contact.created',
        actions: [0, 1, 2].map((n) => ({ operation: 'contacts.create', input: { name: `Child ${i}.${n}` } })),
      };
      const created = await ok(await org.request('POST', '/v1/automations', body), 201);
      ids.push(created.id);
    }
    await capped.runOnce();
    for (const id of ids) await ok(await org.request('POST', `/v1/automations/${id}/approve`));

    await contact('Seed', org);
    await capped.runOnce();
    const all = await t.database.db.select().from(automationExecutions).where(eq(automationExecutions.organizationId, org.orgId));
    const ran = all.filter((r) => r.status !== 'skipped');
    expect(DEFAULT_AUTOMATION_LIMITS.executionsPerOrigin).toBe(50);
    expect(ran).toHaveLength(50);
    expect(new Set(ran.map((r) => r.originId)).size).toBe(1);
    const skipped = all.filter((r) => r.status === 'skipped');
    expect(skipped.length).toBeGreaterThan(0);
    for (const r of skipped) expect(r.error).toMatch(/cap per originating event/);
    // The skipped runs are visible with their reason.
    const listed = await ok(await org.request('GET', `/v1/automations/${skipped[0]!.automationId}/executions?limit=100`));
    expect(listed.some((e: Json) => e.status === 'skipped' && /cap per originating event/.test(e.error))).toBe(true);
  });

  it('caps the runs of an organization per minute', async () => {
    const org = await t.tenant({ credits: 1000 });
    const capped = engineFor(t, { executionsPerOrganizationPerMinute: 2 });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const body = { name: `Tagger ${i}`, instructions: 'Mark new email read', triggerEvent: 'message.received', actions: [{ operation: 'messages.update', input: { id: '{{event.resourceId}}', readAt: '{{now}}' } }] };
      ids.push((await ok(await org.request('POST', '/v1/automations', body), 201)).id);
    }
    await capped.runOnce();
    for (const id of ids) await ok(await org.request('POST', `/v1/automations/${id}/approve`));
    await ok(await org.request('POST', '/v1/messages', { direction: 'incoming', type: 'email', text: 'Hi' }), 201);
    await capped.runOnce();
    const all = await t.database.db.select().from(automationExecutions).where(eq(automationExecutions.organizationId, org.orgId));
    expect(all.filter((r) => r.status === 'succeeded')).toHaveLength(2);
    const skipped = all.filter((r) => r.status === 'skipped');
    expect(skipped).toHaveLength(1);
    expect(skipped[0]!.error).toMatch(/cap per organization per minute/);
  });

  it('caps the automations of an organization at 100: the next create is a 400 and costs nothing', async () => {
    const org = await t.tenant({ credits: 1000 });
    const base = { organizationId: org.orgId, name: 'Filler', instructions: 'Filler', triggerEvent: 'automation.pending', triggerType: 'event', createdBy: org.keyId, status: 'draft' };
    await t.database.db.insert(automations).values(Array.from({ length: 99 }, () => base));
    await ok(await org.request('POST', '/v1/automations', { name: 'Hundredth', instructions: 'When a new email arrives, mark it as read' }), 201);
    const refused = await org.request('POST', '/v1/automations', { name: 'One too many', instructions: 'When a new email arrives, mark it as read' });
    expect(refused.status).toBe(400);
    expect(refused.json.error.message).toMatch(/at most 100 automations/);
    const count = await t.database.db
      .select({ n: sql<number>`count(*)::int` })
      .from(automations)
      .where(and(eq(automations.organizationId, org.orgId)));
    expect(Number(count[0]!.n)).toBe(100);
    // A deleted one frees its place.
    const [one] = await t.database.db.select({ id: automations.id }).from(automations).where(eq(automations.organizationId, org.orgId)).limit(1);
    await ok(await org.request('DELETE', `/v1/automations/${one!.id}`));
    await ok(await org.request('POST', '/v1/automations', { name: 'Fits again', instructions: 'When a new email arrives, mark it as read' }), 201);
  });
});
