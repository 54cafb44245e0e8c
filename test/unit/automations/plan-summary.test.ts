import { describe, expect, it } from 'vitest';
import { describeCron, summarizePlan, type ChannelNaming } from '../../../src/modules/automations/plan-summary.js';
import type { Condition, Plan, PlanStep } from '../../../src/modules/automations/plan.js';

const update = (patch: Record<string, unknown>): PlanStep => ({ operation: 'messages.update', input: { id: '{{event.resourceId}}', ...patch } });
const digest: PlanStep = {
  operation: 'messages.create',
  input: { direction: 'incoming', type: 'note', sender: 'Switchboard automations', summary: 'Digest of the messages since {{lastRunAt}}', text: '{{digest}}' },
};
const plan = (p: Partial<Plan>): Plan => {
  const actions = p.actions ?? [digest];
  return { triggerType: 'event', triggerEvent: 'message.received', cronExpression: null, timezone: null, condition: null, actions, permissions: { operations: [...new Set(actions.map((a) => a.operation))] }, ...p };
};
const scheduled = (cronExpression: string, timezone: string | null = null, actions: PlanStep[] = [digest]) => plan({ triggerType: 'scheduled', triggerEvent: 'schedule.tick', cronExpression, timezone, actions });

describe('summarizePlan', () => {
  it.each<[string, Plan, string]>([
    ['a weekly digest', scheduled('0 21 * * 0', 'America/New_York'), 'Runs every Sunday at 21:00 (America/New_York). It creates a digest note of the messages since the last run.'],
    ['several times a day', scheduled('0 9,17 * * *'), 'Runs every day at 09:00 and 17:00 (UTC). It creates a digest note of the messages since the last run.'],
    ['the last day of the month', scheduled('0 9 L * *', 'Europe/Paris'), 'Runs on the last day of every month at 09:00 (Europe/Paris). It creates a digest note of the messages since the last run.'],
    ['weekdays', scheduled('30 8 * * 1-5'), 'Runs every weekday (Monday to Friday) at 08:30 (UTC). It creates a digest note of the messages since the last run.'],
    ['every 15 minutes', scheduled('*/15 * * * *'), 'Runs every 15 minutes (UTC). It creates a digest note of the messages since the last run.'],
    ['a cron without words', scheduled('5 4 */3 * *'), 'Runs on the cron schedule "5 4 */3 * *" (UTC). It creates a digest note of the messages since the last run.'],
    [
      'a message condition with a time',
      plan({
        condition: { all: [{ field: 'type', operator: 'equals', value: 'email' }, { field: 'sender', operator: 'equals', value: 'boss@corp.com' }, { timeOfDay: { from: '18:00', to: '00:00' } }] },
        actions: [update({ snoozedUntil: '{{next(0 9 * * *)}}' })],
        timezone: 'Europe/London',
      }),
      'Runs when a message is received, only if its type is "email" and its sender is "boss@corp.com" and it happens at or after 18:00 (Europe/London). It snoozes the message until the next 09:00. ' +
        'The sender is the From header as written, which is not authenticated (anyone can forge it); "(verified)" would require that its domain passed DMARC.',
    ],
    [
      'a text from a number: the number is what the provider reports, not a From header',
      plan({
        condition: { all: [{ field: 'type', operator: 'equals', value: 'sms' }, { field: 'sender', operator: 'equals', value: '+12122003002' }] },
        actions: [update({ readAt: '{{now}}' })],
      }),
      'Runs when a message is received, only if its type is "sms" and its sender is "+12122003002". It marks the message as read. ' +
        'The sender is the number the provider reports, which is not authenticated everywhere (numbers can be spoofed).',
    ],
    [
      'a sender that must be verified (DMARC pass)',
      plan({
        condition: { all: [{ field: 'sender', operator: 'equals', value: 'boss@corp.com' }, { field: 'sender.verified', operator: 'equals', value: true }] },
        actions: [update({ readAt: '{{now}}' })],
      }),
      'Runs when a message is received, only if its sender is "boss@corp.com" and its sender is verified (its From domain passed DMARC). It marks the message as read.',
    ],
    [
      'a verified sender only offered as one way among others is still unverified',
      plan({
        condition: { any: [{ field: 'sender', operator: 'ends_with', value: '@corp.com' }, { field: 'sender.verified', operator: 'equals', value: true }] },
        actions: [update({ readAt: '{{now}}' })],
      }),
      'Runs when a message is received, only if its sender ends with "@corp.com" or its sender is verified (its From domain passed DMARC). It marks the message as read. ' +
        'The sender is the From header as written, which is not authenticated (anyone can forge it); "(verified)" would require that its domain passed DMARC.',
    ],
    [
      'outside business hours',
      plan({ condition: { not: { all: [{ dayOfWeek: [1, 2, 3, 4, 5] }, { timeOfDay: { from: '09:00', to: '17:00' } }] } }, actions: [update({ readAt: '{{now}}' }), update({ archivedAt: '{{now}}' })] }),
      'Runs when a message is received, only if not (it happens on a weekday (Monday to Friday) and it happens between 09:00 and 17:00) (UTC). It marks the message as read and then archives the message.',
    ],
    [
      'created or updated, on another record',
      plan({ triggerEvent: 'customer.created,customer.updated', condition: { field: 'type', operator: 'equals', value: 'VIP' } }),
      'Runs when a customer is created or updated (events customer.created, customer.updated), only if its type is "VIP". It creates a digest note of the messages since the last run.',
    ],
    [
      'a condition on the thread and the steps on it: the member, the status, the snooze and the tags named',
      plan({
        condition: { any: [{ field: 'thread.tags', operator: 'equals', value: 'vip' }, { field: 'thread.tags', operator: 'equals', value: 'gold' }] },
        actions: [
          { operation: 'threads.update', input: { id: '{{event.data.threadId}}', assigneeEmail: 'lead@example.com', status: 'pending' } },
          { operation: 'threads.update', input: { id: '{{event.data.threadId}}', status: 'snoozed', snoozedUntil: '{{next(0 9 * * 1)}}' } },
          { operation: 'threads.update', input: { id: '{{event.data.threadId}}', addTags: ['vip', 'waiting'], removeTags: ['new'] } },
          { operation: 'threads.update', input: { id: '{{event.data.threadId}}', tags: ['replaced'] } },
        ],
      }),
      'Runs when a message is received, only if its thread is tagged "vip" or "gold". It assigns the thread to lead@example.com and sets the thread\'s status to "pending", snoozes the thread until the next Monday at 09:00 (it opens again then, or at the customer\'s next message), ' +
        'adds the tags "vip" and "waiting" to the thread and removes the tag "new" from the thread and then calls threads.update with {"id":"{{event.data.threadId}}","tags":["replaced"]}.',
    ],
    [
      'words and a step without wording',
      plan({
        condition: { any: [{ field: 'text', operator: 'contains', value: 'invoice' }, { field: 'summary', operator: 'contains', value: 'invoice' }] } as Condition,
        actions: [{ operation: 'contacts.delete', input: { id: '{{event.data.contactId}}' } }],
      }),
      'Runs when a message is received, only if its text or summary contains "invoice". It calls contacts.delete with {"id":"{{event.data.contactId}}"}.',
    ],
  ])('%s', (_, p, text) => {
    expect(summarizePlan(p)).toBe(text);
  });

  it('describes the cron shapes the evaluator writes, and nothing it cannot', () => {
    expect(describeCron('0 9 15 * *')).toBe('on the 15th of every month at 09:00');
    expect(describeCron('0 9 1 1 *')).toBe('every year on January 1 at 09:00');
    expect(describeCron('15 8 * * 1,4')).toBe('every Monday and Thursday at 08:15');
    expect(describeCron('0 10 * * 0,6')).toBe('every Saturday and Sunday at 10:00');
    expect(describeCron('0 */2 * * *')).toBe('every 2 hours, on the hour');
    expect(describeCron('*/15 9-16 * * 1-5')).toBe('every 15 minutes, from 09:00 to 16:59, every weekday (Monday to Friday)');
    expect(describeCron('0 * * * 0,6')).toBe('every hour, on the hour, every Saturday and Sunday');
    expect(describeCron('0 9 1 * 1')).toBeNull();
    expect(describeCron('@daily')).toBeNull();
  });
});

