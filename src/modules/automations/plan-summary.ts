import type { ChannelKind } from '../channels/kind.js';
import { kindNamed } from '../channels/kinds.js';
import { SENDER_VERIFIED, THREAD_TAGS } from './condition.js';
import type { Condition, ConditionTest, Plan, PlanStep } from './plan.js';
import { triggerEventTypes } from './plan.js';

/**
 * `summarizePlan`: one or two plain English sentences that say what a plan does, generated from the
 * plan itself (never from the instructions), so that whoever approves an automation reads what will
 * actually run. Every part of the plan appears: the trigger or schedule with its time zone, the
 * condition, and each step; what has no wording of its own is shown as it is stored (a cron expression,
 * an operation with its input) rather than left out. A condition that tests the sender without requiring
 * it to be verified (DMARC) adds a sentence saying that the From header is not authenticated.
 */

const DAY_NAMES = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const MONTH_NAMES = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
const MAX_VALUE = 80;

const quote = (v: unknown): string => {
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  const text = typeof v === 'string' ? v : JSON.stringify(v) ?? String(v);
  return `"${text.length > MAX_VALUE ? `${text.slice(0, MAX_VALUE)}…` : text}"`;
};
const pad = (n: number) => String(n).padStart(2, '0');
const ordinal = (n: number) => `${n}${n % 10 === 1 && n !== 11 ? 'st' : n % 10 === 2 && n !== 12 ? 'nd' : n % 10 === 3 && n !== 13 ? 'rd' : 'th'}`;

/** "a, b and c" / "a, b or c". */
function list(items: string[], word: string): string {
  if (items.length <= 1) return items[0] ?? '';
  return `${items.slice(0, -1).join(', ')} ${word} ${items[items.length - 1]}`;
}

const isInt = (s: string) => /^\d{1,2}$/.test(s);

/** Days of the week of a cron field (`1-5`, `0,6`, `3`), named; null when it is not that simple. */
function cronDays(field: string): string | null {
  if (field === '1-5') return 'every weekday (Monday to Friday)';
  const days: number[] = [];
  for (const part of field.split(',')) {
    const range = /^(\d)-(\d)$/.exec(part);
    if (range) for (let d = Number(range[1]); d <= Number(range[2]); d++) days.push(d % 7);
    else if (/^\d$/.test(part)) days.push(Number(part) % 7);
    else return null;
  }
  const unique = [...new Set(days)].sort((a, b) => a - b);
  if (unique.length === 7) return 'every day';
  if (unique.length === 2 && unique[0] === 0 && unique[1] === 6) return 'every Saturday and Sunday';
  return `every ${list(unique.map((d) => DAY_NAMES[d]!), 'and')}`;
}

/** A five-field cron expression in words, or null when it is not one of the simple shapes. */
export function describeCron(cron: string): string | null {
  const fields = cron.trim().split(/\s+/);
  if (fields.length !== 5) return null;
  const [minute, hour, dom, month, dow] = fields as [string, string, string, string, string];
  // Several runs an hour or a day, on some days ("every 15 minutes, every weekday (Monday to Friday)").
  const onDays = dom === '*' && month === '*' ? (dow === '*' ? null : cronDays(dow)) : undefined;
  if (onDays !== undefined && (hour === '*' || hour === '9-16' || /^\*\/\d{1,2}$/.test(hour))) {
    const step = /^\*\/(\d{1,2})$/.exec(minute);
    const hourStep = /^\*\/(\d{1,2})$/.exec(hour);
    let often: string | null = null;
    if (hour !== '*' && hourStep) often = minute === '0' ? `every ${hourStep[1]} hours, on the hour` : null;
    else if (minute === '*') often = 'every minute';
    else if (step) often = `every ${step[1]} minutes`;
    else if (isInt(minute)) often = Number(minute) === 0 ? 'every hour, on the hour' : `every hour at ${Number(minute)} minutes past`;
    if (often) return [often, hour === '9-16' ? 'from 09:00 to 16:59' : null, onDays].filter(Boolean).join(', ');
    return null;
  }
  if (!isInt(minute) || !hour.split(',').every(isInt)) return null;
  const times = list(hour.split(',').map((h) => `${pad(Number(h))}:${pad(Number(minute))}`), 'and');
  let days: string | null;
  if (dom === '*' && month === '*') days = dow === '*' ? 'every day' : cronDays(dow);
  else if (dow !== '*') return null;
  else if (dom === 'L') days = month === '*' ? 'on the last day of every month' : null;
  else if (isInt(dom)) days = month === '*' ? `on the ${ordinal(Number(dom))} of every month` : isInt(month) && MONTH_NAMES[Number(month) - 1] ? `every year on ${MONTH_NAMES[Number(month) - 1]} ${Number(dom)}` : null;
  else days = null;
  return days ? `${days} at ${times}` : null;
}

