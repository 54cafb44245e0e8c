import { describe, expect, it } from 'vitest';
import { ok } from '../helpers/app.js';
import { useLiveEngine } from './live-engine.js';

/** Automations that work threads: triggered by a message or a thread event, they assign and set the status. */

const live = useLiveEngine(1000);

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

async function automation(instructions: string) {
  const { a, engine } = live;
  const created = ok(await a.request('POST', '/v1/automations', { name: instructions.slice(0, 40), instructions }), 201);
  await engine.runOnce();
  const checked = ok(await a.request('GET', `/v1/automations/${created.id}`));
  if (checked.status === 'pending_approval') ok(await a.request('POST', `/v1/automations/${created.id}/approve`));
  return checked as Json;
}

describe('automations on threads', () => {
  it('assigns the thread of a new text to a member named by email, and keeps reopened threads pending', async () => {
    const { a, engine } = live;
    const lead = await a.user('lead@example.test');
    const assign = await automation('When a new text arrives, assign the thread to lead@example.test');
    expect(assign.planSummary).toContain('It assigns the thread to lead@example.test.');
    const pending = await automation('When a thread is reopened, mark it as pending');
    expect(pending.planSummary).toBe('Runs when a thread opens again (event thread.reopened). It sets the thread\'s status to "pending".');

    const threadId = `auto-${Date.now()}`;
    ok(await a.request('POST', '/v1/messages', { direction: 'incoming', type: 'sms', text: 'Hello?', threadId }), 201);
    await engine.runOnce();
    await engine.runOnce();
    expect(ok(await a.request('GET', `/v1/threads/${threadId}`))).toMatchObject({ assigneeId: lead.id, status: 'open' });

    ok(await a.request('PATCH', `/v1/threads/${threadId}`, { status: 'closed' }));
    ok(await a.request('POST', '/v1/messages', { direction: 'incoming', type: 'sms', text: 'Hello again', threadId }), 201);
    for (let i = 0; i < 3; i++) await engine.runOnce();
    expect(ok(await a.request('GET', `/v1/threads/${threadId}`))).toMatchObject({ assigneeId: lead.id, status: 'pending' });
  });

  it('assigns the thread of a message that arrives in a thread tagged vip, and no other', async () => {
    const { a, engine } = live;
    const lead = await a.user('vip-lead@example.test');
    const assign = await automation('When a message arrives in a thread tagged vip, assign the thread to vip-lead@example.test');
    expect(assign.condition).toEqual({ field: 'thread.tags', operator: 'equals', value: 'vip' });
    expect(assign.planSummary).toBe('Runs when a message is received, only if its thread is tagged "vip". It assigns the thread to vip-lead@example.test.');

    const [vip, plain] = [`vip-${Date.now()}`, `plain-${Date.now()}`];
    for (const threadId of [vip, plain]) ok(await a.request('POST', '/v1/messages', { direction: 'incoming', type: 'email', text: 'Where is my order?', threadId }), 201);
    ok(await a.request('PATCH', `/v1/threads/${vip}`, { tags: ['VIP', 'billing'] }));
    ok(await a.request('PATCH', `/v1/threads/${plain}`, { tags: ['billing'] }));
    for (let i = 0; i < 3; i++) await engine.runOnce();
    ok(await a.request('PATCH', `/v1/threads/${vip}`, { assigneeId: null }));

    // The tag is read when the message's event is dispatched: the next message of each.
    for (const threadId of [vip, plain]) ok(await a.request('POST', '/v1/messages', { direction: 'incoming', type: 'email', text: 'Any news?', threadId }), 201);
    const event = ((ok(await a.request('GET', '/v1/events?type=message.received&limit=10')) as { id: string; data: { threadId: string } }[]).find((e) => e.data.threadId === vip))!;
    expect(ok(await a.request('POST', `/v1/automations/${assign.id}/preview`, { eventId: event.id })).conditionHolds).toBe(true);
    for (let i = 0; i < 3; i++) await engine.runOnce();
    expect(ok(await a.request('GET', `/v1/threads/${vip}`)).assigneeId).toBe(lead.id);
    expect(ok(await a.request('GET', `/v1/threads/${plain}`)).assigneeId).toBeNull();
  });

  it('snoozes the thread and adds and removes its tags as the plan says', async () => {
    const { a, engine } = live;
    const snooze = await automation('When a new email from snoozer@example.test arrives, snooze the thread for 2 days and tag the thread waiting');
    expect(snooze.planSummary).toBe(
      'Runs when a message is received, only if its type is "email" and its sender is "snoozer@example.test". It snoozes the thread for 2 days (it opens again then, or at the customer\'s next message) and then adds the tag "waiting" to the thread. ' +
        'The sender is the From header as written, which is not authenticated (anyone can forge it); "(verified)" would require that its domain passed DMARC.',
    );
    const untag = await automation('When a thread is reopened, remove the tag waiting from the thread');
    expect(untag.actions).toEqual([{ operation: 'threads.update', input: { id: '{{event.data.id}}', removeTags: ['waiting'] } }]);

    const threadId = `snoozed-${Date.now()}`;
    ok(await a.request('POST', '/v1/messages', { direction: 'incoming', type: 'email', sender: 'snoozer@example.test', text: 'Back in a while', threadId }), 201);
    ok(await a.request('PATCH', `/v1/threads/${threadId}`, { addTags: ['vip-not'] }));
    const before = Date.now();
    for (let i = 0; i < 3; i++) await engine.runOnce();
    const snoozed = ok(await a.request('GET', `/v1/threads/${threadId}`));
    expect(snoozed).toMatchObject({ status: 'snoozed', tags: ['vip-not', 'waiting'] });
    const until = Date.parse(snoozed.snoozedUntil) - before;
    expect(until).toBeGreaterThan(2 * 86_400_000 - 120_000);
    expect(until).toBeLessThan(2 * 86_400_000 + 120_000);

    // Someone else writes in: the thread opens again, and the reopening takes the tag away (the other stays).
    ok(await a.request('POST', '/v1/messages', { direction: 'incoming', type: 'email', sender: 'colleague@example.test', text: 'Any news?', threadId }), 201);
    for (let i = 0; i < 3; i++) await engine.runOnce();
    // (The first test's automation then marks a reopened thread pending.)
    expect(ok(await a.request('GET', `/v1/threads/${threadId}`))).toMatchObject({ status: 'pending', snoozedUntil: null, tags: ['vip-not'] });
  });

  it('refuses a member who is not one of the organization, by name', async () => {
    const { a } = live;
    const threadId = `refused-${Date.now()}`;
    ok(await a.request('POST', '/v1/messages', { direction: 'incoming', type: 'email', text: 'x', threadId }), 201);
    const res = await a.request('PATCH', `/v1/threads/${threadId}`, { assigneeEmail: 'stranger@example.test' });
    expect(res.status).toBe(400);
    expect(res.json.error.details.properties.assigneeEmail.errors[0]).toMatch(/member/);
  });
});