describe('summarizePlan on plans not yet validated', () => {
  it('shows a malformed condition as it is instead of failing', () => {
    const p = plan({ condition: { all: 'nope' } as unknown as Condition });
    expect(summarizePlan(p)).toBe('Runs when a message is received, only if the condition {"all":"nope"} holds. It creates a digest note of the messages since the last run.');
  });
});

describe('summarizePlan of steps that send', () => {
  const shop: ChannelNaming = { id: '7d1e3f2a-5b6c-4d8e-9f01-23456789abcd', name: 'Shop', address: '+12122003001', type: 'sms', status: 'active' };
  const desk: ChannelNaming = { id: '0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d', name: 'Desk', address: 'desk@acme.example', type: 'email', status: 'active' };
  const texts: Condition = { field: 'type', operator: 'equals', value: 'sms' };
  const send = (input: Record<string, unknown>): PlanStep => ({ operation: 'messages.send', input });
  const step = (p: Partial<Plan>, channels: ChannelNaming[] = [shop, desk]) => summarizePlan(plan(p), { channels }).replace(/^.*?\. (?=It )/, '');

  it.each<[string, Partial<Plan>, string, ChannelNaming[]?]>([
    [
      'a text to a number, through the organization\'s text channel (no channelId)',
      { triggerEvent: 'customer.transaction.created', actions: [send({ to: ['+12125550100'], text: 'Big payment' })] },
      'It sends a text to "+12125550100" through the organization\'s text channel, the channel "Shop" (+12122003001), with the text "Big payment".',
    ],
    [
      'a text through a channel it names',
      { triggerEvent: 'customer.transaction.created', actions: [send({ channelId: shop.id, to: ['+12125550100', '+12125550101'], text: 'Big payment' })] },
      'It sends a text to "+12125550100" and "+12125550101" through the channel "Shop" (+12122003001), with the text "Big payment".',
    ],
    [
      'a text when the organization has no text channel yet',
      { triggerEvent: 'customer.transaction.created', actions: [send({ to: ['+12125550100'], text: 'Big payment' })] },
      'It sends a text to "+12125550100" through the organization\'s only text channel (it has none now: the step fails until it has exactly one), with the text "Big payment".',
      [],
    ],
    [
      'a text back to whoever texted, through the channel the text came through',
      { condition: texts, actions: [send({ channelId: '{{event.data.channelId}}', to: ['{{sender.phoneNumber}}'], text: 'Thanks' })] },
      'It sends a text to the sender\'s number through the channel the message came through, with the text "Thanks".',
    ],
    [
      'a reply to a text',
      { condition: texts, actions: [{ operation: 'messages.reply', input: { id: '{{event.resourceId}}', text: 'We got your text' } }] },
      'It replies with a text to the sender through the channel the text came through, with the text "We got your text".',
    ],
    [
      'a forward of a text, by email through a channel it names',
      { condition: texts, actions: [{ operation: 'messages.forward', input: { id: '{{event.resourceId}}', to: ['boss@acme.example'], channelId: desk.id } }] },
      'It forwards the text by email to "boss@acme.example" through the channel "Desk" (desk@acme.example).',
    ],
    [
      'an email through a channel it names',
      { actions: [send({ channelId: desk.id, to: ['{{sender.address}}'], subject: 'Received', text: 'Thanks' })] },
      'It sends an email to the sender through the channel "Desk" (desk@acme.example), with the subject "Received" and the text "Thanks".',
    ],
    [
      'an email through a channel the summary does not know',
      { actions: [send({ channelId: '1f2e3d4c-5b6a-4978-8a9b-0c1d2e3f4a5b', to: ['ops@acme.example'], subject: '', text: 'Hi' })] },
      'It sends an email to "ops@acme.example" through the channel "1f2e3d4c-5b6a-4978-8a9b-0c1d2e3f4a5b", with no subject and the text "Hi".',
    ],
  ])('%s', (_, p, text, channels) => {
    const summary = step(p, channels);
    expect(summary).toBe(text);
    expect(summary).not.toContain('undefined');
  });
});
