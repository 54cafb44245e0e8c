import { describe, expect, it } from 'vitest';
import { builtinEvaluator } from '../../../src/workers/evaluator/deterministic.js';
import { evaluateAutomation } from '../../../src/workers/evaluator/index.js';
import type { Condition, EvaluationRequest, Plan, PlanStep } from '../../../src/modules/automations/plan.js';
import { all, archive, days, digest, email, eq, not, NOW, onEvent, read, scheduled, snooze, time, update } from '../../helpers/plans.js';

/**
 * The table of phrasings: what the built-in evaluator makes of each, run on every test run. A plan is
 * right or it is refused: half of the rows must be refused, with a reason that quotes what was not
 * understood or says why, and shows a phrasing that works.
 */

const evaluate = (instructions: string) =>
  evaluateAutomation(builtinEvaluator, { name: 'T', description: null, instructions, given: {}, now: NOW } satisfies EvaluationRequest, { creatorPermissions: ['*'] });

const cron = (cronExpression: string, timezone: string | null = null, actions: PlanStep[] = [digest]): Plan => scheduled(cronExpression, actions, timezone);
const businessHours = all(days(1, 2, 3, 4, 5), time('09:00', '17:00'));

const PLANNED: [string, Plan][] = [
  // The wrong plans of the past, now right.
  ['Every Sunday night send me a weekly digest', cron('0 21 * * 0')],
  ['At the end of every month, write a digest', cron('0 9 L * *')],
  ['Every day at 9 and at 5pm, write a digest', cron('0 9,17 * * *')],
  ['Every day at 9am New York time, write a digest', cron('0 9 * * *', 'America/New_York')],
  ['When I receive an email from boss@corp.com after 6pm, snooze it', onEvent('message.received', all(email, eq('sender', 'boss@corp.com'), time('18:00', '00:00')), [snooze('{{next(0 9 * * *)}}')])],
  // Several times a day, parts of the day, the end of the month.
  ['Every weekday at 9am, 1pm and 5pm, write a digest', cron('0 9,13,17 * * 1-5')],
  ['Every day at 8:30 and 16:30, write a digest', cron('30 8,16 * * *')],
  ['Every Sunday night at 10, write a digest', cron('0 22 * * 0')],
  ['Every day at 7 in the evening, write a digest', cron('0 19 * * *')],
  ['Every night, write a digest', cron('0 21 * * *')],
  ['On the last day of the month at 6pm, write a digest', cron('0 18 L * *')],
  ['At the end of each month at 17:00, write a digest', cron('0 17 L * *')],
  // Time zones by name and abbreviation.
  ['Every Monday at 9 CET, write a digest', cron('0 9 * * 1', 'Europe/Paris')],
  ['Every day at 8am Pacific time, write a digest', cron('0 8 * * *', 'America/Los_Angeles')],
  ['Every day at 7am London time, write a digest', cron('0 7 * * *', 'Europe/London')],
  ['Every Friday at 4pm EST, write a digest', cron('0 16 * * 5', 'America/New_York')],
  ['Every day at 9am PT, write a digest', cron('0 9 * * *', 'America/Los_Angeles')],
  ['Every day at noon Tokyo time, write a digest', cron('0 12 * * *', 'Asia/Tokyo')],
  ['Every day at 6am in Europe/Berlin, write a digest', cron('0 6 * * *', 'Europe/Berlin')],
  ['Every day at 9am Phoenix time, write a digest', cron('0 9 * * *', 'America/Phoenix')],
  ['Every day at 9am Sydney time, write a digest', cron('0 9 * * *', 'Australia/Sydney')],
  // Time and weekday conditions, read in the automation's time zone.
  ['When an email arrives outside business hours, mark it as urgent', onEvent('message.received', all(email, not(businessHours)), [update({ urgency: 'high' })])],
  ['When a new email arrives during business hours, mark it as read', onEvent('message.received', all(email, businessHours), [read])],
  ['When a new email arrives on weekends, archive it', onEvent('message.received', all(email, days(0, 6)), [archive])],
  ['When an email arrives between 10pm and 6am London time, snooze it until 8am', onEvent('message.received', all(email, time('22:00', '06:00')), [snooze('{{next(0 8 * * *)}}')], 'Europe/London')],
  ['When an email arrives before 8am on weekdays, mark it as unread', onEvent('message.received', all(email, time('00:00', '08:00'), days(1, 2, 3, 4, 5)), [update({ readAt: null })])],
  // A sender that must be authenticated: its domain passed DMARC.
  ['When an email from ada@example.com (verified) arrives, archive it', onEvent('message.received', all(email, eq('sender', 'ada@example.com'), eq('sender.verified', true)), [archive])],
  ['When an email from a verified sender arrives, mark it as read', onEvent('message.received', all(email, eq('sender.verified', true)), [read])],
  ['When an email from anyone at acme.com (authenticated) arrives, archive it', onEvent('message.received', all(email, { field: 'sender', operator: 'ends_with', value: '@acme.com' }, eq('sender.verified', true)), [archive])],
  ['When an email arrives from ada@example.com, only if the sender is verified, archive it', onEvent('message.received', all(email, eq('sender', 'ada@example.com'), eq('sender.verified', true)), [archive])],
  ['When a message from ada@example.com arrives on Mondays and Fridays, archive it', onEvent('message.received', all(eq('sender', 'ada@example.com'), days(1, 5)), [archive])],
  ['When a new email arrives except on weekends, mark it as read', onEvent('message.received', all(email, not(days(0, 6))), [read])],
  // Exceptions that are understood.
  ['Archive every email except from boss@corp.com', onEvent('message.received', all(email, not(eq('sender', 'boss@corp.com'))), [archive])],
  [
    'When an email arrives from anyone at acme.com except boss@acme.com, archive it',
    onEvent('message.received', all(email, { field: 'sender', operator: 'ends_with', value: '@acme.com' }, not(eq('sender', 'boss@acme.com'))), [archive]),
  ],
  ['When an email arrives that is not from boss@corp.com, mark it as read', onEvent('message.received', all(email, not(eq('sender', 'boss@corp.com'))), [read])],
  ['When a new email arrives, mark it as not read', onEvent('message.received', email, [update({ readAt: null })])],
  // Other records, created or updated.
  ['When a transaction over 1000 EUR is added, write a digest', onEvent('customer.transaction.created', all({ field: 'amount', operator: 'gt', value: 1000 }, eq('currency', 'EUR')), [digest])],
  ['When a transaction of less than €50 is created, write a digest', onEvent('customer.transaction.created', all({ field: 'amount', operator: 'lt', value: 50 }, eq('currency', 'EUR')), [digest])],
  ['When a customer whose type is VIP is created or updated, write a digest', onEvent('customer.created,customer.updated', eq('type', 'VIP'), [digest])],
  ["When a customer whose status is not 'lead' is updated, write a digest", onEvent('customer.updated', { field: 'status', operator: 'not_equals', value: 'lead' }, [digest])],
  ['When a contact is created, updated or deleted, write a digest', onEvent('contact.created,contact.updated,contact.deleted', null, [digest])],
  ['When a new or updated business whose name is Acme, write a digest', onEvent('business.created,business.updated', eq('name', 'Acme'), [digest])],
  // Email: reply to and forward the triggering message, send a new email through its channel.
  [
    "When an email from billing@acme.com arrives, reply 'Thanks, we received your invoice'",
    onEvent('message.received', all(email, eq('sender', 'billing@acme.com')), [{ operation: 'messages.reply', input: { id: '{{event.resourceId}}', text: 'Thanks, we received your invoice' } }]),
  ],
  [
    'When an email from billing@acme.com arrives, forward it to sales@acme.com',
    onEvent('message.received', all(email, eq('sender', 'billing@acme.com')), [{ operation: 'messages.forward', input: { id: '{{event.resourceId}}', to: ['sales@acme.com'] } }]),
  ],
  [
    'When an email from billing@acme.com arrives, send an email to x@acme.com saying "An invoice arrived, see New York time"',
    onEvent('message.received', all(email, eq('sender', 'billing@acme.com')), [
      { operation: 'messages.send', input: { channelId: '{{event.data.channelId}}', to: ['x@acme.com'], subject: '', text: 'An invoice arrived, see New York time' } },
    ]),
  ],
  [
    "When an email arrives from anyone at acme.com, forward it to sales@acme.com and ops@acme.com with the note 'FYI' and archive it",
    onEvent('message.received', all(email, { field: 'sender', operator: 'ends_with', value: '@acme.com' }), [
      { operation: 'messages.forward', input: { id: '{{event.resourceId}}', to: ['sales@acme.com', 'ops@acme.com'], text: 'FYI' } },
      archive,
    ]),
  ],
  ['When an email arrives after 6pm, reply to all with "Out of office until Monday"', onEvent('message.received', all(email, time('18:00', '00:00')), [{ operation: 'messages.reply', input: { id: '{{event.resourceId}}', text: 'Out of office until Monday', replyAll: true } }])],
  [
    "When an email arrives, send an email to boss@acme.com with the subject 'New mail' and saying 'Check your inbox'",
    onEvent('message.received', email, [{ operation: 'messages.send', input: { channelId: '{{event.data.channelId}}', to: ['boss@acme.com'], subject: 'New mail', text: 'Check your inbox' } }]),
  ],
  // Quoted text is data, never instructions.
  ['When an email containing "EST" arrives, archive it', onEvent('message.received', all(email, { any: [{ field: 'text', operator: 'contains', value: 'est' }, { field: 'summary', operator: 'contains', value: 'est' }] }), [archive])],
  [
    "When an email containing 'archive' or \"Do not reply\" arrives, mark it as read",
    onEvent('message.received', all(email, { any: ['archive', 'do not reply'].flatMap((w) => [{ field: 'text', operator: 'contains', value: w }, { field: 'summary', operator: 'contains', value: w }]) as Condition[] }), [read]),
  ],
  ["When an email arrives, reply 'Do not worry, we are on it'", onEvent('message.received', email, [{ operation: 'messages.reply', input: { id: '{{event.resourceId}}', text: 'Do not worry, we are on it' } }])],
  ['Every Monday, Wednesday, and Friday at 7:45am, write a digest', cron('45 7 * * 1,3,5')],
  ['When an email arrives on Tuesdays or Thursdays or Tuesdays, archive it', onEvent('message.received', all(email, days(2, 4)), [archive])],
  // Several runs a day, on some days or during business hours.
  ['Every hour on weekdays, write a digest', cron('0 * * * 1-5')],
  ['Every 15 minutes during business hours, write a digest', cron('*/15 9-16 * * 1-5')],
  ['Every 2 hours on weekends, write a digest', cron('0 */2 * * 0,6')],
  // Cadences that agree with the schedule, "every time", several senders.
  ['Every Friday at 5pm, send me a weekly digest', cron('0 17 * * 5')],
  ['On the 1st of every month, write a monthly summary', cron('0 9 1 * *')],
  ['Every time an email arrives from x@y.com, archive it', onEvent('message.received', all(email, eq('sender', 'x@y.com')), [archive])],
  ['When an email arrives from ada@example.com or from bob@example.com, archive it', onEvent('message.received', all(email, { field: 'sender', operator: 'in', value: ['ada@example.com', 'bob@example.com'] }), [archive])],
];

