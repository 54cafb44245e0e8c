import { describe, expect, it } from 'vitest';
import { builtinEvaluator } from '../../../src/workers/evaluator/deterministic.js';
import { evaluateAutomation, evaluatorFromConfig } from '../../../src/workers/evaluator/index.js';
import { validatePlan } from '../../../src/workers/evaluator/validate.js';
import type { Condition, EvaluationRequest, Plan, PlanStep } from '../../../src/modules/automations/plan.js';
import { all, archive, digest, email, eq, NOW, onEvent, opsOf, read, scheduled, update, words } from '../../helpers/plans.js';

const ALL = ['*'];

const request = (instructions: string, given: EvaluationRequest['given'] = {}): EvaluationRequest => ({ name: 'Test', description: null, instructions, given, now: NOW });
const evaluate = (instructions: string, given: EvaluationRequest['given'] = {}, creatorPermissions: readonly string[] = ALL) =>
  evaluateAutomation(builtinEvaluator, request(instructions, given), { creatorPermissions });

// Building blocks of the expected plans.
const thread = (patch: Record<string, unknown>, id = '{{event.data.threadId}}'): PlanStep => ({ operation: 'threads.update', input: { id, ...patch } });
const unreadDigest = (which: string, what: string): PlanStep => ({
  operation: 'messages.create',
  input: { direction: 'incoming', type: 'note', sender: 'Switchboard automations', summary: `Digest of the ${what}`, text: `{{digest.${which}}}` },
});
const contactEmail = (index: number): PlanStep[] => [
  { operation: 'contacts.create', input: { name: '{{sender.name}}' } },
  { operation: 'contacts.create_email', input: { id: `{{steps.${index}.id}}`, email: '{{sender.address}}' } },
];


