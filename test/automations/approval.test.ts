import { and, eq } from 'drizzle-orm';
import { Client as ClientV2, SSEClientTransport as SseTransportV2, StreamableHTTPClientTransport as HttpTransportV2 } from '@modelcontextprotocol/client';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { automations, events, oauthGrants, oauthSessions } from '../../src/db/schema.js';
import { setGrantCategories } from '../../src/oauth/grants.js';
import type { AutomationEngine } from '../../src/workers/automation-engine.js';
import { ok, type Tenant } from '../helpers/app.js';
import { AccountBrowser } from '../helpers/approval-page.js';
import { mintToken, v1Client, type LiveApp, type Minted } from '../mcp/helpers.js';
import { useLiveEngine } from './live-engine.js';

/**
 * Approval by a person (CONTRACT §8): an OAuth token (an assistant over MCP) only asks, a person decides on
 * the approval page, an API key approves directly; and sending is a consent of its own.
 */

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const live = useLiveEngine(10_000);
let t: LiveApp;
let a: Tenant;
let engine: AutomationEngine;
beforeAll(() => void ({ t, a, engine } = live));
afterEach(async () => {
  await t.database.db.update(automations).set({ deletedAt: new Date() }).where(eq(automations.organizationId, a.orgId));
});

const get = async (id: string) => ok(await a.request('GET', `/v1/automations/${id}`));

const deleter = {
  name: 'Delete doomed contacts',
  instructions: 'Delete a contact when it is renamed Doomed',
  triggerEvent: 'contact.updated',
  condition: { field: 'name', operator: 'equals', value: 'Doomed' },
  actions: [{ operation: 'contacts.delete', input: { id: '{{event.resourceId}}' } }],
};
const forwarder = {
  name: 'Forward everything',
  instructions: 'Forward every email to x@elsewhere.example',
  triggerEvent: 'message.received',
  actions: [{ operation: 'messages.forward', input: { id: '{{event.resourceId}}', to: ['x@elsewhere.example'] } }],
};

/** A person of the tenant with an assistant connected (every category, no sending consent unless asked). */
async function assistant(tenant: Tenant = a, opts: Parameters<typeof mintToken>[2] = {}) {
  const person = await tenant.user();
  const minted = await mintToken(t, tenant, { userId: person.id, ...opts });
  return { person, minted };
}

async function call(minted: Minted, tool: string, args: Json) {
  const client = await v1Client(t.origin, minted.token, 'mcp');
  try {
    return (await client.callTool({ name: tool, arguments: args })) as { isError?: boolean; content: { type: string; text: string }[]; structuredContent?: Json };
  } finally {
    await client.close();
  }
}

/** An automation created through the assistant and evaluated: "pending_approval". */
async function pending(minted: Minted, body: Json = deleter): Promise<Json> {
  const res = await call(minted, 'automations_write', { method: 'create', ...body });
  expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
  const id = (res.structuredContent!.data as Json).id as string;
  await engine.runOnce();
  const row = await get(id);
  expect(row.status, row.statusReason).toBe('pending_approval');
  return row;
}

/** Renames a contact to match the deleter and runs the engine: answers whether the contact was deleted. */
async function deleterRan() {
  const c = await ok(await a.request('POST', '/v1/contacts', { name: 'Target' }), 201);
  await ok(await a.request('PATCH', `/v1/contacts/${c.id}`, { name: 'Doomed' }));
  await engine.runOnce();
  return (await a.request('GET', `/v1/contacts/${c.id}`)).status === 404;
}