/** "a message is received", "a customer is created or updated". */
/** Events said in words of their own rather than "a <resource> is <action>". */
const EVENT_WORDS: Record<string, string> = {
  'message.received': 'a message is received',
  'message.sent': 'a message is sent',
  'channel.error': 'a channel stops working (event channel.error)',
  'channel.recovered': 'a channel works again (event channel.recovered)',
  'thread.note_added': 'an internal note is added to a thread (event thread.note_added)',
  'thread.reopened': 'a thread opens again (event thread.reopened)',
};

function describeEvents(triggerEvent: string): string {
  const types = triggerEventTypes(triggerEvent);
  if (types.length > 0 && types.every((t) => EVENT_WORDS[t])) return list(types.map((t) => EVENT_WORDS[t]!), 'or');
  const byResource = new Map<string, string[]>();
  for (const type of types) {
    const dot = type.lastIndexOf('.');
    const resource = dot > 0 ? type.slice(0, dot).replaceAll('.', ' ').replaceAll('_', ' ') : type;
    const action = dot > 0 ? type.slice(dot + 1) : 'happens';
    byResource.set(resource, [...(byResource.get(resource) ?? []), action]);
  }
  const parts = [...byResource].map(([resource, actions]) => `${/^[aeiou]/.test(resource) ? 'an' : 'a'} ${resource} is ${list(actions, 'or')}`);
  return `${list(parts, 'or')} (event${types.length > 1 ? 's' : ''} ${types.join(', ')})`;
}

const OPERATOR_WORDS: Record<ConditionTest['operator'], string> = {
  equals: 'is',
  not_equals: 'is not',
  contains: 'contains',
  not_contains: 'does not contain',
  starts_with: 'starts with',
  ends_with: 'ends with',
  in: 'is one of',
  exists: 'is set',
  not_exists: 'is not set',
  gt: 'is more than',
  gte: 'is at least',
  lt: 'is less than',
  lte: 'is at most',
};

function describeTest(t: ConditionTest): string {
  if (t.field === SENDER_VERIFIED && typeof t.value === 'boolean') {
    return `its sender is ${t.value === (t.operator === 'equals') ? '' : 'not '}verified (its From domain passed DMARC)`;
  }
  if (t.field === THREAD_TAGS && (t.operator === 'equals' || t.operator === 'not_equals')) return `its thread is ${t.operator === 'equals' ? '' : 'not '}tagged ${quote(t.value)}`;
  const words = OPERATOR_WORDS[t.operator] ?? t.operator;
  const value = t.operator === 'in' && Array.isArray(t.value) ? list(t.value.map(quote), 'or') : t.value === undefined ? '' : ` ${quote(t.value)}`;
  return `its ${t.field} ${words}${t.operator === 'in' ? ` ${value}` : value}`;
}