const PLANNED: [string, Plan][] = [
  // Message triggers and their conditions
  ['When a new email arrives, mark it as read', onEvent('message.received', email, [read])],
  ['When a new email arrives from billing@acme.test, mark it as read', onEvent('message.received', all(email, eq('sender', 'billing@acme.test')), [read])],
  ['When any new incoming message arrives, mark it as read', onEvent('message.received', null, [read])],
  ['When a new phone message arrives, mark it as read', onEvent('message.received', eq('type', 'phone'), [read])],
  ['When a new SMS arrives, archive it', onEvent('message.received', eq('type', 'sms'), [archive])],
  ['When a new email or phone message arrives, mark it as read', onEvent('message.received', { field: 'type', operator: 'in', value: ['email', 'phone'] }, [read])],
  ['Archive every new email containing "newsletter"', onEvent('message.received', all(email, words('newsletter')), [archive])],
  ["When an email arrives mentioning refund, mark it as high importance", onEvent('message.received', all(email, words('refund')), [update({ importance: 'high' })])],
  ["When a new email containing 'invoice' or 'receipt' arrives, archive it", onEvent('message.received', all(email, words('invoice', 'receipt')), [archive])],
  ['When a message from ada@example.com arrives, mark it as read', onEvent('message.received', eq('sender', 'ada@example.com'), [read])],
  ['When an email arrives from anyone at acme.com, archive it', onEvent('message.received', all(email, { field: 'sender', operator: 'ends_with', value: '@acme.com' }), [archive])],
  ['When a new email from a@x.io or b@y.io arrives, archive it', onEvent('message.received', all(email, { field: 'sender', operator: 'in', value: ['a@x.io', 'b@y.io'] }), [archive])],
  ["When an email arrives from 'Ada Lovelace', mark it as read", onEvent('message.received', all(email, { field: 'sender', operator: 'contains', value: 'ada lovelace' }), [read])],
  ['When a new call from +1 (415) 555-0123 arrives, mark it as read', onEvent('message.received', all(eq('type', 'phone'), eq('sender', '+14155550123')), [read])],
  ['When an email to support@acme.test arrives, mark it as urgent', onEvent('message.received', all(email, eq('recipient', 'support@acme.test')), [update({ urgency: 'high' })])],
  ['When an urgent email arrives, snooze it for 2 hours', onEvent('message.received', all(email, eq('urgency', 'high')), [update({ snoozedUntil: '{{now+2h}}' })])],
  ['When a message marked high importance arrives, set status to handled', onEvent('message.received', eq('importance', 'high'), [update({ status: 'handled' })])],
  ['When an important email arrives, set its urgency to high', onEvent('message.received', all(email, eq('importance', 'high')), [update({ urgency: 'high' })])],
  ['When a new email with low urgency arrives, archive it', onEvent('message.received', all(email, eq('urgency', 'low')), [archive])],
  ['When I send an email to ada@example.com, mark it as read', onEvent('message.sent', all(email, eq('recipient', 'ada@example.com')), [read])],
  ['When an outgoing message is recorded, archive it', onEvent('message.sent', null, [archive])],
  ['When a new email with low importance from @acme.com arrives, archive it', onEvent('message.received', all(email, { field: 'sender', operator: 'ends_with', value: '@acme.com' }, eq('importance', 'low')), [archive])],
  // Message actions
  ['When a new email arrives, snooze it', onEvent('message.received', email, [update({ snoozedUntil: '{{next(0 9 * * *)}}' })])],
  ['When a new email arrives, mark it as unread', onEvent('message.received', email, [update({ readAt: null })])],
  ['When a new email arrives, snooze it for 30 minutes', onEvent('message.received', email, [update({ snoozedUntil: '{{now+30m}}' })])],
  ['Snooze every email from boss@corp.com for 2 hours', onEvent('message.received', all(email, eq('sender', 'boss@corp.com')), [update({ snoozedUntil: '{{now+2h}}' })])],
  ['When a new email arrives, snooze it until tomorrow 9am', onEvent('message.received', email, [update({ snoozedUntil: '{{next(0 9 * * *)}}' })])],
  ['When a new email arrives, snooze it until Monday', onEvent('message.received', email, [update({ snoozedUntil: '{{next(0 9 * * 1)}}' })])],
  ['When a new email arrives, snooze it until Friday at 2pm', onEvent('message.received', email, [update({ snoozedUntil: '{{next(0 14 * * 5)}}' })])],
  ['When a new email arrives, snooze it until tomorrow 8am Europe/Paris', onEvent('message.received', email, [update({ snoozedUntil: '{{next(0 8 * * *)}}' })], 'Europe/Paris')],
  ['When a new email arrives, set the importance to low', onEvent('message.received', email, [update({ importance: 'low' })])],
  ['When a new email arrives, set status to "waiting on customer"', onEvent('message.received', email, [update({ status: 'waiting on customer' })])],
  ['When a new email arrives, mark it as read and archive it', onEvent('message.received', email, [read, archive])],
  ['When a new email arrives, archive it then mark it as read', onEvent('message.received', email, [archive, read])],
  ['When a new email arrives, create a contact for the sender', onEvent('message.received', email, contactEmail(0))],
  ['When a new email arrives, mark it as read and add the sender to contacts', onEvent('message.received', email, [read, ...contactEmail(1)])],
  [
    'When a new SMS arrives, create a contact for the sender',
    onEvent('message.received', eq('type', 'sms'), [
      { operation: 'contacts.create', input: { name: '{{sender.name}}' } },
      { operation: 'contacts.create_phone_number', input: { id: '{{steps.0.id}}', phoneNumber: '{{sender.address}}' } },
    ]),
  ],
  // Other resources
  ['When a customer is added, write a summary of the messages since the last run', onEvent('customer.created', null, [digest])],
  ['When a contact is updated, write a digest', onEvent('contact.updated', null, [digest])],
  ['When a contact is deleted, write a digest', onEvent('contact.deleted', null, [digest])],
  ['When a transaction is added, write a digest', onEvent('customer.transaction.created', null, [digest])],
  ['When a business is changed, write a digest', onEvent('business.updated', null, [digest])],
  ['When a folder is removed, summarise messages', onEvent('folder.deleted', null, [digest])],
  ['When a new domain is added, write a digest', onEvent('domain.created', null, [digest])],
  ['When a domain registration is changed, write a digest', onEvent('domain.registration.updated', null, [digest])],
  ["When a contact's email is added, write a digest", onEvent('contact.email.created', null, [digest])],
  // Schedules
  ['Every Monday at 9, summarise new messages.', scheduled('0 9 * * 1')],
  ['Daily at 7:30 pm, write a digest', scheduled('30 19 * * *')],
  ['Every hour, write a recap', scheduled('0 * * * *')],
  ['Every day at noon, send me a digest', scheduled('0 12 * * *')],
  ['Every weekday at 8am, write a summary of the messages since the last run', scheduled('0 8 * * 1-5')],
  // Threads: the thread of the message, or of the thread event; a member named by email.
  ['When a new email from ada@example.com arrives, assign the thread to lead@example.com', onEvent('message.received', all(email, eq('sender', 'ada@example.com')), [thread({ assigneeEmail: 'lead@example.com' })])],
  ['When a new text arrives, set the thread status to pending', onEvent('message.received', eq('type', 'sms'), [thread({ status: 'pending' })])],
  ['When a thread is reopened, assign it to lead@example.com', onEvent('thread.reopened', null, [thread({ assigneeEmail: 'lead@example.com' }, '{{event.data.id}}')])],
  ['When a note is added, close the thread', onEvent('thread.note_added', null, [thread({ status: 'closed' })])],
  // A condition on the thread's tags; snoozing and tagging the thread.
  ['When a message arrives in a thread tagged vip, assign the thread to lead@example.com', onEvent('message.received', eq('thread.tags', 'vip'), [thread({ assigneeEmail: 'lead@example.com' })])],
  [
    'When an email from ada@example.com arrives in a conversation tagged "Key account" or gold, close the thread',
    onEvent('message.received', all(email, eq('sender', 'ada@example.com'), { any: [eq('thread.tags', 'key account'), eq('thread.tags', 'gold')] }), [thread({ status: 'closed' })]),
  ],
  ['When a thread tagged vip is reopened, mark it as pending', onEvent('thread.reopened', eq('thread.tags', 'vip'), [thread({ status: 'pending' }, '{{event.data.id}}')])],
  // An address is not a verb: "snoozer@…" and "archive@…" are senders.
  [
    'When an email from snoozer@example.com arrives, snooze the conversation for 1 week',
    onEvent('message.received', all(email, eq('sender', 'snoozer@example.com')), [thread({ status: 'snoozed', snoozedUntil: '{{now+1w}}' })]),
  ],
  ['When an email from archive@example.com arrives, archive it.', onEvent('message.received', all(email, eq('sender', 'archive@example.com')), [archive])],
  ['When a new email arrives, snooze the thread for 2 days', onEvent('message.received', email, [thread({ status: 'snoozed', snoozedUntil: '{{now+2d}}' })])],
  ['When a message is sent, snooze the conversation until Monday 9am', onEvent('message.sent', null, [thread({ status: 'snoozed', snoozedUntil: '{{next(0 9 * * 1)}}' })])],
  ['When a new text arrives, tag the thread vip and assign it to lead@example.com', onEvent('message.received', eq('type', 'sms'), [thread({ addTags: ['vip'] }), thread({ assigneeEmail: 'lead@example.com' })])],
  ["When a note is added, add the tags 'Needs review', urgent to the conversation", onEvent('thread.note_added', null, [thread({ addTags: ['needs review', 'urgent'] })])],
  ['When a thread is reopened, remove the tag waiting from the thread', onEvent('thread.reopened', null, [thread({ removeTags: ['waiting'] }, '{{event.data.id}}')])],
  // "unread" is kept: the digest lists the emails not read yet, not the messages since the last run.
  ['Every weekday at 8am, send me a summary of unread emails', scheduled('0 8 * * 1-5', [unreadDigest('unreadEmails', 'unread emails')])],
  ['Every day at 9, summarize unread messages', scheduled('0 9 * * *', [unreadDigest('unread', 'unread messages')])],
  ['Every 15 minutes, write a digest', scheduled('*/15 * * * *')],
  ['Every minute, write a summary of the messages since the last run', scheduled('* * * * *')],
  ['On the first of every month at 9, write a summary', scheduled('0 9 1 * *')],
  ['On the 15th of each month at 18:45, write a digest', scheduled('45 18 15 * *')],
  ['Every Monday and Thursday at 8:15 am, write a digest', scheduled('15 8 * * 1,4')],
  ['Every weekend at 10, write a digest', scheduled('0 10 * * 0,6')],
  ['Every 2 hours, write a digest', scheduled('0 */2 * * *')],
  ['Weekly, write a digest', scheduled('0 9 * * 1')],
  ['Every day at midnight, write a digest', scheduled('0 0 * * *')],
  ['Every day at 9 Europe/Paris, write a digest', scheduled('0 9 * * *', [digest], 'Europe/Paris')],
  ['Every Friday at 5pm in America/New_York time, write a digest', scheduled('0 17 * * 5', [digest], 'America/New_York')],
  ['Every day at 6am UTC, write a digest', scheduled('0 6 * * *')],
  ['Every afternoon, write a digest', scheduled('0 14 * * *')],
  ["When a contact's phone number is added, write a digest", onEvent('contact.phone_number.created', null, [digest])],
];

