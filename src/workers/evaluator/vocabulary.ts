import type { ConditionTest, Condition } from '../../modules/automations/plan.js';

/**
 * The English vocabulary of the built-in evaluator: the phrases it recognizes, each turned into a
 * piece of a plan. Phrases are matched on the lower-cased instructions; each match is blanked out so
 * that later phrases do not see it again (an action's "until Monday at 9" is not read as a schedule).
 * The list, with examples, is in docs/automations-vocabulary.md.
 */

/** The instructions as the phrases read them: lower case, straight quotes, single spaces. */
export function normalize(text: string): string {
  return text
    .replace(/[\u2018\u2019\u00b4`]/g, "'")
    .replace(/[\u201c\u201d\u00ab\u00bb]/g, '"')
    .replace(/\s+/g, ' ')
    .trim()
    .toLowerCase();
}

/** Text whose matched phrases are blanked out (same length, so positions keep their meaning). */
export class Scanner {
  constructor(public text: string) {}

  /** The first match of the pattern (which must not be global) in what is left, blanked out. */
  take(pattern: RegExp): RegExpExecArray | null {
    const m = pattern.exec(this.text);
    if (!m) return null;
    this.text = this.text.slice(0, m.index) + ' '.repeat(m[0].length) + this.text.slice(m.index + m[0].length);
    return m;
  }

  /** A match of the pattern starting exactly at `from`, blanked out. */
  takeAt(pattern: RegExp, from: number): RegExpExecArray | null {
    const sticky = new RegExp(pattern.source, 'y');
    sticky.lastIndex = from;
    const m = sticky.exec(this.text);
    if (!m) return null;
    this.text = this.text.slice(0, m.index) + ' '.repeat(m[0].length) + this.text.slice(m.index + m[0].length);
    return m;
  }

  /** The first match, blanked out except its group 1 (words between a verb and its complement stay readable). */
  takeAround(pattern: RegExp): RegExpExecArray | null {
    const m = pattern.exec(this.text);
    if (!m) return null;
    const inner = m[1] ?? '';
    const start = m.index + m[0].indexOf(inner, 1);
    const blank = (from: number, to: number) => (this.text = this.text.slice(0, from) + ' '.repeat(to - from) + this.text.slice(to));
    blank(m.index, inner ? start : m.index + m[0].length);
    if (inner) blank(start + inner.length, m.index + m[0].length);
    return m;
  }

  /** Every match of the pattern, blanked out. */
  takeAll(pattern: RegExp): RegExpExecArray[] {
    const out: RegExpExecArray[] = [];
    for (let m = this.take(pattern); m; m = this.take(pattern)) out.push(m);
    return out;
  }
}

// ------------------------------------------------------------------ words and times

const DAYS: Record<string, number> = { sun: 0, mon: 1, tue: 2, wed: 3, thu: 4, fri: 5, sat: 6 };
const DAY = '(?:mon|tues?|wed(?:nes)?|thu(?:rs?)?|fri|sat(?:ur)?|sun)(?:day)?s?';
const dayNumber = (word: string) => DAYS[word.slice(0, 3)]!;

/** A time of day: `9`, `9am`, `9:30`, `7:30 pm`, `19h30`, `noon`, `midnight`. A bare hour is read on a 24-hour clock. */
export const TIME = "(?:noon|midday|midnight|\\d{1,2}(?:[:.h]\\d{2})?(?:\\s*[ap]\\.?m\\.?)?(?:\\s*o'?clock)?)";

export function parseTime(text: string): { hour: number; minute: number } | null {
  const t = text.trim();
  if (t === 'noon' || t === 'midday') return { hour: 12, minute: 0 };
  if (t === 'midnight') return { hour: 0, minute: 0 };
  const m = /^(\d{1,2})(?:[:.h](\d{2}))?(?:\s*([ap])\.?m\.?)?(?:\s*o'?clock)?$/.exec(t);
  if (!m) return null;
  let hour = Number(m[1]);
  const minute = m[2] ? Number(m[2]) : 0;
  if (m[3]) {
    if (hour < 1 || hour > 12) return null;
    hour = (hour % 12) + (m[3] === 'p' ? 12 : 0);
  }
  if (hour > 23 || minute > 59) return null;
  return { hour, minute };
}

const PART_OF_DAY: Record<string, number> = { morning: 9, afternoon: 14, evening: 18, night: 21 };
const DEFAULT_HOUR = 9;

/** The time of day the text states (`at 9`, `at noon`, `in the morning`), blanked out; else null. */
function takeTime(s: Scanner): { hour: number; minute: number } | null {
  const at = s.take(new RegExp(`\\b(?:at|@)\\s+(${TIME})(?![\\w/])`));
  if (at) return parseTime(at[1]!);
  const part = s.take(/\b(?:in the|every|each)\s+(morning|afternoon|evening|night)\b/);
  if (part) return { hour: PART_OF_DAY[part[1]!]!, minute: 0 };
  return null;
}

// ------------------------------------------------------------------ time zones

const ZONE_AREAS = 'africa|america|antarctica|arctic|asia|atlantic|australia|europe|indian|pacific|etc';

/** The canonical IANA name of a time zone, or null when it is not one. */
export function canonicalTimeZone(name: string): string | null {
  try {
    return new Intl.DateTimeFormat('en', { timeZone: name }).resolvedOptions().timeZone;
  } catch {
    return null;
  }
}

/** The time zone the text names (`Europe/Paris`, `in America/New_York time`); UTC names mean none. */
export function takeTimeZone(s: Scanner): { zone: string | null } | { error: string } {
  const m = s.take(new RegExp(`\\b(?:in\\s+)?((?:${ZONE_AREAS})/[a-z_+-]+(?:/[a-z_+-]+)?)(?:\\s+(?:time(?:\\s+zone)?|timezone))?\\b`));
  if (m) {
    const zone = canonicalTimeZone(m[1]!.replace(/(^|[/_-])([a-z])/g, (_, sep: string, c: string) => sep + c.toUpperCase()));
    return zone ? { zone } : { error: `"${m[1]}" is not a known time zone; name one of the IANA database, e.g. "Europe/Paris" or "America/New_York"` };
  }
  s.take(/\b(?:in\s+)?(?:utc|gmt)(?:\s+time)?\b/);
  return { zone: null };
}

// ------------------------------------------------------------------ schedules

/** A schedule stated in words, as a 5-field cron expression; null when the text states none. */
export function takeSchedule(s: Scanner): string | null {
  if (s.take(/\bevery\s+(?:single\s+)?minute\b/)) return '* * * * *';
  const minutes = s.take(/\bevery\s+(\d{1,2})\s+(?:minutes?|mins?)\b/);
  if (minutes) {
    const n = Number(minutes[1]);
    if (n >= 1 && n <= 59) return n === 1 ? '* * * * *' : `*/${n} * * * *`;
  }
  if (s.take(/\bevery\s+(?:half\s+(?:an\s+)?hour|30\s+minutes)\b/)) return '*/30 * * * *';
  const hours = s.take(/\bevery\s+(\d{1,2})\s+hours?\b/);
  if (hours) {
    const n = Number(hours[1]);
    if (n >= 1 && n <= 23) return n === 1 ? '0 * * * *' : `0 */${n} * * *`;
  }
  if (s.take(/\b(?:every|each)\s+hour\b|\bhourly\b/)) return '0 * * * *';

  let days: string | null = null;
  let dayOfMonth = '*';
  let month = '*';
  const named = s.take(new RegExp(`\\b(?:every|each|on)\\s+(${DAY}(?:\\s*(?:,|and|&|or)\\s*${DAY})*)\\b`));
  const weekday = s.take(/\b(?:every|each|on)\s+(?:week\s?days?|working\s+days?|business\s+days?)\b|\b(?:on\s+)?weekdays\b/);
  const weekend = s.take(/\b(?:every|each|on)\s+weekends?\b|\bweekends\b/);
  const monthDay = s.take(/\b(?:on\s+)?the\s+(first|1st|last|\d{1,2}(?:st|nd|rd|th)?)(?:\s+day)?\s+of\s+(?:every|each|the)\s+month\b/);
  if (named) {
    const list = [...new Set(named[1]!.split(/(?<!\s)\s*(?:,|and|&|or)\s*/).map(dayNumber))].sort((a, b) => a - b);
    days = list.join(',');
  } else if (weekday) days = '1-5';
  else if (weekend) days = '0,6';
  else if (monthDay) {
    const d = monthDay[1]!;
    dayOfMonth = d === 'first' ? '1' : d === 'last' ? 'L' : String(parseInt(d, 10));
    if (dayOfMonth !== 'L' && (Number(dayOfMonth) < 1 || Number(dayOfMonth) > 31)) return null;
  } else if (s.take(/\b(?:every|each)\s+month\b|\bmonthly\b/)) dayOfMonth = '1';
  else if (s.take(/\b(?:every|each)\s+week\b|\bweekly\b/)) days = '1';
  else if (s.take(/\b(?:every|each)\s+year\b|\byearly\b|\bannually\b/)) {
    dayOfMonth = '1';
    month = '1';
  } else if (s.take(/\b(?:every|each)\s+day\b|\bdaily\b|\bevery\s+24\s+hours\b/)) days = '*';
  else {
    // "every morning", "every evening": daily at that part of the day.
    const part = /\b(?:every|each)\s+(morning|afternoon|evening|night)\b/.exec(s.text);
    if (!part) return null;
    days = '*';
  }
  const time = takeTime(s) ?? { hour: DEFAULT_HOUR, minute: 0 };
  return `${time.minute} ${time.hour} ${dayOfMonth} ${month} ${days ?? '*'}`;
}

// ------------------------------------------------------------------ triggers

const RESOURCES: [RegExp, string][] = [
  [/contact(?:'s)?\s+(?:email(?:\s+address)?)/, 'contact.email'],
  [/contact(?:'s)?\s+phone(?:\s+number)?/, 'contact.phone_number'],
  [/contact(?:'s)?\s+(?:postal\s+)?address/, 'contact.address'],
  [/domain\s+registration|registration/, 'domain.registration'],
  [/(?:customer\s+)?transaction|payment/, 'customer.transaction'],
  [/contact/, 'contact'],
  [/customer|client/, 'customer'],
  [/business|company/, 'business'],
  [/folder/, 'folder'],
  [/domain/, 'domain'],
];
const RESOURCE = `(${RESOURCES.map(([r]) => r.source).join('|')})`;
const VERB_ACTION: Record<string, 'created' | 'updated' | 'deleted'> = {
  created: 'created', added: 'created', registered: 'created', new: 'created', create: 'created', add: 'created', register: 'created',
  updated: 'updated', changed: 'updated', modified: 'updated', edited: 'updated', update: 'updated', change: 'updated', modify: 'updated', edit: 'updated',
  deleted: 'deleted', removed: 'deleted', delete: 'deleted', remove: 'deleted',
};
const PAST = '(created|added|registered|updated|changed|modified|edited|deleted|removed)';
const PRESENT = '(create|add|register|update|change|modify|edit|delete|remove)';

const resourceOf = (phrase: string) => RESOURCES.find(([r]) => new RegExp(`^(?:${r.source})s?$`).test(phrase.trim()))?.[1] ?? null;

/** A message noun: email, message, SMS, text, phone call, voicemail. */
const MSG = "(?:e-?mails?|mails?|(?:phone\\s+|text\\s+)?messages?|sms(?:es)?|texts?|(?:phone\\s+)?calls?|voicemails?)";
const MSG_LIST = `${MSG}(?:\\s*(?:,|or|and|and/or)\\s*(?:an?\\s+)?(?:new\\s+)?${MSG})*`;

export interface Trigger {
  event: string;
  /** The message types the trigger names (`email`, `phone`, `sms`); empty for any. */
  types: string[];
}

function typesOf(phrase: string): string[] {
  const types: string[] = [];
  if (/e-?mail|\bmail/.test(phrase)) types.push('email');
  if (/phone|call|voicemail/.test(phrase)) types.push('phone');
  if (/sms|text/.test(phrase)) types.push('sms');
  return types;
}

/** The event the text names, and the message types it restricts to. */
export function takeTrigger(s: Scanner): Trigger | null {
  const past = s.take(new RegExp(`\\b${RESOURCE}s?\\s+(?:is\\s+|are\\s+|gets\\s+|get\\s+|was\\s+|were\\s+|has\\s+been\\s+|have\\s+been\\s+)?${PAST}\\b`));
  const fresh = past ? null : s.take(new RegExp(`\\bnew\\s+${RESOURCE}s?\\b(?!\\s+(?:is|are)\\s+(?:updated|changed|deleted|removed))`));
  const present = past || fresh ? null : s.take(new RegExp(`\\b${PRESENT}s?\\s+(?:a|an|any|the|some)\\s+(?:new\\s+)?${RESOURCE}\\b`));
  if (past) {
    const resource = resourceOf(past[1]!);
    if (resource) return { event: `${resource}.${VERB_ACTION[past[2]!]}`, types: [] };
  }
  if (fresh) {
    const resource = resourceOf(fresh[1]!);
    if (resource) return { event: `${resource}.created`, types: [] };
  }
  if (present) {
    const resource = resourceOf(present[2]!);
    if (resource) return { event: `${resource}.${VERB_ACTION[present[1]!]}`, types: [] };
  }

  const sent =
    s.take(new RegExp(`\\b(?:outgoing|sent)\\s+(?:\\w+\\s+)?${MSG_LIST}`)) ??
    s.take(new RegExp(`\\b${MSG_LIST}\\s+(?:is\\s+|are\\s+|gets\\s+|get\\s+|was\\s+|has\\s+been\\s+)?sent\\b`)) ??
    s.take(new RegExp(`\\b(?:i|we|someone|anyone)\\s+(?:send|sends|write|writes)\\s+(?:an?\\s+|any\\s+)?(?:new\\s+)?${MSG_LIST}`));
  if (sent) return { event: 'message.sent', types: typesOf(sent[0]) };
  const received =
    s.take(new RegExp(`\\b(?:new|incoming|inbound|received|unread)\\s+(?:incoming\\s+|inbound\\s+)?${MSG_LIST}`)) ??
    s.take(new RegExp(`\\b${MSG_LIST}\\s+(?:arrives?|arrive|comes?\\s+in|is\\s+received|are\\s+received|gets\\s+received|lands?|is\\s+recorded)\\b`)) ??
    s.take(new RegExp(`\\b(?:i|we)\\s+(?:receive|get)\\s+(?:an?\\s+|any\\s+)?(?:new\\s+)?${MSG_LIST}`)) ??
    s.take(new RegExp(`\\b(?:an?\\s+|any\\s+|every\\s+|each\\s+)(?:(?:incoming|inbound)\\s+)?${MSG_LIST}(?=\\s+(?:from|to|containing|mentioning|that|with|marked)\\b)`));
  if (received) return { event: 'message.received', types: typesOf(received[0]) };
  return null;
}

// ------------------------------------------------------------------ conditions

const EMAIL = '[a-z0-9._%+-]+@[a-z0-9-]+(?:\\.[a-z0-9-]+)*\\.[a-z]{2,}';
const DOMAIN = '[a-z0-9-]+(?:\\.[a-z0-9-]+)*\\.[a-z]{2,}';
const PHONE = '\\+?\\d[\\d ().-]{5,}\\d';
const QUOTED = `"[^"]+"|'[^']+'`;
const PARTY = `(?:(?:anyone|anybody|someone)\\s+(?:at|from)\\s+|@)(${DOMAIN})|(${EMAIL})|(${PHONE})|(${QUOTED})`;

const unquote = (s: string) => s.replace(/^["']|["']$/g, '');
const test = (field: string, operator: ConditionTest['operator'], value?: unknown): ConditionTest => (value === undefined ? { field, operator } : { field, operator, value });

/** `from`/`to` someone: an address, a phone number, anyone at a domain, or a quoted name. */
function takeParty(s: Scanner, field: 'sender' | 'recipient', lead: string): Condition | null {
  const first = s.take(new RegExp(`\\b(?:${lead})\\s+(?:${PARTY})`));
  if (!first) return null;
  const found = [first];
  const or = new RegExp(`\\s*(?:,|or)\\s*(?:${PARTY})`, 'y');
  for (let end = first.index + first[0].length, more = s.takeAt(or, end); more; end = more.index + more[0].length, more = s.takeAt(or, end)) found.push(more);
  const tests: Condition[] = [];
  const exact: string[] = [];
  for (const m of found) {
    if (m[1]) tests.push(test(field, 'ends_with', `@${m[1]}`));
    else if (m[2]) exact.push(m[2]);
    else if (m[3]) exact.push(m[3].replace(/[ ().-]/g, ''));
    else if (m[4]) tests.push(test(field, 'contains', unquote(m[4])));
  }
  if (exact.length === 1) tests.unshift(test(field, 'equals', exact[0]));
  if (exact.length > 1) tests.unshift(test(field, 'in', exact));
  return tests.length === 1 ? tests[0]! : { any: tests };
}

const STOP_WORDS = new Set(['a', 'an', 'the', 'it', 'them', 'this', 'that', 'any', 'some', 'and', 'or']);

/** Words in the text or summary: `containing "invoice"`, `mentioning refund`, `with "x" in the text`. */
function takeWords(s: Scanner): Condition | null {
  const lead = `(?:containing|contains|that\\s+contains?|which\\s+contains?|mentioning|mentions|that\\s+mentions?|which\\s+mentions?|including|that\\s+includes?|with\\s+the\\s+words?|about)`;
  const m = s.take(new RegExp(`\\b${lead}\\s+(?:the\\s+(?:words?|phrase|text)\\s+)?(${QUOTED}|[a-z0-9][\\w-]*)((?:\\s*(?:,|or)\\s*(?:${QUOTED}|[a-z0-9][\\w-]*))*)`));
  const quotedWith = m ? null : s.take(new RegExp(`\\bwith\\s+(${QUOTED})((?:\\s*(?:,|or)\\s*(?:${QUOTED}))*)(?:\\s+in\\s+(?:the\\s+|its\\s+)?(?:text|body|subject|summary))?`));
  const hit = m ?? quotedWith;
  if (!hit) return null;
  const words = [hit[1]!, ...(hit[2] ?? '').split(/(?<!\s)\s*(?:,|\bor\b)\s*/)].map((w) => unquote(w.trim())).filter((w) => w && !STOP_WORDS.has(w));
  if (!words.length) return null;
  const tests = words.flatMap((w) => [test('text', 'contains', w), test('summary', 'contains', w)]);
  return { any: tests };
}

const LEVEL = '(high|low|normal|medium)';

/** Importance and urgency tests (read before the trigger, since they sit inside its phrase: "an urgent email from …"): "marked high importance", "important", "urgent", "low urgency". */
export function takeLevels(s: Scanner): ConditionTest[] {
  const out: ConditionTest[] = [];
  const importance =
    s.take(new RegExp(`\\b(?:marked\\s+(?:as\\s+|with\\s+)?|with\\s+|of\\s+)?${LEVEL}[-\\s]importance\\b`)) ??
    s.take(new RegExp(`\\bimportance\\s+(?:is\\s+|of\\s+|=\\s*)?${LEVEL}\\b`));
  if (importance) out.push(test('importance', 'equals', importance[1]));
  else if (s.take(/\b(?:marked\s+(?:as\s+)?)?important\b/)) out.push(test('importance', 'equals', 'high'));
  const urgency =
    s.take(new RegExp(`\\b(?:marked\\s+(?:as\\s+|with\\s+)?|with\\s+|of\\s+)?${LEVEL}[-\\s]urgency\\b`)) ??
    s.take(new RegExp(`\\burgency\\s+(?:is\\s+|of\\s+|=\\s*)?${LEVEL}\\b`));
  if (urgency) out.push(test('urgency', 'equals', urgency[1]));
  else if (s.take(/\b(?:marked\s+(?:as\s+)?)?urgent\b/)) out.push(test('urgency', 'equals', 'high'));
  return out;
}

/** The tests the text states on a message, in a fixed order: type, sender, recipient, words, importance, urgency. */
export function takeMessageConditions(s: Scanner, types: string[], levels: ConditionTest[]): Condition[] {
  const out: Condition[] = [];
  if (types.length === 1) out.push(test('type', 'equals', types[0]));
  if (types.length > 1) out.push(test('type', 'in', types));
  const sender = takeParty(s, 'sender', 'from|sent\\s+by|by');
  if (sender) out.push(sender);
  const recipient = takeParty(s, 'recipient', 'to|sent\\s+to|addressed\\s+to|for');
  if (recipient) out.push(recipient);
  const words = takeWords(s);
  if (words) out.push(words);
  out.push(...levels);
  return out;
}

// ------------------------------------------------------------------ actions

export type ActionSpec =
  | { kind: 'read' | 'unread' | 'archive' | 'contact' | 'digest'; at: number; phrase: string }
  | { kind: 'snooze'; at: number; phrase: string; until: string }
  | { kind: 'set'; at: number; phrase: string; field: 'importance' | 'urgency' | 'status'; value: string };

const IT = "(?:\\s+(?:it|them|this|these|that|the\\s+(?:message|email|mail|sms|text)s?|each\\s+(?:one|message|email)|all))?";

/** `for 2 hours` → `{{now+2h}}`; `until tomorrow 9am` / `until Monday` → `{{next(…)}}`. */
function snoozeUntil(m: RegExpExecArray): string {
  const [, amount, unit, target] = m;
  if (unit) {
    const n = !amount || amount === 'a' || amount === 'an' || amount === 'one' ? 1 : Number(amount);
    const u = unit.startsWith('min') ? 'm' : unit[0]!;
    return `{{now+${n}${u}}}`;
  }
  if (target) {
    const t = target.trim();
    const time = new RegExp(`(?:at\\s+)?(${TIME})$`).exec(t);
    const parsed = (time && parseTime(time[1]!)) ?? null;
    const rest = (parsed ? t.slice(0, time!.index) : t).trim().replace(/(?<!\s)\s+morning$/, '');
    const { hour, minute } = parsed ?? { hour: DEFAULT_HOUR, minute: 0 };
    if (rest === 'next week') return `{{next(${minute} ${hour} * * 1)}}`;
    const day = new RegExp(`^(?:next\\s+)?(${DAY})$`).exec(rest);
    if (day) return `{{next(${minute} ${hour} * * ${dayNumber(day[1]!)})}}`;
    return `{{next(${minute} ${hour} * * *)}}`; // "tomorrow", "tomorrow morning", a bare time
  }
  return `{{next(0 ${DEFAULT_HOUR} * * *)}}`; // "snooze it": until the next morning
}

/** The actions the text asks for, in the order it states them. */
export function takeActions(s: Scanner): ActionSpec[] {
  const out: ActionSpec[] = [];
  const push = (m: RegExpExecArray[], spec: (m: RegExpExecArray) => ActionSpec) => out.push(...m.map(spec));
  const simple = (kind: 'read' | 'unread' | 'archive' | 'contact' | 'digest') => (m: RegExpExecArray): ActionSpec => ({ kind, at: m.index, phrase: m[0].trim() });

  push(
    s.takeAll(
      /\b(?:(?:write|send|create|make|post|prepare|compile|produce|record|give|email)\s+(?:me\s+|us\s+)?)?(?:a\s+|an\s+|the\s+)?(?:short\s+|daily\s+|weekly\s+|monthly\s+)?(?:summary|digest|recap|roundup)\b(?:\s+of\s+(?:the\s+|all\s+|my\s+)?(?:new\s+|unread\s+|recent\s+|latest\s+)?(?:messages|emails|mails?|inbox)(?:\s+(?:received\s+)?since\s+(?:the\s+)?last\s+(?:run|time))?)?(?:\s+as\s+a\s+(?:new\s+)?(?:message|note))?/,
    ),
    simple('digest'),
  );
  push(s.takeAll(/\bsummari[sz]e(?:\s+(?:the|all|my))?(?:\s+(?:new|unread|recent|latest))?(?:\s+(?:messages|emails|mails?|inbox))?(?:\s+since\s+(?:the\s+)?last\s+(?:run|time))?/), simple('digest'));
  push(
    s.takeAll(/\b(?:create|add|save|make)\s+(?:a\s+|the\s+)?(?:new\s+)?contact\s+(?:for|from|of|with)\s+(?:the\s+|its\s+|each\s+|their\s+)?sender\b|\b(?:add|save)\s+(?:the\s+|its\s+)?sender\s+(?:as\s+a\s+(?:new\s+)?contact|to\s+(?:my\s+|the\s+)?contacts)\b/),
    simple('contact'),
  );
  push(
    s.takeAll(new RegExp(`\\b(?:set|change|update)\\s+(?:its\\s+|the\\s+|their\\s+)?(importance|urgency|status)\\s+(?:to|as|=)\\s+(${QUOTED}|[a-z0-9_-]+)`)),
    (m) => ({ kind: 'set', at: m.index, phrase: m[0].trim(), field: m[1] as 'importance', value: unquote(m[2]!) }),
  );
  push(
    s.takeAll(new RegExp(`\\b(?:mark|flag|tag)${IT}\\s+(?:as\\s+|with\\s+)?${LEVEL}[-\\s](importance|urgency|priority)\\b`)),
    (m) => ({ kind: 'set', at: m.index, phrase: m[0].trim(), field: m[2] === 'urgency' ? 'urgency' : 'importance', value: m[1] === 'medium' ? 'normal' : m[1]! }),
  );
  push(s.takeAll(new RegExp(`\\b(?:mark|flag|tag)${IT}\\s+(?:as\\s+)?(urgent|important)\\b`)), (m) => ({
    kind: 'set',
    at: m.index,
    phrase: m[0].trim(),
    field: m[1] === 'urgent' ? 'urgency' : 'importance',
    value: 'high',
  }));
  push(s.takeAll(new RegExp(`\\bmark${IT}\\s+(?:as\\s+)?(?:unread|not\\s+read|new)\\b`)), simple('unread'));
  push(s.takeAll(new RegExp(`\\bmark${IT}\\s+(?:as\\s+)?(?:read|seen)\\b`)), simple('read'));
  // "Mark emails from ada@example.com as read": the words between stay for the trigger and conditions.
  for (const [kind, word] of [['unread', 'unread'], ['read', '(?:read|seen)']] as const) {
    const m = s.takeAround(new RegExp(`\\bmark((?:\\s+[^\\s,;]+){1,8}?)\\s+as\\s+${word}\\b`));
    if (m) out.push({ kind, at: m.index, phrase: `mark as ${kind}` });
  }
  push(s.takeAll(new RegExp(`\\barchive${IT}(?![a-z])`)), simple('archive'));
  push(
    s.takeAll(
      new RegExp(
        `\\bsnooze${IT}(?:\\s+for\\s+(an?|one|\\d{1,4})\\s+(min(?:ute)?s?|hours?|days?|weeks?)\\b|\\s+until\\s+((?:(?:tomorrow|next\\s+week|(?:next\\s+)?${DAY})(?:\\s+morning)?(?:\\s+(?:at\\s+)?${TIME})?)|(?:${TIME})))?`,
      ),
    ),
    (m) => ({ kind: 'snooze', at: m.index, phrase: m[0].trim(), until: snoozeUntil(m) }),
  );
  // "Snooze every email from x for 2 hours": the duration away from the verb.
  const bare = out.find((a) => a.kind === 'snooze' && !/\s(?:for|until)\s/.test(a.phrase));
  const duration = bare && s.take(/\bfor\s+(an?|one|\d{1,4})\s+(min(?:ute)?s?|hours?|days?|weeks?)\b/);
  if (bare && bare.kind === 'snooze' && duration) bare.until = snoozeUntil([duration[0], duration[1], duration[2], undefined] as unknown as RegExpExecArray);
  return out.sort((a, b) => a.at - b.at);
}
