import { SCHEDULE_TRIGGER } from '../../modules/events/events.catalog.js';
import { THREAD_RECORD_EVENTS } from '../../modules/automations/thread-context.js';
import { triggerEventTypes, type Condition, type EvaluationOutcome, type EvaluationRequest, type Evaluator, type Plan, type PlanStep, type TriggerType } from '../../modules/automations/plan.js';
import {
  isNegation,
  resourceOfEvents,
  Scanner,
  takeActions,
  takeAmount,
  takeEmailActions,
  takeLevels,
  takeMessageConditions,
  takeRecordPhrases,
  recordConditions,
  takeSchedule,
  takeTimeConditions,
  takeThreadConditions,
  takeTimeZone,
  takeTrigger,
  AWAITED_ANSWER,
  unexplained,
  type ActionSpec,
} from './vocabulary.js';

/** What an unread digest lists. */
const UNREAD_WORDS = { unread: 'unread messages', unreadEmails: 'unread emails' } as const;

/** The sender of the messages the digest action writes. */
export const DIGEST_SENDER = 'Switchboard automations';

const NO_TRIGGER =
  'No trigger or schedule was recognized in the instructions. Say when the automation runs, e.g. "When a new email arrives from ada@example.com, …", "When a customer is added, …" or "Every Monday at 9, …".';
const NO_ACTION =
  'No action was recognized in the instructions. Say what the automation does, e.g. "… mark it as read", "… archive it", "… snooze it for 2 hours", "… set its importance to high", "… create a contact for the sender", "… write a summary of the messages since the last run", "… reply \'Thanks, we received it\'", "… forward it to sales@example.com" or "… send an email to sales@example.com saying \'…\'".';

/** Actions on the message that triggered the automation (a new email goes through its channel). */
const ON_MESSAGE = new Set<ActionSpec['kind']>(['read', 'unread', 'archive', 'snooze', 'set', 'contact', 'reply', 'forward', 'send']);
const MESSAGE_EVENTS = new Set(['message.received', 'message.sent', 'message.created', 'message.updated']);

const THREAD_EVENTS = new Set([...THREAD_RECORD_EVENTS, 'thread.note_added']);
const threadOfEvent = (eventTypes: string[]) => (eventTypes.every((t) => THREAD_RECORD_EVENTS.has(t)) ? '{{event.data.id}}' : '{{event.data.threadId}}');

const updateMessage = (patch: Record<string, unknown>): PlanStep => ({ operation: 'messages.update', input: { id: '{{event.resourceId}}', ...patch } });

/** The events a notice by email is about: a channel's health. */
const CHANNEL_HEALTH = new Set(['channel.error', 'channel.recovered']);

/** A notice's subject and text, written from the channel event's record (its name, address and lastError). */
function notice(eventTypes: string[]): { subject: string; text: string } {
  const about = 'The channel "{{event.data.name}}" ({{event.data.address}})';
  if (eventTypes.length === 1 && eventTypes[0] === 'channel.error') {
    return {
      subject: 'Channel "{{event.data.name}}" stopped working',
      text: `${about} stopped working at {{event.occurredAt}}.\n\nWhat failed: {{event.data.lastError}}\n\nIts messages wait (or fail) until it works again; a message says so when it does. GET /v1/channels/{{event.resourceId}} shows its status.`,
    };
  }
  if (eventTypes.length === 1 && eventTypes[0] === 'channel.recovered') {
    return { subject: 'Channel "{{event.data.name}}" works again', text: `${about} works again since {{event.occurredAt}}.` };
  }
  return { subject: 'Channel "{{event.data.name}}" is {{event.data.status}}', text: `${about} is {{event.data.status}} since {{event.occurredAt}} ({{event.type}}). {{event.data.lastError}}` };
}