describe('the built-in evaluator: phrasings and their plans', () => {
  it('covers at least 45 phrasings', () => {
    expect(PLANNED.length).toBeGreaterThanOrEqual(45);
  });

  it.each(PLANNED)('%s', async (instructions, plan) => {
    expect(await evaluate(instructions)).toEqual({ status: 'planned', plan });
  });

  it('every plan of the table passes validation', () => {
    for (const [, plan] of PLANNED) expect(validatePlan(plan, { creatorPermissions: ALL })).toEqual([]);
  });
});

describe('the built-in evaluator: failures', () => {
  const FAILED: [string, 'evaluation_failed' | 'code_generation_failed', RegExp][] = [
    ['Colorless green ideas sleep furiously', 'evaluation_failed', /No trigger or schedule.*e\.g\./],
    ['When an email arrives, do something nice', 'evaluation_failed', /No action.*mark it as read/],
    ['Every time a message arrives from a VIP, notify me', 'evaluation_failed', /did not understand "from a vip"/],
    ['Mark it as read', 'evaluation_failed', /No trigger/],
    ['Every day at 9 in Europe/Atlantis time, write a digest', 'evaluation_failed', /europe\/atlantis.*time zone/],
    ['Every Friday at 5pm, mark it as read', 'code_generation_failed', /mark it as read.*scheduled automation has no message/],
    ['When a contact is deleted, archive it', 'code_generation_failed', /archive it.*contact\.deleted.*not a message event/],
    ['Every day at 9, close the thread', 'code_generation_failed', /close the thread.*scheduled automation has no message or thread/],
    // An answer that does not come is no event: refused, saying why and what works instead.
    ['Close threads that get no answer from the customer for 7 days', 'code_generation_failed', /"get no answer from the customer for 7 days" waits for a message that does not come.*When a message is sent, mark the thread as pending/],
    ["When a customer hasn't replied within 3 days, close the thread", 'code_generation_failed', /waits for a message that does not come/],
    ['Every day at 9, tag the thread vip', 'code_generation_failed', /tag the thread vip.*scheduled automation has no message or thread/],
    ['When a contact is added in a thread tagged vip, write a digest', 'evaluation_failed', /in a thread tagged vip.*tests the thread of the event.*"contact\.created"/],
    [`When a new email arrives, tag the thread ${'x'.repeat(51)}`, 'evaluation_failed', /longer than a tag may be \(50 characters\)/],
  ];
  it('the phrasing the refusal of an awaited answer suggests makes a plan', async () => {
    const outcome = (await evaluate('Close threads that get no answer from the customer for 7 days')) as { reason: string };
    const suggested = /"(When a message is sent, mark the thread as pending)"/.exec(outcome.reason)![1]!;
    expect(await evaluate(suggested)).toEqual({ status: 'planned', plan: onEvent('message.sent', null, [thread({ status: 'pending' })]) });
  });

  it.each(FAILED)('%s → %s', async (instructions, status, reason) => {
    const outcome = await evaluate(instructions);
    expect(outcome.status).toBe(status);
    expect(outcome).toHaveProperty('reason', expect.stringMatching(reason));
  });

  it('a reason shows a quoted text as quoted, never the mask the scanner reads it through', async () => {
    for (const instructions of ["Every Friday at 5pm, reply 'Thanks, we got it'", 'When a customer whose type is "VIP" is deleted, set its status to "gone"', "When a contact is deleted, forward it to ada@example.com with the note 'see this'"]) {
      const outcome = await evaluate(instructions);
      expect(outcome.status, instructions).not.toBe('planned');
      const reason = (outcome as { reason: string }).reason;
      // eslint-disable-next-line no-control-regex
      expect(reason, instructions).not.toMatch(/[\u0000-\u0008\u000b-\u001f]/);
    }
    const outcome = (await evaluate("Every Friday at 5pm, reply 'Thanks, we got it'")) as { reason: string };
    expect(outcome.reason).toMatch(/reply 'thanks, we got it'/);
  });

  it('a creator without messages:write gets code_generation_failed naming the permission', async () => {
    const outcome = await evaluate('When a new email arrives, mark it as read', {}, ['automations:write', 'messages:read']);
    expect(outcome).toEqual({ status: 'code_generation_failed', reason: expect.stringMatching(/"messages:write"/) });
    expect(await evaluate('When a new email arrives, mark it as read', {}, ['automations:write', 'messages:write'])).toMatchObject({ status: 'planned' });
  });

  it('a creator without contacts:write cannot plan a contact for the sender', async () => {
    const outcome = await evaluate('When a new email arrives, create a contact for the sender', {}, ['messages:write']);
    expect(outcome).toEqual({ status: 'code_generation_failed', reason: expect.stringMatching(/contacts:write/) });
  });
});