describe('an OAuth token alone never makes an automation active', () => {
  it('approve, PATCH status "active", a create as "active" and resume answer the link and keep the status', async () => {
    const { person, minted } = await assistant();
    const au = await pending(minted);
    const link = `${t.origin}/account/automations/${au.id}`;

    const asked = await call(minted, 'automations_write', { method: 'approve', id: au.id });
    expect(asked.isError).toBeFalsy();
    expect(asked.structuredContent!.data).toMatchObject({ id: au.id, status: 'pending_approval', approvalUrl: link, approvedBy: null, approvedAt: null });
    expect(asked.content.map((c) => c.text).join('\n')).toContain(`approve it at ${link}`);

    const patched = await call(minted, 'automations_write', { method: 'update', id: au.id, status: 'active', name: 'Renamed by the assistant' });
    expect(patched.structuredContent!.data).toMatchObject({ status: 'pending_approval', approvalUrl: link, name: 'Renamed by the assistant' });
    expect(await get(au.id)).toMatchObject({ status: 'pending_approval', actsFor: { type: 'user', id: person.id } });
    expect(await deleterRan()).toBe(false);

    const created = await call(minted, 'automations_write', { method: 'create', ...deleter, status: 'active' });
    const createdId = (created.structuredContent!.data as Json).id as string;
    expect(created.structuredContent!.data).toMatchObject({ status: 'pending_evaluation', approvalUrl: `${t.origin}/account/automations/${createdId}` });
    await engine.runOnce();
    expect((await get(createdId)).status).toBe('pending_approval');
    expect(await deleterRan()).toBe(false);

    // Approved by the person, paused by the assistant (stopping needs nobody), resumed only by a person again.
    const browser = new AccountBrowser(t.app);
    const page = await browser.signIn(link, person);
    expect((await browser.submit(page, `/account/automations/${au.id}/approve`)).statusCode).toBe(303);
    const paused = await call(minted, 'automations_write', { method: 'pause', id: au.id });
    expect(paused.structuredContent!.data).toMatchObject({ status: 'paused' });
    const resumed = await call(minted, 'automations_write', { method: 'resume', id: au.id });
    expect(resumed.structuredContent!.data).toMatchObject({ status: 'paused', approvalUrl: link });
    expect(await deleterRan()).toBe(false);

    // Disabled by a person while active, enabled again only by a person (an "Enable" on the page).
    const approvedPage = await browser.get(link);
    expect((await browser.submit(approvedPage, `/account/automations/${au.id}/approve`)).statusCode).toBe(303);
    await ok(await a.request('PATCH', `/v1/automations/${au.id}`, { enabled: false }));
    const enabled = await call(minted, 'automations_write', { method: 'update', id: au.id, enabled: true });
    expect(enabled.structuredContent!.data).toMatchObject({ status: 'active', enabled: false, approvalUrl: link });
    expect(await deleterRan()).toBe(false);
    const disabledPage = await browser.get(link);
    expect(disabledPage.body).toContain('>Enable</button>');
    expect((await browser.submit(disabledPage, `/account/automations/${au.id}/approve`)).statusCode).toBe(303);
    expect(await get(au.id)).toMatchObject({ status: 'active', enabled: true, approvedBy: { type: 'user', id: person.id } });
    expect(await deleterRan()).toBe(true);
  });

  it('a token that lengthens an approved automation\'s life pauses it until a person resumes it; shortening needs nobody', async () => {
    const { person, minted } = await assistant();
    const expiresAt = new Date(Date.now() + 86_400_000).toISOString();
    const au = await pending(minted, { ...deleter, expiresAt, maxExecutions: 5 });
    const link = `${t.origin}/account/automations/${au.id}`;
    const browser = new AccountBrowser(t.app);
    const page = await browser.signIn(link, person);
    expect((await browser.submit(page, `/account/automations/${au.id}/approve`)).statusCode).toBe(303);
    expect((await get(au.id)).status).toBe('active');

    // Fewer runs, an earlier end: still what the person agreed to, and more.
    const shorter = await call(minted, 'automations_write', { method: 'update', id: au.id, maxExecutions: 3, expiresAt: new Date(Date.now() + 3_600_000).toISOString() });
    expect(shorter.structuredContent!.data).toMatchObject({ status: 'active', maxExecutions: 3 });
    expect((shorter.structuredContent!.data as Json).approvalUrl).toBeUndefined();

    for (const longer of [{ maxExecutions: 50 }, { maxExecutions: null }, { expiresAt: new Date(Date.now() + 30 * 86_400_000).toISOString() }, { expiresAt: null }]) {
      const res = await call(minted, 'automations_write', { method: 'update', id: au.id, ...longer });
      expect(res.structuredContent!.data, JSON.stringify(longer)).toMatchObject({ status: 'paused', approvalUrl: link, ...longer });
      expect((await get(au.id)).statusReason).toMatch(/lengthen what a person approved/);
      expect(await deleterRan()).toBe(false);
      // The person resumes it on the page, with its new life.
      const pausedPage = await browser.get(link);
      expect((await browser.submit(pausedPage, `/account/automations/${au.id}/approve`)).statusCode).toBe(303);
      expect(await get(au.id)).toMatchObject({ status: 'active', ...longer });
    }
    // An API key changes it directly.
    expect(await ok(await a.request('PATCH', `/v1/automations/${au.id}`, { maxExecutions: 500 }))).toMatchObject({ status: 'active', maxExecutions: 500 });
  });

  describe('every change that would let an approved automation do more waits for a person through a token; an API key makes it directly', () => {
    /**
     * What changes: the patch, and what must hold before it (a run counted, a person's disable or pause).
     * `paused`: kept, and the running automation pauses until a person resumes it. `asked`: not applied
     * until a person says so (the status or `enabled` stays). `plan`: a new plan, evaluated and then
     * waiting for approval.
     */
    type Case = { patch: () => Json; before?: (id: string) => Promise<void>; outcome: 'paused' | 'asked' | 'plan'; asked?: Json };
    const runOnce = async () => expect(await deleterRan()).toBe(true);
    const disable = async (id: string) => void (await ok(await a.request('PATCH', `/v1/automations/${id}`, { enabled: false })));
    const pause = async (id: string) => void (await ok(await a.request('POST', `/v1/automations/${id}/pause`)));
    const inDays = (days: number) => new Date(Date.now() + days * 86_400_000).toISOString();
    const cases: Record<string, Case> = {
      'expiresAt later': { patch: () => ({ expiresAt: inDays(30) }), outcome: 'paused' },
      'expiresAt null (never)': { patch: () => ({ expiresAt: null }), outcome: 'paused' },
      'maxExecutions higher': { patch: () => ({ maxExecutions: 50 }), outcome: 'paused' },
      'maxExecutions null (unlimited)': { patch: () => ({ maxExecutions: null }), outcome: 'paused' },
      'currentExecutions lower (the count reset)': { before: runOnce, patch: () => ({ currentExecutions: 0 }), outcome: 'paused' },
      'maxExecutions higher with currentExecutions lower': { before: runOnce, patch: () => ({ maxExecutions: 6, currentExecutions: 0 }), outcome: 'paused' },
      'enabled true after it was disabled': { before: disable, patch: () => ({ enabled: true }), outcome: 'asked', asked: { status: 'active', enabled: false } },
      'status "active" after it was paused': { before: pause, patch: () => ({ status: 'active' }), outcome: 'asked', asked: { status: 'paused' } },
      instructions: { patch: () => ({ instructions: 'Delete a contact when it is renamed Doomed, at once' }), outcome: 'plan' },
      condition: { patch: () => ({ condition: { field: 'name', operator: 'starts_with', value: 'Doom' } }), outcome: 'plan' },
      triggerEvent: { patch: () => ({ triggerEvent: 'contact.created' }), outcome: 'plan' },
      actions: { patch: () => ({ actions: [{ operation: 'contacts.update', input: { id: '{{event.resourceId}}', notes: 'doomed' } }] }), outcome: 'plan' },
      'cronExpression (and triggerType "scheduled")': {
        patch: () => ({ triggerType: 'scheduled', cronExpression: '* * * * *', actions: [{ operation: 'contacts.create', input: { name: 'Tick' } }] }),
        outcome: 'plan',
      },
    };
    const life = () => ({ ...deleter, expiresAt: inDays(1), maxExecutions: 5 });
    let person: Awaited<ReturnType<typeof assistant>>['person'];
    let minted: Minted;
    let browser: AccountBrowser;
    let signedIn = false;
    beforeAll(async () => {
      ({ person } = await assistant());
      browser = new AccountBrowser(t.app);
    });
    // A connection of its own per test: the transport's rate limit counts per (person, app).
    beforeEach(async () => void (minted = await mintToken(t, a, { userId: person.id })));
    /** The approval page, signed in as the person (the first time through the sign-in form). */
    const open = async (link: string) => {
      const page = signedIn ? await browser.get(link) : await browser.signIn(link, person);
      signedIn = true;
      return page;
    };

    it.each(Object.entries(cases))('%s', async (_name, c) => {
      // Approved by the person on the page, as an assistant's automation is.
      const au = await pending(minted, life());
      const link = `${t.origin}/account/automations/${au.id}`;
      const first = await open(link);
      expect((await browser.submit(first, `/account/automations/${au.id}/approve`)).statusCode).toBe(303);
      expect((await get(au.id)).status).toBe('active');
      await c.before?.(au.id);

      const patch = c.patch();
      const res = await call(minted, 'automations_write', { method: 'update', id: au.id, ...patch });
      expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
      const answered = res.structuredContent!.data as Json;
      if (c.outcome === 'paused') {
        expect(answered).toMatchObject({ status: 'paused', approvalUrl: link, ...patch });
        expect((await get(au.id)).statusReason).toMatch(/lengthen what a person approved/);
      } else if (c.outcome === 'asked') {
        expect(answered).toMatchObject({ ...c.asked, approvalUrl: link });
      } else {
        expect(answered).toMatchObject({ status: 'pending_evaluation' });
        await engine.runOnce();
        expect(['pending_approval', 'code_generation_failed']).toContain((await get(au.id)).status);
      }
      expect(await deleterRan()).toBe(false);
      if (c.outcome === 'paused') {
        // The person sees the new life on the page, and resumes it with it.
        const page = await browser.get(link);
        const row = await get(au.id);
        expect(page.body).toContain(`${row.currentExecutions} run${row.currentExecutions === 1 ? '' : 's'} so far`);
        expect((await browser.submit(page, `/account/automations/${au.id}/approve`)).statusCode).toBe(303);
        expect(await get(au.id)).toMatchObject({ status: 'active', ...patch });
      }

      // An API key, the operator's own program, makes the same change directly.
      const keyed = await ok(await a.request('POST', '/v1/automations', { ...life(), name: 'Keyed', status: 'active' }), 201);
      await engine.runOnce();
      expect((await get(keyed.id)).status).toBe('active');
      await c.before?.(keyed.id);
      const direct = await ok(await a.request('PATCH', `/v1/automations/${keyed.id}`, patch));
      expect(direct.approvalUrl).toBeUndefined();
      if (c.outcome === 'plan') {
        // A new plan is checked first, then the key approves it itself.
        await engine.runOnce();
        expect(await ok(await a.request('POST', `/v1/automations/${keyed.id}/approve`))).toMatchObject({ status: 'active' });
      } else {
        expect(direct).toMatchObject({ status: 'active', enabled: true, ...patch });
      }
    });

    it('an earlier end, fewer runs left or a higher count need nobody', async () => {
      const au = await pending(minted, life());
      const link = `${t.origin}/account/automations/${au.id}`;
      const first = await open(link);
      expect((await browser.submit(first, `/account/automations/${au.id}/approve`)).statusCode).toBe(303);
      for (const shorter of [{ expiresAt: inDays(0.5) }, { maxExecutions: 4 }, { currentExecutions: 2 }, { maxExecutions: 10, currentExecutions: 8 }]) {
        const res = await call(minted, 'automations_write', { method: 'update', id: au.id, ...shorter });
        expect(res.structuredContent!.data, JSON.stringify(shorter)).toMatchObject({ status: 'active', ...shorter });
        expect((res.structuredContent!.data as Json).approvalUrl).toBeUndefined();
      }
    });
  });

  it('a client that declares URL-mode elicitation on an /sse session is also asked to open the page; one that does not is not', async () => {
    const { minted } = await assistant();
    const au = await pending(minted);
    const asked: Json[] = [];
    const connectSse = async (capabilities: Json) => {
      const client = new ClientV2({ name: 'elicitation-test', version: '1.0.0' }, { capabilities });
      if (capabilities.elicitation) client.setRequestHandler('elicitation/create', async (req) => (asked.push(req.params as Json), { action: 'accept' }));
      await client.connect(new SseTransportV2(new URL('/sse', t.origin), { requestInit: { headers: { Authorization: `Bearer ${minted.token}` } } }));
      return client;
    };
    const plain = await connectSse({});
    const before = (await plain.callTool({ name: 'automations_write', arguments: { method: 'approve', id: au.id } })) as { structuredContent?: Json };
    expect(before.structuredContent!.data).toMatchObject({ status: 'pending_approval', approvalUrl: `${t.origin}/account/automations/${au.id}` });
    await plain.close();
    expect(asked).toEqual([]);

    const eliciting = await connectSse({ elicitation: { url: {} } });
    await eliciting.callTool({ name: 'automations_write', arguments: { method: 'approve', id: au.id } });
    await expect.poll(() => asked.length, { timeout: 5000 }).toBe(1);
    expect(asked[0]).toMatchObject({ mode: 'url', url: `${t.origin}/account/automations/${au.id}`, elicitationId: expect.any(String) });
    await eliciting.close();

    // The current revision (2026-07-28) has no server-to-client request: the same client gets the link in the result.
    const modern = new ClientV2({ name: 'elicitation-test', version: '1.0.0' }, { capabilities: { elicitation: { url: {} } }, versionNegotiation: { mode: 'auto' } });
    modern.setRequestHandler('elicitation/create', async (req) => (asked.push(req.params as Json), { action: 'accept' }));
    await modern.connect(new HttpTransportV2(new URL('/mcp', t.origin), { requestInit: { headers: { Authorization: `Bearer ${minted.token}` } } }));
    const result = (await modern.callTool({ name: 'automations_write', arguments: { method: 'approve', id: au.id } })) as { isError?: boolean; structuredContent?: Json; content: { text: string }[] };
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent!.data).toMatchObject({ status: 'pending_approval', approvalUrl: `${t.origin}/account/automations/${au.id}` });
    expect(result.content.some((c) => c.text.includes(`approve it at ${t.origin}/account/automations/${au.id}`))).toBe(true);
    await modern.close();
    expect(asked).toHaveLength(1);
    expect((await get(au.id)).status).toBe('pending_approval');
  });

  it('an API key approves directly and is named as the approver', async () => {
    const created = await ok(await a.request('POST', '/v1/automations', deleter), 201);
    await engine.runOnce();
    const approved = await ok(await a.request('POST', `/v1/automations/${created.id}/approve`));
    expect(approved).toMatchObject({ status: 'active', approvedBy: { type: 'apiKey', id: a.keyId }, approvedAt: expect.any(String) });
    expect(approved.approvalUrl).toBeUndefined();
    expect(await deleterRan()).toBe(true);
  });

  it('the person approves on the page: it acts for their grant, names them and the app, and its event says who', async () => {
    const { person, minted } = await assistant();
    const au = await pending(minted);
    const browser = new AccountBrowser(t.app);
    const page = await browser.signIn(`/account/automations/${au.id}`, person);
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-security-policy']).toMatch(/default-src 'none'/);
    expect(page.body).toContain('Delete doomed contacts');
    expect(page.body).toContain('Created by');
    expect(page.body).toContain('Test client');
    const done = await browser.submit(page, `/account/automations/${au.id}/approve`);
    expect(done.statusCode).toBe(303);
    const row = await get(au.id);
    expect(row).toMatchObject({
      status: 'active',
      actsFor: { type: 'user', id: person.id, grantId: minted.grant.id },
      approvedBy: { type: 'user', id: person.id, name: person.email, client: 'Test client' },
    });
    const [event] = await t.database.db
      .select()
      .from(events)
      .where(and(eq(events.resourceId, au.id), eq(events.type, 'automation.updated'), eq(events.actorId, person.id)));
    expect(event).toMatchObject({ actorType: 'user' });
    expect(await deleterRan()).toBe(true);
  });

  it('Reject archives it with the reason; a replayed form or a second tab changes nothing', async () => {
    const { person, minted } = await assistant();
    const au = await pending(minted);
    const browser = new AccountBrowser(t.app);
    const page = await browser.signIn(`/account/automations/${au.id}`, person);
    const secondTab = await browser.get(`/account/automations/${au.id}`);
    expect((await browser.submit(page, `/account/automations/${au.id}/reject`, { reason: 'not ours to forward' })).statusCode).toBe(303);
    expect(await get(au.id)).toMatchObject({ status: 'archived', statusReason: expect.stringMatching(/Rejected by .*: not ours to forward/) });
    const [rejected] = await t.database.db
      .select()
      .from(events)
      .where(and(eq(events.resourceId, au.id), eq(events.type, 'automation.updated'), eq(events.actorId, person.id)));
    expect(rejected).toMatchObject({ actorType: 'user' });
    const replay = await browser.submit(secondTab, `/account/automations/${au.id}/approve`);
    expect(replay.statusCode).toBe(409);
    expect(replay.body).toContain('Nothing was changed');
    expect((await get(au.id)).status).toBe('archived');

    // Approved, then changed by the assistant (back to approval): the first page's form no longer counts.
    const other = await pending(minted);
    const first = await browser.get(`/account/automations/${other.id}`);
    expect((await browser.submit(first, `/account/automations/${other.id}/approve`)).statusCode).toBe(303);
    await call(minted, 'automations_write', { method: 'update', id: other.id, condition: { field: 'name', operator: 'equals', value: 'Gone' } });
    await engine.runOnce();
    expect((await get(other.id)).status).toBe('pending_approval');
    const replayed = await browser.submit(first, `/account/automations/${other.id}/approve`);
    expect(replayed.statusCode).toBe(409);
    expect(replayed.body).toContain('changed since this page was opened');
    expect((await get(other.id)).status).toBe('pending_approval');
  });
});