function stepsOf(action: ActionSpec, index: number, types: string[], eventTypes: string[], me: string | null): PlanStep[] {
  switch (action.kind) {
    case 'read':
      return [updateMessage({ readAt: '{{now}}' })];
    case 'unread':
      return [updateMessage({ readAt: null })];
    case 'archive':
      return [updateMessage({ archivedAt: '{{now}}' })];
    case 'snooze':
      return [updateMessage({ snoozedUntil: action.until })];
    case 'set':
      return [updateMessage({ [action.field]: action.value })];
    case 'contact': {
      const byPhone = types.length > 0 && types.every((t) => t === 'phone' || t === 'sms');
      return [
        { operation: 'contacts.create', input: { name: '{{sender.name}}' } },
        byPhone
          ? { operation: 'contacts.create_phone_number', input: { id: `{{steps.${index}.id}}`, phoneNumber: '{{sender.address}}' } }
          : { operation: 'contacts.create_email', input: { id: `{{steps.${index}.id}}`, email: '{{sender.address}}' } },
      ];
    }
    case 'reply':
      return [{ operation: 'messages.reply', input: action.replyAll ? { id: '{{event.resourceId}}', text: action.text, replyAll: true } : { id: '{{event.resourceId}}', text: action.text } }];
    case 'forward':
      return [{ operation: 'messages.forward', input: action.text === undefined ? { id: '{{event.resourceId}}', to: action.to } : { id: '{{event.resourceId}}', to: action.to, text: action.text } }];
    case 'send':
      return [{ operation: 'messages.send', input: { channelId: '{{event.data.channelId}}', to: action.to, subject: action.subject, text: action.text } }];
    case 'text':
      // No channel named: the organization's text channel (messages.send picks it when there is exactly one).
      return [{ operation: 'messages.send', input: { to: action.to, text: action.text } }];
    case 'notify':
      // Through an email channel that works (not the one the event is about, when there is another).
      return [{ operation: 'messages.send', input: { channelId: '{{mailChannel}}', to: action.to.map((a) => (a === 'me' ? me! : a)), ...notice(eventTypes) } }];
    case 'thread':
      return [{ operation: 'threads.update', input: { id: threadOfEvent(eventTypes), ...action.patch } }];
    case 'digest':
      return [
        {
          operation: 'messages.create',
          input: action.unread
            ? { direction: 'incoming', type: 'note', sender: DIGEST_SENDER, summary: `Digest of the ${UNREAD_WORDS[action.unread]}`, text: `{{digest.${action.unread}}}` }
            : { direction: 'incoming', type: 'note', sender: DIGEST_SENDER, summary: 'Digest of the messages since {{lastRunAt}}', text: '{{digest}}' },
        },
      ];
  }
}

/**
 * The longest instructions the built-in evaluator reads. An automation is a sentence or two; the bound
 * keeps the reading (each phrase read is blanked out, then the text read again) a few milliseconds.
 */
export const MAX_INSTRUCTIONS = 2000;

/** Whether a cron expression runs at the cadence a digest is named for (daily, weekly, monthly). */
function hasCadence(cron: string, cadence: 'daily' | 'weekly' | 'monthly'): boolean {
  const [minute, hour, dom, month, dow] = cron.trim().split(/\s+/);
  const onceADay = /^\d{1,2}$/.test(minute ?? '') && /^\d{1,2}$/.test(hour ?? '') && month === '*';
  if (!onceADay) return false;
  if (cadence === 'daily') return dom === '*' && (dow === '*' || dow === '1-5');
  if (cadence === 'weekly') return dom === '*' && /^\d$/.test(dow ?? '');
  return dom !== '*' && dow === '*';
}

const test = (field: string, operator: 'equals', value: unknown): Condition => ({ field, operator, value });

const fail = (status: 'evaluation_failed' | 'code_generation_failed', reason: string): EvaluationOutcome => ({ status, reason });

/** Joins tests into one condition: none → null, one → itself, more → `all`. */
const conjunction = (tests: Condition[]): Condition | null => (tests.length === 0 ? null : tests.length === 1 ? tests[0]! : { all: tests });

/** Phrasings that work, close to what the instructions were about (a schedule, messages, other records). */
const WORKS: Record<'scheduled' | 'message' | 'record', string> = {
  scheduled: 'Phrasings that work: "Every Sunday at 9pm New York time, write a digest", "Every weekday at 9am and 5pm, write a summary of the messages since the last run", "On the last day of every month at 6pm, write a digest" (see docs/automations-vocabulary.md).',
  message:
    'Phrasings that work: "When a new email arrives from ada@example.com after 6pm, snooze it until tomorrow 9am", "When an email from anyone at acme.com except boss@acme.com arrives outside business hours, mark it as urgent", "When an email from billing@acme.com arrives, reply \'Thanks, we received your invoice\'" (see docs/automations-vocabulary.md).',
  record:
    'Phrasings that work: "When a customer whose type is VIP is created or updated, write a digest", "When a transaction over 1000 EUR is added, write a digest", "When a channel stops working, email ops@example.com" (see docs/automations-vocabulary.md).',
};