describe('the built-in evaluator: given fields win', () => {
  it('a given cronExpression makes it scheduled, as given', async () => {
    expect(await evaluate('Write a digest', { cronExpression: '0 7 * * 2' })).toEqual({ status: 'planned', plan: scheduled('0 7 * * 2') });
    expect(await evaluate('Every Monday at 9, write a digest', { cronExpression: '30 6 * * *' })).toEqual({ status: 'planned', plan: scheduled('30 6 * * *') });
  });

  it('a given triggerEvent is kept, and message conditions still come from the words', async () => {
    expect(await evaluate('Mark it as read', { triggerEvent: 'message.received' })).toEqual({ status: 'planned', plan: onEvent('message.received', null, [read]) });
    expect(await evaluate('When a customer is added, write a digest', { triggerEvent: 'contact.created' })).toEqual({ status: 'planned', plan: onEvent('contact.created', null, [digest]) });
    expect(await evaluate('Mark emails from ada@example.com as read', { triggerEvent: 'message.received' })).toEqual({
      status: 'planned',
      plan: onEvent('message.received', all(email, eq('sender', 'ada@example.com')), [read]),
    });
  });

  it('a given condition is kept as it is', async () => {
    const condition = { field: 'metadata.source', operator: 'equals', value: 'web' };
    expect(await evaluate('When a new email arrives from ada@example.com, archive it', { condition })).toEqual({ status: 'planned', plan: onEvent('message.received', condition as Condition, [archive]) });
  });

  it('a given triggerType decides between the schedule and the event', async () => {
    expect(await evaluate('Every day at 9am, write a digest', { triggerType: 'event' })).toMatchObject({ status: 'evaluation_failed', reason: expect.stringMatching(/No trigger/) });
    expect(await evaluate('When a new email arrives, write a digest', { triggerType: 'scheduled' })).toMatchObject({ status: 'evaluation_failed', reason: expect.stringMatching(/scheduled but the instructions state no schedule/) });
    expect(await evaluate('When a customer is added every day at 9, write a digest', { triggerType: 'event' })).toEqual({ status: 'planned', plan: onEvent('customer.created', null, [digest]) });
  });

  it('a given condition or trigger that is not valid makes it code_generation_failed', async () => {
    expect(await evaluate('Write a digest', { triggerEvent: 'invoice.paid' })).toEqual({ status: 'code_generation_failed', reason: expect.stringMatching(/"invoice\.paid" is not an event type/) });
    expect(await evaluate('When a new email arrives, archive it', { condition: { field: 'x', operator: 'like', value: 1 } })).toEqual({
      status: 'code_generation_failed',
      reason: expect.stringMatching(/operator: must be one of/),
    });
  });
});