describe('the list of automations', () => {
  it('shows those awaiting approval first, with status, reason and last run, and pauses one', async () => {
    const { person, minted } = await assistant();
    const running = await ok(await a.request('POST', '/v1/automations', { ...deleter, name: 'Already running' }), 201);
    await engine.runOnce();
    await ok(await a.request('POST', `/v1/automations/${running.id}/approve`));
    const waiting = await pending(minted, { ...deleter, name: 'Waiting one' });
    const browser = new AccountBrowser(t.app);
    const list = await browser.signIn('/account/automations', person);
    expect(list.statusCode).toBe(200);
    expect(list.body.indexOf('Waiting one')).toBeLessThan(list.body.indexOf('Already running'));
    expect(list.body).toContain(`href="/account/automations/${waiting.id}">Review</a>`);
    expect(list.body).toContain('Last run: never');
    expect((await browser.submit(list, `/account/automations/${running.id}/pause`)).statusCode).toBe(303);
    expect((await get(running.id)).status).toBe('paused');
    const [event] = await t.database.db
      .select()
      .from(events)
      .where(and(eq(events.resourceId, running.id), eq(events.type, 'automation.updated'), eq(events.actorId, person.id)));
    expect(event).toMatchObject({ actorType: 'user' });
  });
});

describe('who may decide on the approval page', () => {
  it("another organization's person finds no such automation, and nothing changes", async () => {
    const { minted } = await assistant();
    const au = await pending(minted);
    const b = await t.tenant();
    const stranger = await b.user();
    const browser = new AccountBrowser(t.app);
    const page = await browser.signIn(`/account/automations/${au.id}`, stranger);
    expect(page.statusCode).toBe(404);
    // Their own list's token, posted at this automation.
    const list = await browser.get('/account/automations');
    const csrf = /name="csrf" value="([^"]+)"/.exec(list.body)![1]!;
    const posted = await browser.post(`/account/automations/${au.id}/approve`, { csrf, version: au.updatedAt });
    expect(posted.statusCode).toBe(404);
    expect((await get(au.id)).status).toBe('pending_approval');
  });

  it('a person whose apps lack a permission of the plan cannot approve', async () => {
    const { minted } = await assistant();
    const au = await pending(minted);
    const { person: narrow } = await assistant(a, { categories: ['automations', 'messages'] });
    const browser = new AccountBrowser(t.app);
    const page = await browser.signIn(`/account/automations/${au.id}`, narrow);
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('You cannot approve this automation');
    expect(page.body).toContain('contacts:write');
    expect(page.body).not.toContain(`action="/account/automations/${au.id}/approve"`);
    const list = await browser.get('/account/automations');
    const csrf = /name="csrf" value="([^"]+)"/.exec(list.body)![1]!;
    const posted = await browser.post(`/account/automations/${au.id}/approve`, { csrf, version: au.updatedAt });
    expect(posted.statusCode).toBe(403);
    expect((await get(au.id)).status).toBe('pending_approval');
  });

  it('a stale sign-in, a missing CSRF token or a wrong one change nothing', async () => {
    const { person, minted } = await assistant();
    const au = await pending(minted);
    const browser = new AccountBrowser(t.app);
    const page = await browser.signIn(`/account/automations/${au.id}`, person);
    const action = `/account/automations/${au.id}/approve`;

    const { csrf: _csrf, ...withoutToken } = Object.fromEntries([...page.body.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g)].map((m) => [m[1], m[2]]));
    expect((await browser.post(action, withoutToken as Record<string, string>)).statusCode).toBe(403);
    expect((await browser.post(action, { ...(withoutToken as Record<string, string>), csrf: 'forged-token-forged-token-forged' })).statusCode).toBe(403);

    // The sign-in outlived what the consent page allows (its session expired): sign in again first.
    await t.database.db.update(oauthSessions).set({ expiresAt: new Date(Date.now() - 1000) }).where(eq(oauthSessions.userId, person.id));
    const stale = await browser.submit(page, action);
    expect(stale.statusCode).toBe(401);
    expect(stale.body).toContain('Sign in again');
    expect((await get(au.id)).status).toBe('pending_approval');
  });
});

