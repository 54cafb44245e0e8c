import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { ok, useTestApp, type Tenant } from '../helpers/app.js';
import { createSnoozeWorker } from '../../src/workers/snoozes.js';

const { t, a, b } = useTestApp();

let seq = 0;
const newThreadId = () => `thread-${Date.now()}-${++seq}`;

async function record(tenant: Tenant, threadId: string, body: Record<string, unknown> = {}) {
  return ok(await tenant.request('POST', '/v1/messages', { direction: 'incoming', type: 'sms', text: 'hi', threadId, ...body }), 201);
}

async function eventsOf(tenant: Tenant, type: string) {
  return ok(await tenant.request('GET', `/v1/events?type=${type}&limit=100`)) as { data: Record<string, unknown>; resourceId: string | null }[];
}

const future = (ms = 3_600_000) => new Date(Date.now() + ms).toISOString();

describe('threads', () => {
  it('keeps a thread for the messages that share a threadId: counts, latest times, the newest first', async () => {
    const id = newThreadId();
    await record(a, id, { timestamp: '2026-11-01T10:00:00.000Z' });
    await record(a, id, { direction: 'outgoing', timestamp: '2026-11-01T11:00:00.000Z' });
    const other = newThreadId();
    await record(a, other, { timestamp: '2026-11-02T10:00:00.000Z' });
    const thread = ok(await a.request('GET', `/v1/threads/${id}`));
    expect(thread).toMatchObject({ id, organizationId: a.orgId, status: 'open', assigneeId: null, snoozedUntil: null, tags: [], messageCount: 2, channelId: null, subject: null });
    expect(thread.lastMessageAt).toBe('2026-11-01T11:00:00.000Z');
    expect(thread.lastIncomingAt).toBe('2026-11-01T10:00:00.000Z');
    expect(Object.keys(thread)).toEqual(['id', 'createdAt', 'updatedAt', 'organizationId', 'channelId', 'subject', 'contactId', 'status', 'assigneeId', 'snoozedUntil', 'tags', 'lastMessageAt', 'lastIncomingAt', 'messageCount']);
    const list = ok(await a.request('GET', '/v1/threads?limit=100')) as { id: string }[];
    expect(list.map((x) => x.id).indexOf(other)).toBeLessThan(list.map((x) => x.id).indexOf(id));
    // A deleted message no longer counts.
    const third = await record(a, id, { timestamp: '2026-11-01T12:00:00.000Z' });
    expect(ok(await a.request('GET', `/v1/threads/${id}`))).toMatchObject({ messageCount: 3, lastMessageAt: '2026-11-01T12:00:00.000Z' });
    ok(await a.request('DELETE', `/v1/messages/${third.id}`));
    expect(ok(await a.request('GET', `/v1/threads/${id}`))).toMatchObject({ messageCount: 2, lastMessageAt: '2026-11-01T11:00:00.000Z', lastIncomingAt: '2026-11-01T10:00:00.000Z' });
    // Another organization sees nothing.
    expect((await b.request('GET', `/v1/threads/${id}`)).status).toBe(404);
    expect((await b.request('PATCH', `/v1/threads/${id}`, { status: 'closed' })).status).toBe(404);
    expect((await b.request('GET', `/v1/threads/${id}/notes`)).status).toBe(404);
    expect((await b.request('POST', `/v1/threads/${id}/notes`, { text: 'x' })).status).toBe(404);
  });

  it('counts without drift when many messages of one thread are written at once', async () => {
    const id = newThreadId();
    await Promise.all(Array.from({ length: 40 }, (_, i) => record(a, id, { direction: i % 2 ? 'outgoing' : 'incoming' })));
    expect(ok(await a.request('GET', `/v1/threads/${id}`)).messageCount).toBe(40);
  });

  it('applies the status rules: a snooze needs a future time, any other status clears it', async () => {
    const id = newThreadId();
    await record(a, id);
    const refused: [Record<string, unknown>, string][] = [
      [{ status: 'snoozed' }, 'snoozedUntil'],
      [{ status: 'snoozed', snoozedUntil: '2020-01-01T00:00:00Z' }, 'snoozedUntil'],
      [{ snoozedUntil: '2020-01-01T00:00:00Z' }, 'snoozedUntil'],
      [{ status: 'closed', snoozedUntil: future() }, 'snoozedUntil'],
      [{ status: 'done' }, 'status'],
      [{ assigneeId: 'someone' }, 'assigneeId'],
      [{ tags: ['x'.repeat(51)] }, 'tags'],
      [{ tags: Array.from({ length: 21 }, (_, i) => `t${i}`) }, 'tags'],
      [{ tags: [''] }, 'tags'],
      [{ subject: 'no' }, 'subject'],
    ];
    for (const [body, field] of refused) {
      const res = await a.request('PATCH', `/v1/threads/${id}`, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json.error.code).toBe('VALIDATION_ERROR');
      expect(res.json.error.details.properties?.[field] ?? res.json.error.details.errors, JSON.stringify(body)).toBeTruthy();
    }
    const until = future();
    const snoozed = ok(await a.request('PATCH', `/v1/threads/${id}`, { status: 'snoozed', snoozedUntil: until }));
    expect(snoozed).toMatchObject({ status: 'snoozed', snoozedUntil: until.replace(/\.\d+Z$/, (m) => m) });
    const pending = ok(await a.request('PATCH', `/v1/threads/${id}`, { status: 'pending' }));
    expect(pending).toMatchObject({ status: 'pending', snoozedUntil: null });
    // A snoozedUntil alone snoozes; null alone ends the snooze.
    expect(ok(await a.request('PATCH', `/v1/threads/${id}`, { snoozedUntil: until }))).toMatchObject({ status: 'snoozed' });
    expect(ok(await a.request('PATCH', `/v1/threads/${id}`, { snoozedUntil: null }))).toMatchObject({ status: 'open', snoozedUntil: null });
    // Tags are a set, lower-case.
    expect(ok(await a.request('PATCH', `/v1/threads/${id}`, { tags: ['VIP', 'billing', 'vip ', 'Billing'] })).tags).toEqual(['billing', 'vip']);
    expect(ok(await a.request('PATCH', `/v1/threads/${id}`, { tags: [] })).tags).toEqual([]);
  });

  it('adds and removes tags without replacing the others (what an automation that tags does), within 20', async () => {
    const id = newThreadId();
    await record(a, id);
    ok(await a.request('PATCH', `/v1/threads/${id}`, { tags: ['billing'] }));
    expect(ok(await a.request('PATCH', `/v1/threads/${id}`, { addTags: ['GOLD', 'waiting'] })).tags).toEqual(['billing', 'gold', 'waiting']);
    expect(ok(await a.request('PATCH', `/v1/threads/${id}`, { removeTags: ['Waiting', 'absent'], addTags: ['gold'] })).tags).toEqual(['billing', 'gold']);
    const updated = (await eventsOf(a, 'thread.updated')).filter((e) => e.data.id === id).map((e) => e.data.changes);
    expect(updated).toContainEqual({ tags: { before: ['billing', 'gold', 'waiting'], after: ['billing', 'gold'] } });
    // Adding what is there changes nothing.
    expect(ok(await a.request('PATCH', `/v1/threads/${id}`, { addTags: ['billing'] })).tags).toEqual(['billing', 'gold']);
    for (const [body, field] of [
      [{ tags: ['x'], addTags: ['y'] }, 'addTags'],
      [{ tags: ['x'], removeTags: ['y'] }, 'removeTags'],
      [{ addTags: Array.from({ length: 19 }, (_, i) => `t${i}`) }, 'addTags'],
      [{ addTags: [] }, 'addTags'],
      [{ removeTags: ['x'.repeat(51)] }, 'removeTags'],
    ] as [Record<string, unknown>, string][]) {
      const res = await a.request('PATCH', `/v1/threads/${id}`, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json.error.details.properties?.[field], JSON.stringify(body)).toBeTruthy();
    }
    expect(ok(await a.request('GET', `/v1/threads/${id}`)).tags).toEqual(['billing', 'gold']);
  });

  it('assigns to members of the organization only, and lists them', async () => {
    const id = newThreadId();
    await record(a, id);
    const lead = await a.user('lead@example.test');
    const stranger = await b.user('stranger@example.test');
    const members = ok(await a.request('GET', '/v1/members?limit=100')) as { id: string; email: string }[];
    expect(members).toContainEqual({ id: lead.id, name: null, email: 'lead@example.test' });
    expect(members.map((m) => m.id)).not.toContain(stranger.id);
    for (const assigneeId of [stranger.id, '00000000-0000-4000-8000-000000000000', a.keyId]) {
      const res = await a.request('PATCH', `/v1/threads/${id}`, { assigneeId });
      expect(res.status).toBe(400);
      expect(res.json.error.details.properties.assigneeId.errors[0]).toMatch(/member/);
    }
    expect(ok(await a.request('PATCH', `/v1/threads/${id}`, { assigneeId: lead.id })).assigneeId).toBe(lead.id);
    const updated = (await eventsOf(a, 'thread.updated')).find((e) => e.data.id === id && (e.data.changes as Record<string, unknown>).assigneeId);
    expect(updated?.data.changes).toEqual({ assigneeId: { before: null, after: lead.id } });
    expect(ok(await a.request('PATCH', `/v1/threads/${id}`, { assigneeId: null })).assigneeId).toBeNull();
  });

  it('filters by status, assignee, tag and contact', async () => {
    const lead = await a.user();
    const [x, y, z] = [newThreadId(), newThreadId(), newThreadId()];
    for (const id of [x, y, z]) await record(a, id);
    ok(await a.request('PATCH', `/v1/threads/${x}`, { status: 'closed', assigneeId: lead.id, tags: ['vip'] }));
    ok(await a.request('PATCH', `/v1/threads/${y}`, { assigneeId: lead.id }));
    const ids = async (query: string) => ((ok(await a.request('GET', `/v1/threads?limit=100&${query}`)) as { id: string }[]).map((r) => r.id));
    expect(await ids('status=closed')).toContain(x);
    expect(await ids('status=closed')).not.toContain(y);
    expect(await ids(`assigneeId=${lead.id}`)).toEqual([y, x]);
    expect(await ids(`status=open&assigneeId=${lead.id}`)).toEqual([y]);
    expect(await ids('assigneeId=none')).toContain(z);
    expect(await ids('assigneeId=none')).not.toContain(x);
    expect(await ids('tag=VIP')).toEqual([x]);
    expect((await a.request('GET', '/v1/threads?assigneeId=nobody')).status).toBe(400);
    expect((await a.request('GET', '/v1/threads?status=gone')).status).toBe(400);
    const contact = ok(await a.request('POST', '/v1/contacts', { firstName: 'Ann' }), 201);
    const phoneId = ok(await a.request('POST', `/v1/contacts/${contact.id}/phone-numbers`, { phoneNumber: '+14155550123' }), 201).id as string;
    const w = newThreadId();
    await record(a, w, { phoneNumberId: phoneId });
    expect(await ids(`contactId=${contact.id}`)).toEqual([w]);
    // Recorded messages have no channel: a channel's filter finds none of them.
    expect(await ids(`channelId=${lead.id}`)).toEqual([]);
  });

  it("keeps the subject of an email thread's first message, and none for texts", async () => {
    const [mail, text] = [newThreadId(), newThreadId()];
    await record(a, mail, { type: 'email', metadata: { email: { subject: 'Order 42' } } });
    await record(a, mail, { type: 'email', direction: 'outgoing', metadata: { email: { subject: 'Re: Order 42' } } });
    await record(a, text);
    expect(ok(await a.request('GET', `/v1/threads/${mail}`))).toMatchObject({ subject: 'Order 42', channelId: null, messageCount: 2 });
    expect(ok(await a.request('GET', `/v1/threads/${text}`)).subject).toBeNull();
  });

  it('opens a pending, snoozed or closed thread again when a message arrives, with its events', async () => {
    for (const change of [{ status: 'pending' }, { status: 'closed' }, { status: 'snoozed', snoozedUntil: future() }]) {
      const id = newThreadId();
      await record(a, id);
      ok(await a.request('PATCH', `/v1/threads/${id}`, change));
      await record(a, id, { direction: 'outgoing' });
      expect(ok(await a.request('GET', `/v1/threads/${id}`)).status).toBe(change.status);
      await record(a, id);
      expect(ok(await a.request('GET', `/v1/threads/${id}`))).toMatchObject({ status: 'open', snoozedUntil: null });
      const reopened = (await eventsOf(a, 'thread.reopened')).filter((e) => e.data.id === id);
      expect(reopened).toHaveLength(1);
      expect(reopened[0]!.data).toMatchObject({ reason: 'message', status: 'open' });
    }
  });

  it('ends a snooze by itself, exactly once with two workers', async () => {
    const id = newThreadId();
    await record(a, id);
    ok(await a.request('PATCH', `/v1/threads/${id}`, { status: 'snoozed', snoozedUntil: future(30_000) }));
    const log = { error: () => {} };
    const now = () => new Date(Date.now() + 31_000);
    const [one, two] = [createSnoozeWorker({ db: t.database.db, clock: now, log }), createSnoozeWorker({ db: t.database.db, clock: now, log })];
    expect(await createSnoozeWorker({ db: t.database.db, clock: () => new Date(), log }).runOnce()).toBe(0);
    const counts = await Promise.all([one.runOnce(), two.runOnce(), one.runOnce(), two.runOnce()]);
    expect(counts.reduce((x, y) => x + y, 0)).toBe(1);
    expect(ok(await a.request('GET', `/v1/threads/${id}`))).toMatchObject({ status: 'open', snoozedUntil: null });
    const reopened = (await eventsOf(a, 'thread.reopened')).filter((e) => e.data.id === id);
    expect(reopened.map((e) => e.data.reason)).toEqual(['snooze_ended']);
  });

  it('keeps internal notes with their author, and deletes them softly', async () => {
    const id = newThreadId();
    await record(a, id);
    const note = ok(await a.request('POST', `/v1/threads/${id}/notes`, { text: 'Customer is a VIP' }), 201);
    expect(note).toMatchObject({ threadId: id, text: 'Customer is a VIP', author: { type: 'apiKey', id: a.keyId } });
    expect((await a.request('POST', `/v1/threads/${id}/notes`, { text: 'x'.repeat(10_001) })).status).toBe(400);
    expect((await a.request('POST', `/v1/threads/${id}/notes`, { text: '  ' })).status).toBe(400);
    expect((await a.request('POST', `/v1/threads/nope/notes`, { text: 'x' })).status).toBe(404);
    expect(ok(await a.request('GET', `/v1/threads/${id}/notes`))).toEqual([note]);
    expect((await eventsOf(a, 'thread.note_added')).find((e) => e.data.id === note.id)?.data).toEqual(note);
    ok(await a.request('DELETE', `/v1/threads/${id}/notes/${note.id}`));
    expect(ok(await a.request('GET', `/v1/threads/${id}/notes`))).toEqual([]);
    expect((await a.request('DELETE', `/v1/threads/${id}/notes/${note.id}`)).status).toBe(404);
    const stored = await t.database.db.execute(sql`SELECT deleted_at FROM thread_notes WHERE id = ${note.id}`);
    expect(stored.rows[0]).toBeTruthy();
  });
});