describe('validatePlan', () => {
  const base = onEvent('message.received', email, [read]);
  const issues = (plan: Partial<Plan>, perms: readonly string[] = ALL) => validatePlan({ ...base, ...plan }, { creatorPermissions: perms });

  it('accepts a valid plan', () => {
    expect(issues({})).toEqual([]);
  });

  it.each<[string, Partial<Plan>, RegExp]>([
    ['an event outside the catalog', { triggerEvent: 'message.exploded' }, /not an event type of the catalog/],
    ['a scheduled plan on another event', { triggerType: 'scheduled', triggerEvent: 'message.received', cronExpression: '0 9 * * *', actions: [digest], permissions: opsOf([digest]) }, /schedule\.tick/],
    ['an invalid cron expression', { ...scheduled('61 9 * * *'), timezone: null }, /not a valid cron/],
    ['an invalid time zone', { timezone: 'Mars/Olympus' }, /not an IANA time zone/],
    ['an invalid condition', { condition: { field: 'type', operator: 'equals' } as Condition }, /needs a value/],
    ['no actions', { actions: [], permissions: { operations: [] } }, /no actions/],
    ['an unknown operation', { actions: [{ operation: 'messages.explode', input: {} }], permissions: { operations: ['messages.explode'] } }, /unknown operation "messages\.explode"/],
    ['a read operation', { actions: [{ operation: 'messages.list', input: {} }], permissions: { operations: ['messages.list'] } }, /only writes/],
    ['an automations operation', { actions: [{ operation: 'automations.pause', input: { id: '{{event.resourceId}}' } }], permissions: { operations: ['automations.pause'] } }, /"automations" area are not allowed/],
    ['an input the schema refuses', { actions: [update({ readAt: 'yesterday' })] }, /readAt/],
    ['an unknown field', { actions: [update({ colour: 'red' })] }, /colour/],
    ['an unknown template', { actions: [update({ readAt: '{{tomorrow}}' })] }, /unknown template expression "\{\{tomorrow\}\}"/],
    ['a reference to a later step', { actions: [{ operation: 'contacts.create_email', input: { id: '{{steps.0.id}}', email: 'a@b.co' } }], permissions: { operations: ['contacts.create_email'] } }, /has not run yet/],
    ['permissions that differ from the steps', { permissions: { operations: ['messages.update', 'contacts.create'] } }, /permissions\.operations must list exactly/],
    ['an event template in a scheduled plan', { ...scheduled('0 9 * * *', [read]) }, /needs an event/],
  ])('refuses %s', (_, plan, issue) => {
    expect(issues(plan)).toEqual(expect.arrayContaining([expect.stringMatching(issue)]));
  });

  it('refuses steps whose permission the creator lacks', () => {
    expect(issues({}, ['messages:read'])).toEqual([expect.stringMatching(/lacks the "messages:write" permission/)]);
    expect(issues({}, ['messages:write'])).toEqual([]);
  });

  it('does not judge values known only at run time (the event record, the sender)', () => {
    const createEmail = { operation: 'contacts.create_email', input: { id: '{{steps.0.id}}', email: '{{sender.address}}' } };
    const steps = [{ operation: 'contacts.create', input: { name: '{{event.data.summary}}' } }, createEmail];
    expect(issues({ actions: steps, permissions: opsOf(steps) })).toEqual([]);
  });

  it('reads a send to a template as a text or an email by the rest of its input, never by a sample sender', () => {
    const send = (input: Record<string, unknown>) => issues({ actions: [{ operation: 'messages.send', input }], permissions: { operations: ['messages.send'] } });
    // A text: no subject, `to` the number only the triggering message knows.
    expect(send({ to: ['{{sender.phoneNumber}}'], text: 'Thanks' })).toEqual([]);
    expect(send({ to: ['{{sender.address}}'], text: 'Thanks' })).toEqual([]);
    expect(send({ channelId: '{{event.data.channelId}}', to: ['{{event.data.sender.phoneNumber}}'], text: 'Thanks' })).toEqual([]);
    // An email: a subject, or a known address.
    expect(send({ channelId: '{{event.data.channelId}}', to: ['{{sender.address}}'], subject: 'Hi', text: 'Thanks' })).toEqual([]);
    expect(send({ channelId: '{{event.data.channelId}}', to: ['ada@example.com', '{{sender.address}}'], text: 'Thanks' })).toEqual([expect.stringMatching(/subject/)]);
    // What is known is still judged: a text's own rules.
    expect(send({ to: ['{{sender.phoneNumber}}'], text: 'x'.repeat(2000) })).toEqual([expect.stringMatching(/text: Too long for a text/)]);
  });
});

describe('evaluatorFromConfig', () => {
  it('is the built-in evaluator unless a URL and a model are set', () => {
    expect(evaluatorFromConfig({}).name).toBe('builtin');
    expect(evaluatorFromConfig({ url: 'http://127.0.0.1:1/v1' }).name).toBe('builtin');
    expect(evaluatorFromConfig({ url: 'http://127.0.0.1:1/v1', model: 'm', apiKey: 'k' }).name).toBe('llm:m');
  });
});