describe('sending is a consent of its own', () => {
  it('a grant without it reads and writes messages, but send, reply and forward answer 403 naming the consent', async () => {
    const { minted } = await assistant();
    const message = await call(minted, 'messages_write', { method: 'create', direction: 'incoming', type: 'email', sender: 'someone@vendor.example', text: 'Hello' });
    expect(message.isError, JSON.stringify(message.content)).toBeFalsy();
    const id = (message.structuredContent!.data as Json).id as string;
    for (const args of [
      { method: 'send', to: ['x@elsewhere.example'], subject: 'Hi', text: 'Hi' },
      { method: 'reply', id, text: 'Thanks' },
      { method: 'forward', id, to: ['x@elsewhere.example'] },
    ]) {
      const res = await call(minted, 'messages_write', args);
      expect(res.isError, args.method).toBe(true);
      const body = JSON.parse(res.content[0]!.text) as Json;
      expect(body.error.code).toBe('FORBIDDEN');
      expect(body.error.message).toContain('Send email and text messages on your behalf');
    }
    // Given on the grant, the same calls get past the consent (to the checks of the send itself).
    await setGrantCategories(t.database.db, minted.grant.id, minted.grant.categories, () => new Date(), false, true);
    const res = await call(minted, 'messages_write', { method: 'forward', id, to: ['x@elsewhere.example'] });
    expect(res.content[0]!.text).not.toContain('Send email and text messages on your behalf');
  });

  it('/account/apps shows the consent and gives or takes it back; it counts only with messages, read and change', async () => {
    const { person, minted } = await assistant();
    const browser = new AccountBrowser(t.app);
    let page = await browser.signIn('/account/apps', person);
    const box = new RegExp(`<input type="checkbox" id="send-${minted.grant.id}" name="send" value="yes"( checked)?`);
    expect(box.exec(page.body)?.[1]).toBeUndefined();
    expect(page.body).toContain('Send email and text messages on your behalf');
    const action = `/account/apps/${minted.grant.id}/categories`;
    const grantRow = async () => (await t.database.db.select().from(oauthGrants).where(eq(oauthGrants.id, minted.grant.id)))[0]!;
    expect((await browser.submit(page, action, { categories: 'messages', access: 'write', send: 'yes' })).statusCode).toBe(303);
    expect((await grantRow()).send).toBe(true);
    page = await browser.get('/account/apps');
    expect(box.exec(page.body)?.[1]).toBe(' checked');
    expect((await browser.submit(page, action, { categories: 'messages', access: 'read', send: 'yes' })).statusCode).toBe(303);
    expect((await grantRow()).send).toBe(false);
  });

  it('an automation that forwards needs the consent of the person who approves it; the external address is marked', async () => {
    const { person, minted } = await assistant();
    const au = await pending(minted, forwarder);
    const browser = new AccountBrowser(t.app);
    let page = await browser.signIn(`/account/automations/${au.id}`, person);
    expect(page.body).toContain('<mark class="external"');
    expect(page.body).toContain('x@elsewhere.example');
    expect(page.body).toContain('You cannot approve this automation');
    expect(page.body).toContain('Send email and text messages on your behalf');

    await setGrantCategories(t.database.db, minted.grant.id, minted.grant.categories, () => new Date(), false, true);
    page = await browser.get(`/account/automations/${au.id}`);
    expect((await browser.submit(page, `/account/automations/${au.id}/approve`)).statusCode).toBe(303);
    expect((await get(au.id)).status).toBe('active');

    // The consent taken back: the automation is paused at its next run, naming it.
    await setGrantCategories(t.database.db, minted.grant.id, minted.grant.categories, () => new Date(), false, false);
    await ok(await a.request('POST', '/v1/messages', { direction: 'incoming', type: 'email', sender: 'someone@vendor.example', text: 'Hello again' }), 201);
    await engine.runOnce();
    expect(await get(au.id)).toMatchObject({ status: 'paused', statusReason: expect.stringContaining('messages:send') });
  });
});