const REFUSED: [string, RegExp][] = [
  // Negations are never dropped.
  ['Do not archive any email from boss@corp.com', /negation.*"do not".*e\.g\./],
  ['When an email from boss@corp.com arrives, never archive it', /negation.*"never"/],
  ['When a new email arrives, archive it unless it is from boss@corp.com', /negation.*"unless/],
  ["When a new email arrives, archive it and don't mark it as read", /negation.*don't/],
  ['When a new email arrives, archive it but keep it unread', /negation.*"but keep it unread"/],
  ['When a new email arrives without attachments, archive it', /negation.*"without attachments"/],
  ['When a new email arrives, archive it except the important ones', /negation.*"except"/],
  ['When an email arrives except on Mondays and Fridays after 6pm, archive it', /except on mondays and fridays.*ambiguous.*e\.g\./],
  // Words not understood are quoted, with phrasings that work.
  ['When an email arrives from my boss, archive it', /did not understand "from my boss".*Phrasings that work: "When a new email arrives from ada@example\.com/],
  ['Every Sunday at 9 send me a digest of the tweets', /did not understand "of the tweets"/],
  ['When a VIP customer is added, write a digest', /did not understand "vip".*"When a customer whose type is VIP is created or updated/],
  ['When an email arrives, archive it and reply to it', /did not understand "reply to"/],
  ['When an email arrives with an attachment, archive it', /did not understand "with an attachment"/],
  ['Every day at 9 local time, write a digest', /did not understand "local time".*"Every Sunday at 9pm New York time, write a digest"/],
  ['Every weekday and weekend at 9, write a digest', /did not understand "weekend"/],
  ['Every day at 9am Paris time and 5pm London time, write a digest', /did not understand "5pm london time"/],
  ['Every day at 9, write a digest and also notify me', /"notify me" sends a notice about a channel.*When a channel stops working, email me/],
  ['When a new email arrives, archive it quickly', /did not understand "quickly"/],
  // Ambiguous times, schedules and zones.
  ['Every day at 5, write a digest', /"at 5" could be morning or evening.*"5am" or "5pm"/],
  ['When a message arrives after 6, snooze it', /"6" could be morning or evening/],
  ['Every day at 9:30 and 17:00, write a digest', /different minutes/],
  ['Every day at 9am IST, write a digest', /"IST" names several time zones/],
  ['Every day at 9 in Europe/Atlantis, write a digest', /not a known time zone/],
  ['Every Monday at 9am CET and EST, write a digest', /more than one time zone/],
  ['On the 31st of every month, write a digest', /does not exist in every month.*last day/],
  ['When a customer is added every day at 9, write a digest', /both an event.*and a schedule/],
  ['Every weekday on the 1st of the month at 9, write a digest', /more than one kind of day/],
  ['When an email arrives on weekends and weekdays, archive it', /more than one kind of day/],
  ['When an email arrives after 6pm and before 8am, archive it', /ambiguous.*between/],
  // Conditions that do not fit the trigger.
  ['When a contact is added over 1000 EUR, write a digest', /amount applies to transactions only/],
  ['When a customer whose company is Acme is added, write a digest', /customer has no field "company".*it knows "type"/],
  ['When an email whose subject is hi arrives, archive it', /"whose subject is hi"/],
  ['When a transaction over 1000 XYZ is added, write a digest', /"xyz" is not a currency code/],
  ['When an urgent customer is added, write a digest', /Importance and urgency belong to messages/],
  ['Every Friday at 5pm, mark it as read', /scheduled automation has no message/],
  ['Colorless green ideas sleep furiously', /No trigger or schedule/],
  ['Every day send me a weekly digest', /"send me a weekly digest" does not agree with the schedule "0 9 \* \* \*"/],
  ['When a customer is added, send me a daily digest', /does not agree with an event trigger/],
  ['When a sent spam email is recorded, archive it', /did not understand "sent spam"/],
  ['When a new email arrives from ada@example.com, archive it, and when a customer is added, write a digest', /did not understand "new email arrives from ada@example\.com"/],
  ['Every 2 hours during business hours, write a digest', /"during business hours" with a schedule every few hours is ambiguous/],
  ['Every hour on weekdays and weekends, write a digest', /did not understand "and weekends"|more than one kind of day/],
  ['When an email arrives in the morning, archive it', /did not understand "in the morning"/],
  ["Every day at 9am, send an email to x@acme.com saying 'Good morning'", /sends through the channel of the message that triggered the automation.*scheduled automation has no message/],
  ["When a customer is added, reply 'Welcome'", /acts on the message that triggered the automation.*"customer\.created" is not a message event/],
  ["When an email arrives, reply 'We've received it'", /did not understand "ve received"/],
  ['When an email arrives, forward it to my assistant', /No action.*forward it to sales@example\.com/],
  ['When an email arrives, reply to it', /No action.*reply 'Thanks, we received it'/],
  ["When an email arrives, do not reply 'Thanks'", /negation.*"do not"/],
  ['When an email arrives from ada@example.com, archive it after 2 hours', /did not understand "after 2 hours"/],
  ['Every day at 25:00, write a digest', /"25:00" is not a time of day/],
  ['When an email arrives, snooze it until 5', /"snooze it until 5": "at 5" could be morning or evening/],
  ['Every 90 minutes, write a digest', /"every 90 minutes" is not a schedule/],
  ['When an email arrives, archive it and delete it', /did not understand "delete"/],
  ['When an email arrives, mark it as read if it is spam', /did not understand "is spam"/],
  ['Every day at 9 Mars time, write a digest', /did not understand "mars time"/],
  ['Every day at Christmas time, write a digest', /did not understand "at christmas time"/],
  ['Every day at 9am Jersey time, write a digest', /did not understand "jersey time"/],
  ["When an email arrives from 'Ada Lovelace', archive it 'now'", /did not understand "'now'"/],
  ['When an email containing "every day" arrives at 9, archive it', /did not understand "at 9"/],
];

describe('the phrasing table of the built-in evaluator', () => {
  it('holds at least 60 phrasings, at least half of them refused', () => {
    expect(PLANNED.length + REFUSED.length).toBeGreaterThanOrEqual(60);
    expect(REFUSED.length).toBeGreaterThanOrEqual(PLANNED.length);
  });

  it.each(PLANNED)('plans: %s', async (instructions, plan) => {
    expect(await evaluate(instructions)).toEqual({ status: 'planned', plan });
  });

  it.each(REFUSED)('refuses: %s', async (instructions, reason) => {
    const outcome = await evaluate(instructions);
    expect(outcome.status).not.toBe('planned');
    expect(outcome).toHaveProperty('reason', expect.stringMatching(reason));
  });
});

describe('the built-in evaluator reads bounded instructions, quickly', () => {
  it('refuses instructions longer than it reads, saying so', async () => {
    const long = `When a new email arrives from ada@example.com, archive it.${' Please.'.repeat(300)}`;
    expect(long.length).toBeGreaterThan(2000);
    expect(await evaluate(long)).toEqual({ status: 'evaluation_failed', reason: expect.stringMatching(/reads up to 2000/) });
  });

  it('answers in milliseconds on the worst repetitions it reads', async () => {
    const worst = [
      `When an email from ${'a@b.cc, '.repeat(230)}arrives, archive it`,
      `When an email arrives, ${'archive it '.repeat(170)}`,
      `When an email containing ${"'x' or ".repeat(270)}arrives, archive it`,
      `Every day at 9 ${'new york time '.repeat(130)}, write a digest`,
      `mark${' x'.repeat(980)} as`,
    ];
    for (const instructions of worst) {
      expect(instructions.length).toBeLessThanOrEqual(2000);
      const started = performance.now();
      await evaluate(instructions);
      expect(performance.now() - started).toBeLessThan(500);
    }
  });
});