/** `{any: [text contains w, summary contains w, …]}` (the words a message mentions) → the words; else null. */
function mentionedWords(c: Condition): string[] | null {
  if (!('any' in c)) return null;
  const words: string[] = [];
  for (const t of c.any) {
    if (!('field' in t) || t.operator !== 'contains' || (t.field !== 'text' && t.field !== 'summary') || typeof t.value !== 'string') return null;
    if (!words.includes(t.value)) words.push(t.value);
  }
  return words.length ? words : null;
}

function describeCondition(c: Condition): string {
  if ('timeOfDay' in c) {
    const { from, to } = c.timeOfDay;
    if (to === '00:00') return `it happens at or after ${from}`;
    if (from === '00:00') return `it happens before ${to}`;
    return `it happens between ${from} and ${to}`;
  }
  if ('dayOfWeek' in c) {
    const days = [...new Set(c.dayOfWeek)].sort((a, b) => a - b);
    if (days.join(',') === '1,2,3,4,5') return 'it happens on a weekday (Monday to Friday)';
    if (days.join(',') === '0,6') return 'it happens on a weekend (Saturday or Sunday)';
    return `it happens on a ${list(days.map((d) => DAY_NAMES[d] ?? String(d)), 'or')}`;
  }
  if ('not' in c) return `not (${describeCondition(c.not)})`;
  if ('all' in c) return c.all.map((x) => ('any' in x && !mentionedWords(x) ? `(${describeCondition(x)})` : describeCondition(x))).join(' and ');
  if ('any' in c) {
    const words = mentionedWords(c);
    if (words) return `its text or summary contains ${list(words.map(quote), 'or')}`;
    const tags = c.any.every((x) => 'field' in x && x.field === THREAD_TAGS && x.operator === 'equals') ? c.any.map((x) => (x as ConditionTest).value) : null;
    if (tags && tags.length > 1) return `its thread is tagged ${list(tags.map(quote), 'or')}`;
    return c.any.map((x) => ('all' in x ? `(${describeCondition(x)})` : describeCondition(x))).join(' or ');
  }
  return describeTest(c);
}

const usesTime = (c: Condition): boolean =>
  'timeOfDay' in c || 'dayOfWeek' in c || ('not' in c && usesTime(c.not)) || ('all' in c && c.all.some(usesTime)) || ('any' in c && c.any.some(usesTime));

/** Whether a test reads the sender as written (any sender test but `sender.verified`). */
const readsSender = (c: Condition): boolean =>
  'field' in c ? (c.field === 'sender' || c.field.startsWith('sender.')) && c.field !== SENDER_VERIFIED : 'not' in c ? readsSender(c.not) : 'all' in c ? c.all.some(readsSender) : 'any' in c ? c.any.some(readsSender) : false;

/** Whether the condition only holds for an authenticated sender: `sender.verified` is true, alone or in an `all`. */
const requiresVerified = (c: Condition): boolean =>
  'field' in c ? c.field === SENDER_VERIFIED && c.value === (c.operator === 'equals') : 'all' in c ? c.all.some(requiresVerified) : false;

/** The kind the condition holds for alone (`type` equals one kind, alone or in an `all`), asked through the registry. */
const onlyKind = (c: Condition): ChannelKind | undefined =>
  'field' in c
    ? c.field === 'type' && c.operator === 'equals'
      ? kindNamed(c.value)
      : undefined
    : 'all' in c
      ? c.all.map(onlyKind).find((k) => k !== undefined)
      : undefined;

/** The note a plan gets when its condition trusts a sender nobody authenticated. */
export const UNVERIFIED_SENDER_NOTE =
  'The sender is the From header as written, which is not authenticated (anyone can forge it); "(verified)" would require that its domain passed DMARC.';

const isEventMessage = (input: Record<string, unknown>) => input.id === '{{event.resourceId}}';