/**
 * The refusal for an answer that does not come ("close threads that get no answer from the customer for 7
 * days"): an automation runs when something happens or on a schedule, and acts on the record of its event;
 * the absence of a message is neither, and no step finds the threads that wait.
 */
function waitingRefusal(phrase: string): string {
  return (
    `"${phrase}" waits for a message that does not come. An automation runs when something happens (a message arrives, a thread changes) or on a schedule, and acts on the record of that event; ` +
    'the built-in evaluator has no step that finds the threads waiting on the customer, so no plan was made. What works: "When a message is sent, mark the thread as pending" keeps the threads that wait on the customer apart ' +
    '(GET /v1/threads?status=pending, oldest first with sortOrder=asc; a reply opens them again), and closing the old ones is a PATCH /v1/threads/{id} each, or an assistant with threads_write. See docs/automations-vocabulary.md.'
  );
}

/** The refusal for words left unread: quotes them, and shows phrasings that work. */
function notUnderstood(spans: string[], about: keyof typeof WORKS): EvaluationOutcome {
  const quoted = spans.slice(0, 3).map((x) => `"${x.length > 80 ? `${x.slice(0, 80)}…` : x}"`).join(', ');
  const negation = spans.find(isNegation);
  if (negation) {
    return fail(
      'evaluation_failed',
      `The instructions hold a negation or exception the built-in evaluator cannot apply: "${negation}". It never drops one, so no plan was made. Say what the automation does and to which messages, e.g. "When an email arrives from anyone at acme.com except boss@acme.com, archive it" or "When an email arrives outside business hours, mark it as urgent".`,
    );
  }
  return fail('evaluation_failed', `The built-in evaluator did not understand ${quoted} in the instructions, so no plan was made (a plan must account for every word). ${WORKS[about]}`);
}

const MESSAGE_VERBS: Record<string, RegExp> = {
  'message.received': /\b(?:arrives?|comes? in|(?:is|are|gets|get|was|were) (?:received|recorded|delivered)|lands?|(?:is|are) in (?:my|the) inbox)\b/,
  'message.sent': /\b(?:(?:is|are|gets|get|was|were|has been) (?:sent|recorded)|goes out)\b/,
};

/**
 * Builds the plan from the instructions with the English vocabulary (vocabulary.ts). Only the
 * `instructions` are read; the fields the creator gave (`given`) are kept as they are, and the words
 * that say the same thing are read and set aside. Every word must be understood: what is left unread
 * makes the evaluation fail, quoting it.
 */
