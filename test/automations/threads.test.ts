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

  it('refuses a member who is not one of the organization, by name', async () => {
    const { a } = live;
    const threadId = `refused-${Date.now()}`;
    ok(await a.request('POST', '/v1/messages', { direction: 'incoming', type: 'email', text: 'x', threadId }), 201);
    const res = await a.request('PATCH', `/v1/threads/${threadId}`, { assigneeEmail: 'stranger@example.test' });
    expect(res.status).toBe(400);
    expect(res.json.error.details.properties.assigneeEmail.errors[0]).toMatch(/member/);
  });
});