/** `{{now+2h}}` → "for 2 hours", `{{next(0 9 * * 1)}}` → "until the next Monday at 09:00". */
function describeUntil(value: unknown): string {
  const rel = typeof value === 'string' ? /^\{\{now\+(\d+)([mhdw])\}\}$/.exec(value) : null;
  if (rel) {
    const n = Number(rel[1]);
    const unit = { m: 'minute', h: 'hour', d: 'day', w: 'week' }[rel[2] as 'm' | 'h' | 'd' | 'w'];
    return `for ${n} ${unit}${n === 1 ? '' : 's'}`;
  }
  const next = typeof value === 'string' ? /^\{\{next\((.+)\)\}\}$/.exec(value) : null;
  if (next) {
    const [minute, hour, dom, month, dow] = next[1]!.trim().split(/\s+/);
    if (isInt(minute ?? '') && isInt(hour ?? '') && dom === '*' && month === '*') {
      const at = `${pad(Number(hour))}:${pad(Number(minute))}`;
      if (dow === '*') return `until the next ${at}`;
      if (/^\d$/.test(dow ?? '')) return `until the next ${DAY_NAMES[Number(dow) % 7]} at ${at}`;
    }
    return `until the next time matching the cron expression "${next[1]}"`;
  }
  return `until ${quote(value)}`;
}

/** Recipients that only the triggering message knows, in words. */
const SENDER_RECIPIENTS: Record<string, string> = { '{{sender.address}}': 'the sender', '{{sender.phoneNumber}}': "the sender's number" };

const recipients = (to: unknown): string =>
  Array.isArray(to)
    ? list(
        to.map((r) => (typeof r === 'string' && SENDER_RECIPIENTS[r]) || quote(typeof r === 'object' && r !== null && 'email' in r ? (r as { email: unknown }).email : r)),
        'and',
      )
    : quote(to);

/** A channel of the organization as a summary names it. */
export interface ChannelNaming {
  id: string;
  name: string;
  address: string;
  /** "email" or "sms". */
  type: string;
  status: string;
}

/** What a summary may name besides the plan: the organization's channels a step sends through. */
export interface SummaryContext {
  /** The channels the steps name by id, and the organization's text channels (a text without `channelId` goes through its only one). */
  channels?: readonly ChannelNaming[];
}

/** The ids of the channels the plan's steps name (their `channelId`, as written), for `SummaryContext.channels`. */
export const channelIdsOf = (plan: Pick<Plan, 'actions'>): string[] =>
  (Array.isArray(plan.actions) ? plan.actions : []).flatMap((s) => {
    const id = (s.input as { channelId?: unknown } | null)?.channelId;
    return typeof id === 'string' && /^[0-9a-f-]{36}$/i.test(id) ? [id] : [];
  });

const named = (c: ChannelNaming) => `the channel ${quote(c.name)} (${c.address})`;

/** Through which channel a step sends, in words: the one it names, the triggering message's, or (a text) the organization's only text channel. */
function through(channelId: unknown, text: boolean, context: SummaryContext): string {
  if (channelId === '{{event.data.channelId}}') return `through the channel the message came through`;
  if (channelId === '{{mailChannel}}') return "through one of the organization's email channels that can send (another than the channel the event is about, when there is one)";
  const channels = context.channels ?? [];
  if (channelId === undefined && text) {
    const lines = channels.filter((c) => kindNamed(c.type)?.defaultChannel !== undefined && c.status === 'active');
    if (lines.length === 1) return `through the organization's text channel, ${named(lines[0]!)}`;
    return `through the organization's only text channel (it has ${lines.length === 0 ? 'none' : lines.length} now: the step fails until it has exactly one)`;
  }
  const found = channels.find((c) => c.id === channelId);
  return found ? `through ${named(found)}` : `through the channel ${quote(channelId)}`;
}

/** How a step reads: the plan's other steps, the wording of the kind it acts on alone, the channels it may name. */
interface StepContext extends SummaryContext {
  steps: PlanStep[];
  /** The condition holds for text messages only: the triggering message is a text. */
  /** How the kind the plan acts on alone words its messages, when it has its own wording (texts). */
  wording: ChannelKind['planWording'];
}