export function planFromInstructions(request: EvaluationRequest): EvaluationOutcome {
  const { given } = request;
  if (request.instructions.length > MAX_INSTRUCTIONS) {
    return fail(
      'evaluation_failed',
      `The instructions are ${request.instructions.length} characters long; the built-in evaluator reads up to ${MAX_INSTRUCTIONS}. Say what the automation does in a sentence or two, e.g. "When a new email arrives from ada@example.com, archive it".`,
    );
  }
  const s = Scanner.of(request.instructions);
  const awaited = AWAITED_ANSWER.exec(s.text);
  if (awaited) return fail('code_generation_failed', waitingRefusal(s.plain.slice(awaited.index, awaited.index + awaited[0].length)));
  const emails = takeEmailActions(s);
  const zone = takeTimeZone(s);
  if ('error' in zone) return fail('evaluation_failed', zone.error);
  const actions = [...emails, ...takeActions(s)].sort((x, y) => x.at - y.at);
  const broken = actions.find((a) => (a.kind === 'snooze' || a.kind === 'thread') && a.error);
  if (broken && (broken.kind === 'snooze' || broken.kind === 'thread')) return fail('evaluation_failed', `"${broken.phrase}": ${broken.error}`);
  const amount = takeAmount(s);
  if (amount && 'error' in amount) return fail('evaluation_failed', amount.error);
  const levels = takeLevels(s);
  const recordPhrases = takeRecordPhrases(s);
  const threadTests = takeThreadConditions(s);
  if (threadTests && 'error' in threadTests) return fail('evaluation_failed', threadTests.error);
  const trigger = takeTrigger(s);
  if (trigger) {
    const verb = MESSAGE_VERBS[trigger.event];
    if (verb) s.takeAll(verb);
  }

  const givenEvent = given.triggerEvent && given.triggerEvent !== 'automation.pending' ? given.triggerEvent : undefined;
  const stated = given.triggerType ?? (given.cronExpression ? 'scheduled' : givenEvent || trigger ? 'event' : null);
  let timeTests: Condition[] = [];
  if (stated === 'event') {
    const read = takeTimeConditions(s);
    if ('error' in read) return fail('evaluation_failed', read.error);
    timeTests = read;
  }
  const schedule = takeSchedule(s);
  if (schedule && typeof schedule !== 'string') return fail('evaluation_failed', schedule.error);
  if (trigger && schedule && !given.triggerType && !given.cronExpression && !givenEvent) {
    return fail(
      'evaluation_failed',
      `The instructions state both an event ("${trigger.event}") and a schedule ("${schedule}"); an automation has one trigger. Say either "When a new email arrives, …" or "Every day at 9am, …"; for a time of the event, say "… arrives after 6pm" or "… arrives on weekends".`,
    );
  }

  const triggerType: TriggerType | null = stated ?? (schedule ? 'scheduled' : null);
  if (!triggerType) return fail('evaluation_failed', NO_TRIGGER);

  let triggerEvent: string;
  let cronExpression: string | null;
  if (triggerType === 'scheduled') {
    cronExpression = given.cronExpression ?? schedule;
    if (!cronExpression) return fail('evaluation_failed', `The automation is scheduled but the instructions state no schedule. Say when it runs, e.g. "Every Monday at 9, …", "Every day at 7:30 pm, …" or "Every 15 minutes, …".`);
    triggerEvent = givenEvent ?? SCHEDULE_TRIGGER;
  } else {
    cronExpression = given.cronExpression ?? null;
    const event = givenEvent ?? trigger?.event;
    if (!event) return fail('evaluation_failed', NO_TRIGGER);
    triggerEvent = event;
  }

  const eventTypes = triggerType === 'event' ? triggerEventTypes(triggerEvent) : [];
  const onMessage = eventTypes.length > 0 && eventTypes.every((t) => MESSAGE_EVENTS.has(t));
  const types = trigger?.types ?? [];
  const tests: Condition[] = [];
  if (onMessage) tests.push(...takeMessageConditions(s, trigger && MESSAGE_EVENTS.has(trigger.event) ? types : [], levels));
  else if (levels.length) return fail('evaluation_failed', `Importance and urgency belong to messages, and ${triggerType === 'scheduled' ? 'a scheduled automation has no message' : `the trigger "${triggerEvent}" is not a message event`}. E.g. "When an urgent email arrives, …".`);
  const resource = triggerType === 'event' && !onMessage ? resourceOfEvents(eventTypes) : null;
  // "When an email channel stops working": the channel's kind.
  const onChannelHealth = eventTypes.length > 0 && eventTypes.every((t) => CHANNEL_HEALTH.has(t));
  if (onChannelHealth && trigger && CHANNEL_HEALTH.has(triggerEventTypes(trigger.event)[0]!) && trigger.types.length === 1) tests.push(test('type', 'equals', trigger.types[0]));
  if (amount) {
    if (resource !== 'customer.transaction') return fail('evaluation_failed', `"${amount.phrase}": an amount applies to transactions only, e.g. "When a transaction over 1000 EUR is added, …".`);
    tests.push(...amount.tests);
  }
  if (recordPhrases.length) {
    const record = recordConditions(recordPhrases, resource);
    if ('error' in record) return fail('evaluation_failed', record.error);
    tests.push(...record);
  }
  if (threadTests) {
    const onThreads = eventTypes.length > 0 && eventTypes.every((t) => MESSAGE_EVENTS.has(t) || THREAD_EVENTS.has(t));
    if (!onThreads) {
      const what = triggerType === 'scheduled' ? 'a scheduled automation has no message or thread' : `its trigger "${triggerEvent}" is neither a message nor a thread event`;
      return fail('evaluation_failed', `"${threadTests.phrase}" tests the thread of the event, but ${what}. E.g. "When a message arrives in a thread tagged vip, assign the thread to lead@example.com".`);
    }
    tests.push(...threadTests.tests);
  }
  tests.push(...timeTests);
  const condition: Condition | null = (given.condition as Condition | undefined) ?? conjunction(tests);

  if (actions.length === 0) return fail('evaluation_failed', NO_ACTION);
  s.takeAll(/\b(?:every|each|any) ?time\b/); // "every time an email arrives": when
  const left = unexplained(s);
  if (left.length) return notUnderstood(left, triggerType === 'scheduled' ? 'scheduled' : onMessage ? 'message' : 'record');
  const cadence = actions.find((a) => a.kind === 'digest' && a.cadence);
  if (cadence && cadence.kind === 'digest' && !(triggerType === 'scheduled' && cronExpression && hasCadence(cronExpression, cadence.cadence!))) {
    return fail(
      'evaluation_failed',
      `"${cadence.phrase}" does not agree with ${triggerType === 'scheduled' ? `the schedule "${cronExpression}"` : 'an event trigger'}; say when it runs, e.g. "Every Sunday at 9pm, send me a weekly digest" or "Every day at 6pm, write a digest".`,
    );
  }
  const misplaced = actions.find((a) => ON_MESSAGE.has(a.kind) && !onMessage);
  if (misplaced) {
    const what = triggerType === 'scheduled' ? 'a scheduled automation has no message' : `its trigger "${triggerEvent}" is not a message event`;
    const acts = misplaced.kind === 'send' ? 'sends through the channel of the message that triggered the automation' : 'acts on the message that triggered the automation';
    return fail(
      'code_generation_failed',
      `"${misplaced.phrase}" ${acts}, but ${what}. Trigger it on messages, e.g. "When a new email arrives, ${misplaced.phrase}".`,
    );
  }

  const onThread = eventTypes.length > 0 && eventTypes.every((t) => MESSAGE_EVENTS.has(t) || THREAD_EVENTS.has(t));
  const threadAction = actions.find((a) => a.kind === 'thread');
  if (threadAction && !onThread) {
    const what = triggerType === 'scheduled' ? 'a scheduled automation has no message or thread' : `its trigger "${triggerEvent}" is neither a message nor a thread event`;
    return fail('code_generation_failed', `"${threadAction.phrase}" changes the thread of the message (or thread event) that triggered the automation, but ${what}. E.g. "When a new email from ada@example.com arrives, assign the thread to lead@example.com".`);
  }

  const notifying = actions.find((a) => a.kind === 'notify');
  if (notifying && !onChannelHealth) {
    return fail(
      'code_generation_failed',
      `"${notifying.phrase}" sends a notice about a channel that stopped working or works again, but ${triggerType === 'scheduled' ? 'a scheduled automation has no such event' : `its trigger "${triggerEvent}" is not one`}. E.g. "When a channel stops working, email me"; to pass a message on, say "forward it to ops@example.com".`,
    );
  }
  const me = request.creator?.email ?? null;
  if (notifying && notifying.kind === 'notify' && notifying.to.includes('me') && !me) {
    return fail(
      'evaluation_failed',
      `"${notifying.phrase}": the automation was created with an API key, which has no person to write to. Name the address, e.g. "When a channel stops working, email ops@example.com".`,
    );
  }

  const steps: PlanStep[] = [];
  for (const action of actions) steps.push(...stepsOf(action, steps.length, types, eventTypes, me));
  const plan: Plan = {
    triggerType,
    triggerEvent,
    cronExpression,
    timezone: zone.zone,
    condition,
    actions: steps,
    permissions: { operations: [...new Set(steps.map((st) => st.operation))] },
  };
  return { status: 'planned', plan };
}

/** The built-in evaluator: deterministic, offline, English. */
export const builtinEvaluator: Evaluator = {
  name: 'builtin',
  evaluate: async (request) => planFromInstructions(request),
};