/** One step in words. */
function describeStep(step: PlanStep, index: number, context: StepContext): string {
  const { steps } = context;
  const input = step.input ?? {};
  if (step.operation === 'messages.update' && isEventMessage(input)) {
    const parts: string[] = [];
    for (const [key, value] of Object.entries(input)) {
      if (key === 'id') continue;
      if (key === 'readAt') parts.push(value === null ? 'marks the message as unread' : value === '{{now}}' ? 'marks the message as read' : `sets its readAt to ${quote(value)}`);
      else if (key === 'archivedAt') parts.push(value === null ? 'moves the message out of the archive' : value === '{{now}}' ? 'archives the message' : `sets its archivedAt to ${quote(value)}`);
      else if (key === 'snoozedUntil') parts.push(value === null ? 'wakes the message from snooze' : `snoozes the message ${describeUntil(value)}`);
      else parts.push(`sets the message's ${key} to ${quote(value)}`);
    }
    return parts.length ? list(parts, 'and') : 'updates the message with nothing';
  }
  if (step.operation === 'messages.create' && input.type === 'note' && input.text === '{{digest}}') return 'creates a digest note of the messages since the last run';
  if (step.operation === 'messages.create' && input.type === 'note' && input.text === '{{digest.unread}}') return 'creates a digest note of the unread incoming messages';
  if (step.operation === 'messages.create' && input.type === 'note' && input.text === '{{digest.unreadEmails}}') return 'creates a digest note of the unread emails';
  if (step.operation === 'threads.update' && typeof input.id === 'string' && /^\{\{event\.data\.(?:id|threadId)\}\}$/.test(input.id)) {
    const parts: string[] = [];
    if (typeof input.assigneeEmail === 'string') parts.push(`assigns the thread to ${input.assigneeEmail}`);
    if (input.assigneeId === null) parts.push('unassigns the thread');
    if (input.status === 'snoozed' || (input.status === undefined && typeof input.snoozedUntil === 'string')) parts.push(`snoozes the thread ${describeUntil(input.snoozedUntil)} (it opens again then, or at the customer's next message)`);
    else if (typeof input.status === 'string') parts.push(input.status === 'closed' ? 'closes the thread' : `sets the thread's status to ${quote(input.status)}`);
    const tags = (v: unknown) => (Array.isArray(v) ? list(v.map(quote), 'and') : quote(v));
    const plural = (v: unknown) => (Array.isArray(v) && v.length > 1 ? 's' : '');
    if (input.addTags !== undefined) parts.push(`adds the tag${plural(input.addTags)} ${tags(input.addTags)} to the thread`);
    if (input.removeTags !== undefined) parts.push(`removes the tag${plural(input.removeTags)} ${tags(input.removeTags)} from the thread`);
    const known = new Set(['id', 'assigneeEmail', 'assigneeId', 'status', 'snoozedUntil', 'addTags', 'removeTags']);
    if (parts.length && Object.keys(input).every((k) => known.has(k)) && (input.assigneeId === undefined || input.assigneeId === null)) return list(parts, 'and');
  }
  if (step.operation === 'contacts.create' && input.name === '{{sender.name}}' && Object.keys(input).length === 1) return 'creates a contact named after the sender';
  const prior = /^\{\{steps\.(\d+)\.id\}\}$/.exec(typeof input.id === 'string' ? input.id : '');
  const priorIsContact = prior && steps[Number(prior[1])]?.operation === 'contacts.create' && Number(prior[1]) < index;
  if (step.operation === 'contacts.create_email' && priorIsContact && input.email === '{{sender.address}}' && Object.keys(input).length === 2) return "adds the sender's address to it as an email";
  if (step.operation === 'contacts.create_phone_number' && priorIsContact && input.phoneNumber === '{{sender.address}}' && Object.keys(input).length === 2) return "adds the sender's number to it as a phone number";
  if (step.operation === 'messages.reply' && isEventMessage(input) && typeof input.text === 'string' && Object.keys(input).every((k) => ['id', 'text', 'replyAll'].includes(k))) {
    if (context.wording) return `replies with a ${context.wording.noun} to the sender through the channel the ${context.wording.noun} came through, with the text ${quote(input.text)}`;
    return `replies to the message${input.replyAll === true ? ' and all its other recipients' : ''} with ${quote(input.text)}`;
  }
  if (step.operation === 'messages.forward' && isEventMessage(input) && Object.keys(input).every((k) => ['id', 'to', 'text', 'channelId'].includes(k))) {
    const via = input.channelId === undefined ? '' : ` ${through(input.channelId, false, context)}`;
    const what = context.wording ? `the ${context.wording.noun} by email` : 'the message';
    return `forwards ${what} to ${recipients(input.to)}${via}${typeof input.text === 'string' && input.text ? ` with the note ${quote(input.text)}` : ''}`;
  }
  if (step.operation === 'messages.send' && Object.keys(input).every((k) => ['channelId', 'to', 'subject', 'text'].includes(k))) {
    // A text or an email: by the kind of the channel it names (a kind whose messages have no subject sends
    // texts); without a channel, a text (only texts go through a default channel); through a channel named
    // when it runs, as the step reads (no subject).
    const channel = (context.channels ?? []).find((c) => c.id === input.channelId);
    const kind = channel && kindNamed(channel.type);
    const text = kind ? !('subject' in kind.schemas.send.shape) : input.channelId === undefined || input.subject === undefined;
    if (text) return `sends a text to ${recipients(input.to)} ${through(input.channelId, true, context)}, with the text ${quote(input.text)}`;
    const subject = input.subject === '' ? 'no subject' : `the subject ${quote(input.subject)}`;
    return `sends an email to ${recipients(input.to)} ${through(input.channelId, false, context)}, with ${subject} and the text ${quote(input.text)}`;
  }
  const json = JSON.stringify(input);
  return `calls ${step.operation} with ${json.length > 2 * MAX_VALUE ? `${json.slice(0, 2 * MAX_VALUE)}…` : json}`;
}

/**
 * One or two plain English sentences saying what the plan does, e.g. "Runs every Sunday at 21:00
 * (America/New_York). It creates a digest note of the messages since the last run." The channels a step
 * sends through are named from `context` (by their id otherwise).
 */
export function summarizePlan(plan: Plan, context: SummaryContext = {}): string {
  const zone = plan.timezone ?? 'UTC';
  let when: string;
  if (plan.triggerType === 'scheduled') {
    const cron = plan.cronExpression ?? '';
    when = `Runs ${describeCron(cron) ?? `on the cron schedule "${cron}"`} (${zone})`;
  } else {
    when = `Runs when ${describeEvents(plan.triggerEvent)}`;
  }
  if (plan.condition) {
    let text: string;
    try {
      text = `${describeCondition(plan.condition)}${plan.triggerType !== 'scheduled' && usesTime(plan.condition) ? ` (${zone})` : ''}`;
    } catch {
      text = `the condition ${JSON.stringify(plan.condition)} holds`; // not a well-formed condition: shown as it is
    }
    when += `, only if ${text}`;
  }
  let wording: ChannelKind['planWording'];
  try {
    wording = plan.condition ? onlyKind(plan.condition)?.planWording : undefined;
  } catch {
    // not a well-formed condition: shown as it is above
  }
  const steps = (Array.isArray(plan.actions) ? plan.actions : []).map((s, i, all) => describeStep(s, i, { ...context, steps: all, wording }));
  const does = steps.length ? `It ${list(steps, 'and then')}` : 'It does nothing';
  let unverified = false;
  try {
    unverified = !!plan.condition && readsSender(plan.condition) && !requiresVerified(plan.condition);
  } catch {
    // not a well-formed condition: shown as it is above
  }
  const note = unverified ? ` ${wording?.unverifiedSenderNote ?? UNVERIFIED_SENDER_NOTE}` : '';
  return `${when}. ${does}.${note}`;
}
