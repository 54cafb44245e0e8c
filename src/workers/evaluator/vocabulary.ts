import { joinTriggerEvents, type Condition, type ConditionTest } from '../../modules/automations/plan.js';
import { MAX_TAG_LENGTH } from '../../modules/threads/threads.schemas.js';

/**
 * The English vocabulary of the built-in evaluator: the phrases it recognizes, each turned into a
 * piece of a plan. Phrases are matched on the lower-cased instructions; each match is blanked out so
 * that later phrases do not see it again (an action's "until Monday at 9" is not read as a schedule).
 * The list, with examples, is in docs/automations-vocabulary.md.
 */

/** The instructions with straight quotes and single spaces, case kept. */
export function straighten(text: string): string {
  return text
    .replace(/[\u2018\u2019\u00b4`]/g, "'")
    .replace(/[\u201c\u201d\u00ab\u00bb]/g, '"')
    .replace(/\s+/g, ' ')
    .trim();
}

/** The instructions as the phrases read them: lower case, straight quotes, single spaces. */
export const normalize = (text: string): string => straighten(text).toLowerCase();

/** Text whose matched phrases are blanked out (same length, so positions keep their meaning). */
export class Scanner {
  /** The text as written (case kept) when lower-casing kept every position, else the lower-case text. */
  readonly original: string;
  /** The lower-case text with the content of its quotes (which `text` masks). */
  readonly plain: string;

  /**
   * `text` is what the phrases read: the content of quoted strings is masked (each character replaced by
   * one that no phrase reads), so that a quoted "EST" or 'archive' is never read as an instruction. A
   * phrase that takes a quoted string reads its content with `plainGroup` or `writtenGroup`.
   */
  constructor(
    public text: string,
    original?: string,
  ) {
    this.original = original !== undefined && original.length === text.length ? original : text;
    this.plain = text;
    this.text = text.replace(QUOTE_SPANS, (q) => q[0] + QUOTE_MASK.repeat(q.length - 2) + q[q.length - 1]);
  }

  /** The scanner of instructions as written. */
  static of(instructions: string): Scanner {
    const written = straighten(instructions);
    return new Scanner(written.toLowerCase(), written);
  }

  /** The written form (case kept, quotes unmasked) of group `group` of a match. */
  writtenGroup(m: RegExpExecArray, group: number): string {
    const span = m.indices?.[group];
    return span ? this.original.slice(span[0], span[1]) : (m[group] ?? '');
  }

  /** The lower-case form (quotes unmasked) of group `group` of a match. */
  plainGroup(m: RegExpExecArray, group: number): string {
    const span = m.indices?.[group];
    return span ? this.plain.slice(span[0], span[1]) : (m[group] ?? '');
  }

  private blank(from: number, to: number): void {
    this.text = this.text.slice(0, from) + ' '.repeat(to - from) + this.text.slice(to);
  }

  /** The first match of the pattern (which must not be global) in what is left, blanked out. */
  take(pattern: RegExp): RegExpExecArray | null {
    const m = withIndices(pattern).exec(this.text);
    if (!m) return null;
    this.blank(m.index, m.index + m[0].length);
    return m;
  }

  /** A match of the pattern starting exactly at `from`, blanked out. */
  takeAt(pattern: RegExp, from: number): RegExpExecArray | null {
    const sticky = new RegExp(pattern.source, 'yd');
    sticky.lastIndex = from;
    const m = sticky.exec(this.text);
    if (!m) return null;
    this.blank(m.index, m.index + m[0].length);
    return m;
  }

  /** The first match, blanked out except its group 1 (words between a verb and its complement stay readable). */
  takeAround(pattern: RegExp): RegExpExecArray | null {
    const m = withIndices(pattern).exec(this.text);
    if (!m) return null;
    const inner = m.indices?.[1];
    if (inner && inner[1] > inner[0]) {
      this.blank(m.index, inner[0]);
      this.blank(inner[1], m.index + m[0].length);
    } else this.blank(m.index, m.index + m[0].length);
    return m;
  }

  /** Every match of the pattern, blanked out. */
  takeAll(pattern: RegExp): RegExpExecArray[] {
    const out: RegExpExecArray[] = [];
    for (let m = this.take(pattern); m; m = this.take(pattern)) out.push(m);
    return out;
  }
}

/** Quoted strings: double quotes, or single quotes that are not apostrophes ("don't", "we've"). */
const QUOTE_SPANS = /"[^"]*"|(?<![a-z0-9])'[^']+'(?![a-z0-9])/g;
/** What the content of quotes reads as: a character no phrase matches. */
const QUOTE_MASK = '\u0001';
const indexed = new WeakMap<RegExp, RegExp>();
/** The pattern with the `d` flag (match indices), so that groups can be read back from the unmasked text. */
function withIndices(pattern: RegExp): RegExp {
  if (pattern.hasIndices) return pattern;
  let copy = indexed.get(pattern);
  if (!copy) {
    copy = new RegExp(pattern.source, `${pattern.flags}d`);
    indexed.set(pattern, copy);
  }
  return copy;
}

// ------------------------------------------------------------------ words and times

const DAYS: Record<string, number> = { sun: 0, mon: 1, tue: 2, wed: 3, thu: 4, fri: 5, sat: 6 };
const DAY = '(?:mon|tues?|wed(?:nes)?|thu(?:rs?)?|fri|sat(?:ur)?|sun)(?:day)?s?';
const dayNumber = (word: string) => DAYS[word.slice(0, 3)]!;
/** Days joined by commas, "and", "or", "&" (an Oxford comma too): "monday, wednesday, and friday". */
const DAY_LIST = `${DAY}(?:(?:,|, and|, or| and| or| &) ${DAY})*`;
/** The distinct day numbers a day list names. */
const dayNumbers = (list: string): number[] => [...new Set([...list.matchAll(new RegExp(DAY, 'g'))].map((m) => dayNumber(m[0])))];

/**
 * A time of day: `9`, `9am`, `9:30`, `7:30 pm`, `19h30`, `noon`, `midnight`. A bare hour is read on a
 * 24-hour clock; bare hours 1 to 6 are refused as ambiguous (see `parseTime`). Spaces are single in
 * normalized text, so ` ?` is enough (and keeps the patterns linear).
 */
export const TIME = "(?:noon|midday|midnight|\\d{1,2}(?:[:.h]\\d{2})?(?: ?[ap]\\.?m\\.?)?(?: ?o'?clock)?)";
const PART_WORDS = '(?:morning|afternoon|evening|night)';

export type ClockTime = { hour: number; minute: number };

/**
 * A time of day; `part` (morning, afternoon, evening, night) turns `7` into 19:00. A bare hour from 1
 * to 6 ("at 5") could be either half of the day: it is `ambiguous`, unless a part of the day says which.
 */
export function parseTime(text: string, part?: string): ClockTime | 'ambiguous' | null {
  const t = text.trim();
  if (t === 'noon' || t === 'midday') return { hour: 12, minute: 0 };
  if (t === 'midnight') return { hour: 0, minute: 0 };
  const m = /^(\d{1,2})(?:[:.h](\d{2}))?(?: ?([ap])\.?m\.?)?(?: ?o'?clock)?$/.exec(t);
  if (!m) return null;
  let hour = Number(m[1]);
  const minute = m[2] ? Number(m[2]) : 0;
  if (m[3]) {
    if (hour < 1 || hour > 12) return null;
    hour = (hour % 12) + (m[3] === 'p' ? 12 : 0);
  } else if (part && hour >= 1 && hour <= 12) {
    if (part === 'morning') hour %= 12;
    else if (part === 'night' && hour === 12) hour = 0;
    else if (part !== 'morning' && hour < 12 && !(part === 'night' && hour <= 4)) hour += 12;
  } else if (!m[2] && hour >= 1 && hour <= 6) return 'ambiguous';
  if (hour > 23 || minute > 59) return null;
  return { hour, minute };
}

const PART_OF_DAY: Record<string, number> = { morning: 9, afternoon: 14, evening: 18, night: 21 };
const DEFAULT_HOUR = 9;
const AMBIGUOUS_HOUR = (t: string) => {
  const h = Number.parseInt(t, 10);
  return `"at ${t.trim()}" could be morning or evening: say "${h}am" or "${h}pm" (or "${String(h).padStart(2, '0')}:00" / "${h + 12}:00").`;
};

/** One time, or several joined by commas and "and": "at 9 and at 5pm", "at 9am, 1pm and 5pm", "at 7 in the evening". */
const TIMES = new RegExp(`\\b(?:at|@) (${TIME}(?: ?(?:,|and|&) (?:at )?${TIME})*)(?: (?:in the|at) (${PART_WORDS}))?(?![\\w/])`);

/** The times of day the text states (`at 9`, `at 9 and at 5pm`, `in the morning`), blanked out; null when none. */
export function takeTimes(s: Scanner): ClockTime[] | { error: string } | null {
  const at = s.take(TIMES);
  if (at) {
    const out: ClockTime[] = [];
    // "Every Sunday night at 10": the part of the day may come before the time.
    const part = at[2] ?? s.take(/\b(morning|afternoon|evening|night)\b/)?.[1];
    for (const piece of at[1]!.split(/ ?(?:,|\band\b|&) ?(?:at )?/)) {
      const t = parseTime(piece, part);
      if (t === 'ambiguous') return { error: AMBIGUOUS_HOUR(piece) };
      if (!t) return { error: `"${piece.trim()}" is not a time of day. Write it as "9am", "5:30pm" or "17:30".` };
      out.push(t);
    }
    return out;
  }
  const part = s.take(/\b(?:in the|every|each|at) (morning|afternoon|evening|night)\b/) ?? s.take(/\b(morning|afternoon|evening|night)\b/);
  if (part) return [{ hour: PART_OF_DAY[part[1]!]!, minute: 0 }];
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

/** Time zones named by region or by a common abbreviation, with the IANA zone they mean. */
const ZONE_NAMES: Record<string, string> = {
  eastern: 'America/New_York',
  'us eastern': 'America/New_York',
  central: 'America/Chicago',
  'us central': 'America/Chicago',
  mountain: 'America/Denver',
  'us mountain': 'America/Denver',
  pacific: 'America/Los_Angeles',
  'us pacific': 'America/Los_Angeles',
  'central european': 'Europe/Paris',
  'western european': 'Europe/Lisbon',
  'eastern european': 'Europe/Athens',
  uk: 'Europe/London',
  british: 'Europe/London',
  japan: 'Asia/Tokyo',
  hawaii: 'Pacific/Honolulu',
  honolulu: 'Pacific/Honolulu',
  'new zealand': 'Pacific/Auckland',
  auckland: 'Pacific/Auckland',
  india: 'Asia/Kolkata',
  indian: 'Asia/Kolkata',
};

/**
 * Abbreviations. Each stands for the zone's local time all year (EST and EDT are both New York time,
 * summer time included). `ist` (India, Israel or Ireland) is ambiguous and refused.
 */
const ZONE_ABBREVIATIONS: Record<string, string> = {
  est: 'America/New_York',
  edt: 'America/New_York',
  cst: 'America/Chicago',
  cdt: 'America/Chicago',
  mst: 'America/Denver',
  mdt: 'America/Denver',
  pst: 'America/Los_Angeles',
  pdt: 'America/Los_Angeles',
  akst: 'America/Anchorage',
  hst: 'Pacific/Honolulu',
  cet: 'Europe/Paris',
  cest: 'Europe/Paris',
  bst: 'Europe/London',
  eet: 'Europe/Athens',
  eest: 'Europe/Athens',
  jst: 'Asia/Tokyo',
  aest: 'Australia/Sydney',
  aedt: 'Australia/Sydney',
};
/** Two-letter abbreviations are only read right after a time ("9am pt"): alone they are ordinary words too often. */
const SHORT_ABBREVIATIONS: Record<string, string> = { et: 'America/New_York', ct: 'America/Chicago', mt: 'America/Denver', pt: 'America/Los_Angeles' };

const CITY_AREAS = new Set(['Africa', 'America', 'Asia', 'Australia', 'Europe']);
const NOT_CITIES = new Set(['jersey', 'center', 'swift current']);
let cities: Map<string, string> | null = null;
/** The IANA zones by their city, lower case with spaces ("new york" → America/New_York). */
function zonesByCity(): Map<string, string> {
  if (!cities) {
    cities = new Map();
    for (const zone of Intl.supportedValuesOf('timeZone')) {
      // Cities of the continents only, two-level names (Europe/London), and not ordinary words: "Christmas
      // time" is not Indian/Christmas, "Easter time" not Pacific/Easter, "Jersey time" not Europe/Jersey.
      const [area, name, deeper] = zone.split('/');
      if (!name || deeper !== undefined || !CITY_AREAS.has(area!)) continue;
      const city = name.replaceAll('_', ' ').toLowerCase();
      if (!NOT_CITIES.has(city) && !cities.has(city)) cities.set(city, zone);
    }
  }
  return cities;
}

const ZONE_NAMED = /\b(?:in )?(?:the )?((?:[a-z]+ ){0,2}[a-z]+) time(?: zone)?\b/g;

/** "New York time", "Pacific time", "in London time": the zone and the span it takes; null when none. */
function namedZone(text: string): { zone: string; index: number; length: number } | null {
  for (const m of text.matchAll(ZONE_NAMED)) {
    const words = m[1]!.split(' ');
    // The longest run of the last words that names a zone: "at noon new york time" → "new york".
    for (let i = 0; i < words.length; i++) {
      const name = words.slice(i).join(' ');
      const zone = ZONE_NAMES[name] ?? zonesByCity().get(name);
      if (!zone) continue;
      const skipped = words.slice(0, i).join(' ');
      const start = m.index + m[0].indexOf(m[1]!) + (skipped ? skipped.length + 1 : 0);
      const lead = /(?:in )?(?:the )?$/.exec(text.slice(m.index, start))![0];
      return { zone, index: start - lead.length, length: m.index + m[0].length - (start - lead.length) };
    }
  }
  return null;
}

/**
 * The time zone the text names: an IANA name (`Europe/Paris`), a city or region (`New York time`,
 * `Pacific time`, `London time`), or an abbreviation (`CET`, `EST`, `9am PT`). UTC and GMT mean none.
 * Two different zones are refused.
 */
export function takeTimeZone(s: Scanner): { zone: string | null } | { error: string } {
  const found: string[] = [];
  const iana = s.take(new RegExp(`\\b(?:in )?((?:${ZONE_AREAS})/[a-z_+-]+(?:/[a-z_+-]+)?)(?: time(?: zone)?| timezone)?\\b`));
  if (iana) {
    const zone = canonicalTimeZone(iana[1]!.replace(/(^|[/_-])([a-z])/g, (_, sep: string, c: string) => sep + c.toUpperCase()));
    if (!zone) return { error: `"${iana[1]}" is not a known time zone; name one of the IANA database, e.g. "Europe/Paris" or "America/New_York"` };
    found.push(zone);
  }
  const named = namedZone(s.text);
  if (named) {
    s.text = s.text.slice(0, named.index) + ' '.repeat(named.length) + s.text.slice(named.index + named.length);
    found.push(named.zone);
  }
  for (const abbreviation of s.takeAll(/\b(?:in )?(est|edt|cst|cdt|mst|mdt|pst|pdt|akst|hst|cet|cest|bst|eet|eest|jst|aest|aedt|ist)(?: time)?\b/)) {
    const zone = ZONE_ABBREVIATIONS[abbreviation[1]!];
    if (!zone) return { error: `"${abbreviation[1]!.toUpperCase()}" names several time zones; name one of the IANA database instead, e.g. "Asia/Kolkata" or "Europe/Dublin"` };
    found.push(zone);
  }
  const short = s.take(/(?<=(?:\d|[ap]\.?m\.?) )(et|ct|mt|pt)\b/);
  if (short) found.push(SHORT_ABBREVIATIONS[short[1]!]!);
  const utc = s.take(/\b(?:in )?(?:utc|gmt)(?: time)?\b/);
  const zones = [...new Set(found.map((z) => canonicalTimeZone(z) ?? z))];
  if (zones.length > 1 || (zones.length === 1 && utc)) return { error: `The instructions name more than one time zone (${[...zones, ...(utc ? ['UTC'] : [])].join(', ')}); an automation runs in one.` };
  return { zone: zones[0] ?? null };
}

// ------------------------------------------------------------------ schedules

/** A schedule stated in words, as a 5-field cron expression; null when the text states none. */
export function takeSchedule(s: Scanner): string | { error: string } | null {
  const frequent = takeFrequency(s);
  if (frequent === null || typeof frequent !== 'string') return frequent ?? takeDailySchedule(s);
  // "every 15 minutes on weekdays", "every hour during business hours": the frequency on some days or hours.
  const [minute, hour] = frequent.split(' ') as [string, string];
  const business = s.take(/\b(?:during|in|within) (?:the )?(?:business|office|working) hours\b/);
  const weekday = s.take(/\b(?:on |during )?(?:weekdays|working days|business days)\b/);
  const weekend = s.take(/\b(?:on |during |over )?(?:the )?weekends?\b/);
  const named = s.take(new RegExp(`\\bon (${DAY_LIST})\\b`));
  if ([business, weekday, weekend, named].filter(Boolean).length > 1) return { error: 'The instructions name more than one kind of day or hours for one schedule; state one, e.g. "Every hour on weekdays, …".' };
  if (business) {
    if (hour !== '*') return { error: `"${business[0]}" with a schedule every few hours is ambiguous; say "Every hour during business hours, …" or name the times, e.g. "Every weekday at 9am and 1pm, …".` };
    return `${minute} 9-16 * * 1-5`;
  }
  const days = weekday ? '1-5' : weekend ? '0,6' : named ? dayNumbers(named[1]!).sort((a, b) => a - b).join(',') : '*';
  return `${minute} ${hour} * * ${days}`;
}

/** A schedule of several runs an hour or a day ("every 15 minutes", "every 2 hours"): its cron; null when none. */
function takeFrequency(s: Scanner): string | { error: string } | null {
  if (s.take(/\bevery (?:single )?minute\b/)) return '* * * * *';
  const minutes = s.take(/\bevery (\d{1,2}) (?:minutes?|mins?)\b/);
  if (minutes) {
    const n = Number(minutes[1]);
    if (n < 1 || n > 59) return { error: `"${minutes[0]}" is not a schedule: say every 1 to 59 minutes, or every few hours.` };
    return n === 1 ? '* * * * *' : `*/${n} * * * *`;
  }
  if (s.take(/\bevery (?:half (?:an )?hour|30 minutes)\b/)) return '*/30 * * * *';
  const hours = s.take(/\bevery (\d{1,2}) hours?\b/);
  if (hours) {
    const n = Number(hours[1]);
    if (n < 1 || n > 23) return { error: `"${hours[0]}" is not a schedule: say every 1 to 23 hours, or every day.` };
    return n === 1 ? '0 * * * *' : `0 */${n} * * *`;
  }
  if (s.take(/\b(?:every|each) hour\b|\bhourly\b/)) return '0 * * * *';
  return null;
}

/** A schedule of once a day or less often, at one or several times of day. */
function takeDailySchedule(s: Scanner): string | { error: string } | null {
  let days: string | null = null;
  let dayOfMonth = '*';
  let month = '*';
  const named = s.take(new RegExp(`\\b(?:every|each|on) (${DAY_LIST})\\b`));
  const weekday = s.take(/\b(?:every|each|on) (?:week ?days?|working days?|business days?)\b|\b(?:on )?weekdays\b/);
  const weekend = s.take(/\b(?:every|each|on) weekends?\b|\bweekends\b/);
  const monthEnd = s.take(/\b(?:at |on )?the end of (?:every|each|the) month\b|\b(?:at |on )?(?:the )?(?:end of month|month[- ]end)\b/);
  const monthDay = monthEnd ? null : s.take(/\b(?:on )?the (first|1st|last|\d{1,2}(?:st|nd|rd|th)?)(?: day)? of (?:every|each|the) month\b/);
  if ([named, weekday, weekend, monthEnd ?? monthDay].filter(Boolean).length > 1) {
    return { error: 'The instructions name more than one kind of day (weekdays, days of the week, days of the month) for one schedule; an automation has one schedule, so state one, e.g. "Every Monday and Friday at 9am, …".' };
  }
  if (named) {
    const list = dayNumbers(named[1]!).sort((a, b) => a - b);
    days = list.join(',');
  } else if (weekday) days = '1-5';
  else if (weekend) days = '0,6';
  else if (monthEnd) dayOfMonth = 'L';
  else if (monthDay) {
    const d = monthDay[1]!;
    dayOfMonth = d === 'first' ? '1' : d === 'last' ? 'L' : String(parseInt(d, 10));
    if (dayOfMonth !== 'L' && (Number(dayOfMonth) < 1 || Number(dayOfMonth) > 31)) return { error: `"${monthDay[0]}" is not a day of the month.` };
    if (Number(dayOfMonth) > 28) return { error: `"${monthDay[0]}" does not exist in every month; say "on the last day of every month" or a day from 1 to 28.` };
  } else if (s.take(/\b(?:every|each) month\b|\bmonthly\b/)) dayOfMonth = '1';
  else if (s.take(/\b(?:every|each) week\b|\bweekly\b/)) days = '1';
  else if (s.take(/\b(?:every|each) year\b|\byearly\b|\bannually\b/)) {
    dayOfMonth = '1';
    month = '1';
  } else if (s.take(/\b(?:every|each) day\b|\bdaily\b|\bevery 24 hours\b/)) days = '*';
  else {
    // "every morning", "every night": daily at that part of the day.
    if (!/\b(?:every|each) (?:morning|afternoon|evening|night)\b/.test(s.text)) return null;
    days = '*';
  }
  const times = takeTimes(s) ?? [{ hour: DEFAULT_HOUR, minute: 0 }];
  if ('error' in times) return times;
  const minute = times[0]!.minute;
  if (times.some((t) => t.minute !== minute)) {
    return { error: 'The times of day have different minutes, which one schedule cannot hold; create one automation per time, or use the same minutes ("at 9:30 and 17:30").' };
  }
  const hoursList = [...new Set(times.map((t) => t.hour))].sort((a, b) => a - b).join(',');
  return `${minute} ${hoursList} ${dayOfMonth} ${month} ${days ?? '*'}`;
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
  created: 'created', added: 'created', registered: 'created', recorded: 'created', received: 'created', new: 'created', create: 'created', add: 'created', register: 'created',
  updated: 'updated', changed: 'updated', modified: 'updated', edited: 'updated', update: 'updated', change: 'updated', modify: 'updated', edit: 'updated',
  deleted: 'deleted', removed: 'deleted', delete: 'deleted', remove: 'deleted',
};
const PAST_WORDS = '(?:created|added|registered|recorded|received|updated|changed|modified|edited|deleted|removed)';
/** One past participle, or several joined by "or" ("created or updated"): group 1. */
const PAST = `(${PAST_WORDS}(?:(?: ?,| or| and/or) (?:is |gets )?${PAST_WORDS})*)`;
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

/** "A channel stops working" (`channel.error`) and "works again" (`channel.recovered`): the channel's health. */
const CHANNEL_NOUN = '(?:an?\\s+|any\\s+|the\\s+|one\\s+of\\s+the\\s+|one\\s+of\\s+my\\s+|my\\s+|our\\s+)?(?:(email|e-mail|mail|text|sms|smpp|imap)\\s+)?channels?';
/** A channel's kind as its qualifier names it ("an email channel", "a text channel"). */
const channelTypes = (qualifier: string | undefined) => (!qualifier ? [] : /mail|imap/.test(qualifier) ? ['email'] : ['sms']);
const CHANNEL_DOWN =
  "(?:stops?\\s+working|stopped\\s+working|fails?|failed|goes\\s+down|went\\s+down|breaks?|broke|(?:has|gets|hits|had|got)\\s+(?:an?\\s+)?(?:error|problem)s?|turns?\\s+(?:to\\s+)?(?:error|red)|(?:is|are)\\s+(?:in\\s+error|down|broken|failing)|can(?:no|')t\\s+(?:send|receive|connect))";
const CHANNEL_UP = '(?:works?\\s+again|worked\\s+again|is\\s+working\\s+again|starts?\\s+working\\s+again|recovers?|recovered|comes?\\s+back|came\\s+back|is\\s+back(?:\\s+up)?)';

/** A channel trigger; its `types` are the channel kinds the text names ("an email channel": email). */
function takeChannelTrigger(s: Scanner): Trigger | null {
  const both = s.take(new RegExp(`\\b${CHANNEL_NOUN}\\s+(?:${CHANNEL_DOWN}\\s+or\\s+${CHANNEL_UP}|${CHANNEL_UP}\\s+or\\s+${CHANNEL_DOWN})(?=\\W|$)`));
  if (both) return { event: joinTriggerEvents(['channel.error', 'channel.recovered']), types: channelTypes(both[1]) };
  const down = s.take(new RegExp(`\\b${CHANNEL_NOUN}\\s+${CHANNEL_DOWN}(?=\\W|$)`));
  if (down) return { event: 'channel.error', types: channelTypes(down[1]) };
  const up = s.take(new RegExp(`\\b${CHANNEL_NOUN}\\s+${CHANNEL_UP}(?=\\W|$)`));
  if (up) return { event: 'channel.recovered', types: channelTypes(up[1]) };
  return null;
}

/** A conversation's noun. */
const THREAD_NOUN = '(?:thread|conversation)s?';

/** A thread's events: reopened (`thread.reopened`), updated or changed (`thread.updated`), a note added (`thread.note_added`). */
function takeThreadTrigger(s: Scanner): Trigger | null {
  if (s.take(new RegExp(`\\b${THREAD_NOUN}\\s+(?:is\\s+|are\\s+|gets\\s+|get\\s+)?re-?open(?:ed|s)?\\b`))) return { event: 'thread.reopened', types: [] };
  if (s.take(new RegExp(`\\b${THREAD_NOUN}\\s+(?:is\\s+|are\\s+|gets\\s+|get\\s+)?(?:updated|changed)\\b`))) return { event: 'thread.updated', types: [] };
  if (s.take(/\b(?:an?\s+)?(?:internal\s+)?notes?\s+(?:is\s+|are\s+|gets\s+)?(?:added|written|left)(?:\s+(?:to|on)\s+(?:a\s+|the\s+)?(?:thread|conversation))?\b/)) return { event: 'thread.note_added', types: [] };
  return null;
}

/** The event the text names, and the message types it restricts to. */
export function takeTrigger(s: Scanner): Trigger | null {
  const channel = takeChannelTrigger(s);
  if (channel) return channel;
  const thread = takeThreadTrigger(s);
  if (thread) return thread;
  const past = s.take(new RegExp(`\\b${RESOURCE}s?\\s+(?:is\\s+|are\\s+|gets\\s+|get\\s+|was\\s+|were\\s+|has\\s+been\\s+|have\\s+been\\s+)?${PAST}\\b`));
  const fresh = past ? null : s.take(new RegExp(`\\bnew(?: or (updated|changed|modified|edited))?\\s+${RESOURCE}s?\\b(?!\\s+(?:is|are)\\s+(?:updated|changed|deleted|removed))`));
  const present = past || fresh ? null : s.take(new RegExp(`\\b${PRESENT}s?\\s+(?:a|an|any|the|some)\\s+(?:new\\s+)?${RESOURCE}\\b`));
  if (past) {
    const resource = resourceOf(past[1]!);
    const actions = [...past[2]!.matchAll(new RegExp(PAST_WORDS, 'g'))].map((v) => VERB_ACTION[v[0]]!);
    if (resource) return { event: joinTriggerEvents(actions.map((action) => `${resource}.${action}`)), types: [] };
  }
  if (fresh) {
    const resource = resourceOf(fresh[2]!);
    if (resource) return { event: joinTriggerEvents(fresh[1] ? [`${resource}.created`, `${resource}.${VERB_ACTION[fresh[1]]}`] : [`${resource}.created`]), types: [] };
  }
  if (present) {
    const resource = resourceOf(present[2]!);
    if (resource) return { event: `${resource}.${VERB_ACTION[present[1]!]}`, types: [] };
  }

  const sent =
    s.take(new RegExp(`\\b(?:outgoing|sent)\\s+(?:new\\s+)?${MSG_LIST}`)) ??
    s.take(new RegExp(`\\b${MSG_LIST}\\s+(?:is\\s+|are\\s+|gets\\s+|get\\s+|was\\s+|has\\s+been\\s+)?sent\\b`)) ??
    s.take(new RegExp(`\\b(?:i|we|someone|anyone)\\s+(?:send|sends|write|writes)\\s+(?:an?\\s+|any\\s+)?(?:new\\s+)?${MSG_LIST}`));
  if (sent) return { event: 'message.sent', types: typesOf(sent[0]) };
  const received =
    s.take(new RegExp(`\\b(?:new|incoming|inbound|received|unread)\\s+(?:incoming\\s+|inbound\\s+)?${MSG_LIST}`)) ??
    s.take(new RegExp(`\\b${MSG_LIST}\\s+(?:arrives?|arrive|comes?\\s+in|is\\s+received|are\\s+received|gets\\s+received|lands?|is\\s+recorded)\\b`)) ??
    s.take(new RegExp(`\\b(?:i|we)\\s+(?:receive|get)\\s+(?:an?\\s+|any\\s+)?(?:new\\s+)?${MSG_LIST}`)) ??
    s.take(new RegExp(`\\b(?:an?\\s+|any\\s+|every\\s+|each\\s+|all\\s+)?(?:(?:incoming|inbound)\\s+)?${MSG_LIST}(?=\\s+(?:from|to|containing|mentioning|that|with|marked|except)\\b)`));
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
  // Single spaces only: a list never reaches across a phrase already read (blanked to several spaces).
  const or = new RegExp(`(?:, ?| or |, or )(?:(?:${lead}) )?(?:${PARTY})`);
  for (let end = first.index + first[0].length, more = s.takeAt(or, end); more; end = more.index + more[0].length, more = s.takeAt(or, end)) found.push(more);
  const tests: Condition[] = [];
  const exact: string[] = [];
  for (const m of found) {
    if (m[1]) tests.push(test(field, 'ends_with', `@${m[1]}`));
    else if (m[2]) exact.push(m[2]);
    else if (m[3]) exact.push(m[3].replace(/[ ().-]/g, ''));
    else if (m[4]) tests.push(test(field, 'contains', unquote(s.plainGroup(m, 4))));
  }
  if (exact.length === 1) tests.unshift(test(field, 'equals', exact[0]));
  if (exact.length > 1) tests.unshift(test(field, 'in', exact));
  return tests.length === 1 ? tests[0]! : { any: tests };
}

const STOP_WORDS = new Set(['a', 'an', 'the', 'it', 'them', 'this', 'that', 'any', 'some', 'and', 'or']);

/** Words in the text or summary: `containing "invoice"`, `mentioning refund`, `with "x" in the text`. */
function takeWords(s: Scanner): Condition | null {
  const lead = `(?:containing|contains|that\\s+contains?|which\\s+contains?|mentioning|mentions|that\\s+mentions?|which\\s+mentions?|including|that\\s+includes?|with\\s+the\\s+words?|about)`;
  const m = s.take(new RegExp(`\\b${lead}\\s+(?:the\\s+(?:words?|phrase|text)\\s+)?(${QUOTED}|[a-z0-9][\\w-]*)((?:(?:, ?| or |, or )(?:${QUOTED}|[a-z0-9][\\w-]*))*)`));
  const quotedWith = m ? null : s.take(new RegExp(`\\bwith\\s+(${QUOTED})((?:(?:, ?| or |, or )(?:${QUOTED}))*)(?:\\s+in\\s+(?:the\\s+|its\\s+)?(?:text|body|subject|summary))?`));
  const hit = m ?? quotedWith;
  if (!hit) return null;
  // The words as written (quotes unmasked): the first, then each of the list after it.
  const words = [unquote(s.plainGroup(hit, 1))];
  const rest = hit.indices?.[2];
  if (rest) {
    for (const w of (hit[2] ?? '').matchAll(/"[^"]+"|'[^']+'|[a-z0-9][\w-]*/g)) {
      if (w[0] !== 'or') words.push(unquote(s.plain.slice(rest[0] + w.index, rest[0] + w.index + w[0].length)));
    }
  }
  const kept = words.map((w) => w.trim()).filter((w) => w && !STOP_WORDS.has(w));
  if (!kept.length) return null;
  const tests = kept.flatMap((w) => [test('text', 'contains', w), test('summary', 'contains', w)]);
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
  // "except from boss@example.com", "but not those from @acme.com": the sender must not be one of them.
  const except = takeParty(s, 'sender', '(?:except|but not|other than|excluding|not)(?: (?:those|ones|the ones|any|emails?|messages?|mails?))? (?:from|sent by)|(?:except|other than|excluding)');
  const sender = takeParty(s, 'sender', 'from|sent\\s+by|by');
  if (sender) out.push(sender);
  // "from ada@example.com (verified)": only a sender whose domain passed DMARC (the From header alone can be forged).
  if (s.take(/\((?:verified|authenticated|dmarc verified)\)|\b(?:only )?(?:if|when) (?:the |its )?sender is (?:verified|authenticated)\b|\bfrom (?:a )?(?:verified|authenticated) senders?\b/)) {
    out.push(test('sender.verified', 'equals', true));
  }
  if (except) out.push({ not: except });
  s.take(/\bfrom (?:anyone|anybody|someone|any sender)\b/); // no test: any sender
  const recipient = takeParty(s, 'recipient', 'to|sent\\s+to|addressed\\s+to|for');
  if (recipient) out.push(recipient);
  const words = takeWords(s);
  if (words) out.push(words);
  out.push(...levels);
  return out;
}

// ------------------------------------------------------------------ conditions on the event's time

/** Business hours: Monday to Friday, 09:00 to 17:00, in the automation's time zone. */
export const BUSINESS_HOURS: Condition = { all: [{ dayOfWeek: [1, 2, 3, 4, 5] }, { timeOfDay: { from: '09:00', to: '17:00' } }] };
const hhmm = (t: ClockTime) => `${String(t.hour).padStart(2, '0')}:${String(t.minute).padStart(2, '0')}`;

function clock(text: string): ClockTime | { error: string } {
  const t = parseTime(text);
  if (t === 'ambiguous') return { error: AMBIGUOUS_HOUR(text).replace('"at ', '"') };
  return t ?? { error: `"${text.trim()}" is not a time of day. Write it as "6pm" or "18:00".` };
}

/**
 * Tests on when the event happens (for event triggers): "after 6pm", "before 8am", "between 9am and
 * 5pm", "on weekends", "on weekdays", "on Mondays", "outside business hours", "during business hours".
 */
export function takeTimeConditions(s: Scanner): Condition[] | { error: string } {
  const out: Condition[] = [];
  const between = s.take(new RegExp(`\\bbetween (${TIME}) and (${TIME})(?![\\w/])`));
  if (between) {
    const from = clock(between[1]!);
    const to = clock(between[2]!);
    if ('error' in from) return from;
    if ('error' in to) return to;
    if (hhmm(from) === hhmm(to)) return { error: `"${between[0]}" is an empty range of time.` };
    out.push({ timeOfDay: { from: hhmm(from), to: hhmm(to) } });
  }
  const after = s.take(new RegExp(`\\b(?:after|past|later than) (${TIME})(?![\\w/]| ?(?:hours?|minutes?|mins?|days?|weeks?)\\b)`));
  if (after) {
    const t = clock(after[1]!);
    if ('error' in t) return t;
    if (t.hour === 0 && t.minute === 0) return { error: `"${after[0]}" is the whole day; say "after 6pm" or "between 22:00 and 06:00".` };
    out.push({ timeOfDay: { from: hhmm(t), to: '00:00' } });
  }
  const before = s.take(new RegExp(`\\b(?:before|earlier than) (${TIME})(?![\\w/]| ?(?:hours?|minutes?|mins?|days?|weeks?)\\b)`));
  if (before) {
    const t = clock(before[1]!);
    if ('error' in t) return t;
    if (t.hour === 0 && t.minute === 0) return { error: `"${before[0]}" is never; say "before 8am".` };
    out.push({ timeOfDay: { from: '00:00', to: hhmm(t) } });
  }
  if (after && before) return { error: `"${after[0]}" and "${before[0]}" together are ambiguous; say "between 6pm and 8am" (which spans midnight) or "between 8am and 6pm".` };
  if (s.take(/\boutside (?:of )?(?:the )?(?:business|office|working|opening) hours\b/)) out.push({ not: BUSINESS_HOURS });
  if (s.take(/\b(?:during|in|within) (?:the )?(?:business|office|working|opening) hours\b/)) out.push(BUSINESS_HOURS);
  // "except on weekends", "but not on Sundays", "not on weekdays": the day must not be one of them.
  const EXCEPT = '(except |but not |not )?';
  const weekend = s.take(new RegExp(`\\b${EXCEPT}(?:on |during |over )?(?:the |a )?weekends?\\b`));
  const weekday = s.take(new RegExp(`\\b${EXCEPT}(?:on |during )?(?:a )?(?:weekdays?|working days?|business days?)\\b`));
  const named = s.take(new RegExp(`\\b${EXCEPT}(?:on |every )(?:a )?(${DAY_LIST})\\b`));
  if ([weekend, weekday, named].filter(Boolean).length > 1) return { error: 'The instructions name more than one kind of day (weekends, weekdays, days of the week); state one, e.g. "on Saturdays and Sundays".' };
  const days = (m: RegExpExecArray, list: number[]): Condition => (m[1] ? { not: { dayOfWeek: list } } : { dayOfWeek: list });
  if (weekend) out.push(days(weekend, [0, 6]));
  if (weekday) out.push(days(weekday, [1, 2, 3, 4, 5]));
  if (named) out.push(days(named, dayNumbers(named[2]!).sort((a, b) => a - b)));
  const excepted = [weekend, weekday, named].find((m) => m?.[1]);
  if (excepted && (between || after || before)) {
    return { error: `"${excepted[0].trim()}" next to a time of day is ambiguous (does the exception take the time with it?). State the days and the times that run, e.g. "on weekdays after 6pm".` };
  }
  return out;
}

// ------------------------------------------------------------------ conditions on other records

/** The fields "whose … is …" may test, by resource (the event's record), with their words. */
const RECORD_FIELDS: Record<string, Record<string, string>> = {
  customer: { type: 'type', status: 'status', name: 'name', email: 'email', 'email address': 'email', phone: 'phone', 'phone number': 'phone' },
  'customer.transaction': { type: 'type', status: 'status', currency: 'currency', description: 'description' },
  contact: { name: 'name', 'first name': 'firstName', 'last name': 'lastName', company: 'company', 'job title': 'jobTitle', title: 'title' },
  business: { name: 'name' },
  folder: { name: 'name' },
};

const CURRENCIES = new Set(Intl.supportedValuesOf('currency').map((c) => c.toLowerCase()));
const CURRENCY_SYMBOLS: Record<string, string> = { '€': 'EUR', $: 'USD', '£': 'GBP', '¥': 'JPY' };

/** The resource of a trigger's event types when they all share one ("customer.created,customer.updated" → customer). */
export const resourceOfEvents = (types: string[]): string | null => {
  const resources = new Set(types.map((t) => t.slice(0, t.lastIndexOf('.'))));
  return resources.size === 1 ? [...resources][0]! : null;
};

/** An amount test: "over 1000 EUR", "of more than €1,000", "under 50 USD", "at least 10". */
export function takeAmount(s: Scanner): { tests: ConditionTest[]; phrase: string } | { error: string } | null {
  const m = s.take(
    /\b(?:of )?(over|above|more than|greater than|larger than|exceeding|at least|under|below|less than|smaller than|at most) ([€$£¥])?(\d{1,3}(?:,\d{3})+|\d+)(\.\d{1,4})?(?: ?([a-z]{3})\b)?/,
  );
  if (!m) return null;
  const [, word, symbol, whole, fraction, code] = m;
  const currency = symbol ? CURRENCY_SYMBOLS[symbol]! : code && CURRENCIES.has(code) ? code.toUpperCase() : null;
  if (code && !currency) return { error: `"${m[0].trim()}": "${code}" is not a currency code; write one such as EUR or USD, e.g. "a transaction over 1000 EUR".` };
  if (symbol && code && code.toUpperCase() !== currency) return { error: `"${m[0].trim()}" names two currencies.` };
  const value = Number(whole!.replaceAll(',', '') + (fraction ?? ''));
  const operator = ({ over: 'gt', above: 'gt', 'more than': 'gt', 'greater than': 'gt', 'larger than': 'gt', exceeding: 'gt', 'at least': 'gte', under: 'lt', below: 'lt', 'less than': 'lt', 'smaller than': 'lt', 'at most': 'lte' } as const)[
    word as 'over'
  ];
  const tests: ConditionTest[] = [test('amount', operator, value)];
  if (currency) tests.push(test('currency', 'equals', currency));
  return { tests, phrase: s.plainGroup(m, 0).trim() };
}

/** A "whose … is …" phrase, read before the trigger (it sits inside it: "a customer whose type is VIP is added"). */
export interface RecordPhrase {
  phrase: string;
  field: string;
  negated: boolean;
  value: string;
}

/** "whose type is VIP", "whose status is not lead", "where the type is 'company'": phrases on the record's fields. */
export function takeRecordPhrases(s: Scanner): RecordPhrase[] {
  const out: RecordPhrase[] = [];
  const pattern = new RegExp(`\\b(?:whose |where (?:the |its )?)([a-z]+(?: [a-z]+)?) (is not|isn't|is|equals|=) (${QUOTED}|[a-z0-9@][\\w.@+-]*)`);
  for (let m = s.take(pattern); m; m = s.take(pattern)) {
    out.push({ phrase: s.plainGroup(m, 0), field: m[1]!, negated: m[2] === 'is not' || m[2] === "isn't", value: unquote(s.writtenGroup(m, 3)) });
  }
  return out;
}

/** The tests the phrases state on the record of the trigger's resource; an error for a field it does not know. */
export function recordConditions(phrases: RecordPhrase[], resource: string | null): ConditionTest[] | { error: string } {
  const fields: Record<string, string> = resource ? (RECORD_FIELDS[resource] ?? {}) : {};
  const out: ConditionTest[] = [];
  for (const p of phrases) {
    const field = fields[p.field];
    if (!field) {
      const known = Object.keys(fields);
      const what = resource ? `a ${resource.replace('.', ' ')} has no field "${p.field}" that the built-in evaluator knows` : 'the built-in evaluator reads such tests on customers, transactions, contacts, businesses and folders only';
      return { error: `"${p.phrase}": ${what}${known.length ? ` (it knows ${known.map((k) => `"${k}"`).join(', ')})` : ''}. E.g. "When a customer whose type is VIP is added, …".` };
    }
    out.push(test(field, p.negated ? 'not_equals' : 'equals', p.value));
  }
  return out;
}

// ------------------------------------------------------------------ what is left

/** Words that carry no meaning of their own once the phrases around them are understood. */
const FILLER = new Set(
  (
    'a an the any every each all it its it\'s them they their this that these those one ones and then also after afterwards please automatically ' +
    'when whenever once if as soon i we me my us our you your is are be been being gets get got has have new always immediately right away only ' +
    'just kindly could would should can will shall want like to for in on of with by from at there so too own'
  ).split(' '),
);

/** Filler left out of the quoted spans when it stands at their edges. */
const EDGE = new Set('when whenever if once a an the and then also it them this please'.split(' '));

/** Words that reverse or limit a meaning: never dropped, so their presence refuses the plan. */
const NEGATIONS = /\b(?:not|no|never|don't|dont|doesn't|do not|except|excluding|unless|without|but|other than|instead|neither|nor)\b/;

/** The text without the given characters at either end (a loop: a trailing `[…]+$` pattern is quadratic). */
export function trimChars(text: string, chars: string): string {
  let start = 0;
  let end = text.length;
  while (start < end && chars.includes(text[start]!)) start++;
  while (end > start && chars.includes(text[end - 1]!)) end--;
  return text.slice(start, end);
}

/**
 * What the phrases left unread: the spans (as they stand in the lower-case text) holding a word that
 * is not filler. Blanked phrases separate spans.
 */
export function unexplained(s: Scanner): string[] {
  const spans: string[] = [];
  // Runs of words separated by single spaces; blanked phrases (two spaces or more) separate them.
  for (const run of s.text.matchAll(/[^ ]+(?: [^ ]+)*/g)) {
    const words = [...run[0].matchAll(/[^ ]+/g)].map((w) => ({ from: run.index + w.index, to: run.index + w.index + w[0].length }));
    // Read in the plain text: a quoted string left unread shows its content.
    const bare = (w: { from: number; to: number }) => trimChars(s.plain.slice(w.from, w.to), ',.;:!?&()\'"-');
    if (!words.some((w) => bare(w) !== '' && !FILLER.has(bare(w)))) continue;
    // Quote the words that matter: "when a vip" → "vip", "and reply to it" → "reply to".
    while (words.length > 1 && EDGE.has(bare(words[0]!))) words.shift();
    while (words.length > 1 && EDGE.has(bare(words[words.length - 1]!))) words.pop();
    spans.push(trimChars(s.plain.slice(words[0]!.from, words[words.length - 1]!.to), ' ,.;:!?&()-'));
  }
  return spans;
}

/** Whether a span left unread negates or limits something. */
export const isNegation = (span: string): boolean => NEGATIONS.test(span);

// ------------------------------------------------------------------ actions

export type ActionSpec =
  | { kind: 'read' | 'unread' | 'archive' | 'contact'; at: number; phrase: string }
  /** `cadence`: "a daily / weekly / monthly digest", which the schedule must agree with. */
  /** `unread`: a digest of the messages (or only the emails) not read yet, rather than of those since the last run. */
  | { kind: 'digest'; at: number; phrase: string; cadence?: 'daily' | 'weekly' | 'monthly'; unread?: 'unread' | 'unreadEmails' }
  | { kind: 'snooze'; at: number; phrase: string; until: string; error?: string }
  /**
   * A change of the thread of the triggering message or thread event: its status, its assignee (a member's
   * email), a snooze (`status` snoozed with `snoozedUntil`, a template), tags added or removed.
   */
  | { kind: 'thread'; at: number; phrase: string; patch: ThreadPatch; error?: string }
  | { kind: 'set'; at: number; phrase: string; field: 'importance' | 'urgency' | 'status'; value: string }
  | { kind: 'reply'; at: number; phrase: string; text: string; replyAll: boolean }
  | { kind: 'forward'; at: number; phrase: string; to: string[]; text?: string }
  | { kind: 'send'; at: number; phrase: string; to: string[]; subject: string; text: string }
  /** A new text message (SMS) to numbers, through the organization's text channel. */
  | { kind: 'text'; at: number; phrase: string; to: string[]; text: string }
  /** A notice by email about the event (a channel that stopped working): to addresses, or `me` (the creator). */
  | { kind: 'notify'; at: number; phrase: string; to: string[] };

/** What a thread action changes (the input of `threads.update` beside the thread's id). */
export interface ThreadPatch {
  status?: 'open' | 'pending' | 'closed' | 'snoozed';
  snoozedUntil?: string;
  assigneeEmail?: string;
  addTags?: string[];
  removeTags?: string[];
}

const IT = "(?:\\s+(?:it|them|this|these|that|the\\s+(?:message|email|mail|sms|text)s?|each\\s+(?:one|message|email)|all))?";

/** `for 2 hours` → `{{now+2h}}`; `until tomorrow 9am` / `until Monday` → `{{next(…)}}`. */
function snoozeUntil(m: RegExpExecArray): string | { error: string } {
  const [, amount, unit, target] = m;
  if (unit) {
    const n = !amount || amount === 'a' || amount === 'an' || amount === 'one' ? 1 : Number(amount);
    const u = unit.startsWith('min') ? 'm' : unit[0]!;
    return `{{now+${n}${u}}}`;
  }
  if (target) {
    const t = target.trim();
    const time = new RegExp(`(?:at\\s+)?(${TIME})$`).exec(t);
    const read = time ? parseTime(time[1]!) : null;
    if (read === 'ambiguous') return { error: AMBIGUOUS_HOUR(time![1]!) };
    const parsed = read;
    const before = (parsed ? t.slice(0, time!.index) : t).trim();
    const rest = before.endsWith(' morning') ? before.slice(0, -' morning'.length) : before;
    const { hour, minute } = parsed ?? { hour: DEFAULT_HOUR, minute: 0 };
    if (rest === 'next week') return `{{next(${minute} ${hour} * * 1)}}`;
    const day = new RegExp(`^(?:next\\s+)?(${DAY})$`).exec(rest);
    if (day) return `{{next(${minute} ${hour} * * ${dayNumber(day[1]!)})}}`;
    return `{{next(${minute} ${hour} * * *)}}`; // "tomorrow", "tomorrow morning", a bare time
  }
  return `{{next(0 ${DEFAULT_HOUR} * * *)}}`; // "snooze it": until the next morning
}

/** How long a snooze lasts: group 1-2 an amount and unit ("for 2 days"), group 3 a time ("until Monday 9am"); optional. */
const SNOOZE_FOR = `(?:\\s+for\\s+(an?|one|\\d{1,4})\\s+(min(?:ute)?s?|hours?|days?|weeks?)\\b|\\s+until\\s+((?:(?:tomorrow|next\\s+week|(?:next\\s+)?${DAY})(?:\\s+morning)?(?:\\s+(?:at\\s+)?${TIME})?)|(?:${TIME})))?`;

/** A tag as the instructions write it: a quoted string or one word (letters, digits, `-`, `_`). */
const TAG_WORD = `(?:${QUOTED}|[a-z0-9][\\w-]*)`;
/** Words that end a list of tags: the next action's verb ("tag the thread vip and assign it …"). */
const NOT_A_TAG = '(?!(?:assign|close|resolve|snooze|mark|archive|reply|forward|send|set|change|tag|add|remove|then|also|email|notify|text)\\b)';
/** One tag or several, joined by commas and "and" (group 1). */
const TAG_LIST = `(${TAG_WORD}(?:(?:,|, and| and) ${NOT_A_TAG}${TAG_WORD})*)`;
/** One tag or several, joined by commas and "or" (a condition: any of them). */
const TAG_CHOICE = `(${TAG_WORD}(?:(?:,|, or| or) ${TAG_WORD})*)`;

/** The tags of a list as stored (lower case, unquoted); an error for one longer than a tag may be. */
function tagsOf(s: Scanner, m: RegExpExecArray, group: number): string[] | { error: string } {
  const text = s.plainGroup(m, group);
  const tags = [...text.matchAll(/"[^"]+"|'[^']+'|[a-z0-9][\w-]*/g)].map((t) => unquote(t[0]).trim().toLowerCase()).filter((t) => t && t !== 'and' && t !== 'or');
  const long = tags.find((t) => t.length > MAX_TAG_LENGTH);
  if (long) return { error: `"${long.slice(0, 60)}…" is longer than a tag may be (${MAX_TAG_LENGTH} characters).` };
  return [...new Set(tags)];
}

/**
 * Tests on the thread of the event ("in a thread tagged vip", "a conversation tagged vip or urgent is
 * reopened"): `thread.tags`, which the engine reads from the thread of the event's message (or the thread
 * event's own record). Read before the trigger, since it sits inside it.
 */
export function takeThreadConditions(s: Scanner): { tests: Condition[]; phrase: string } | { error: string } | null {
  const pattern = new RegExp(
    `\\b(?:(?:in|on|to|of)\\s+(?:a|an|the|any|one)\\s+${THREAD_NOUN}\\s+|(?<=\\b(?:thread|conversation)s? ))(?:that\\s+is\\s+|which\\s+is\\s+|that's\\s+)?(?:tagged|labell?ed|with\\s+the\\s+(?:tag|label))\\s+(?:as\\s+|with\\s+)?(?:the\\s+)?(?:tags?\\s+|labels?\\s+)?${TAG_CHOICE}`,
  );
  const m = s.take(pattern);
  if (!m) return null;
  const tags = tagsOf(s, m, 1);
  if ('error' in tags) return tags;
  const tests = tags.map((tag) => test('thread.tags', 'equals', tag));
  return { tests: tests.length === 1 ? tests : [{ any: tests }], phrase: s.plainGroup(m, 0).trim() };
}

/** Words that speak of an answer that does not come ("no answer from the customer for 7 days"): a wait for nothing. */
export const AWAITED_ANSWER =
  /\b(?:(?:get|gets|got|have|has|had|with|receive|receives|there\s+is|there's)\s+no\s+(?:answer|reply|response|message)s?|(?:does|do|did|has|have)\s*(?:n't|not)\s+(?:answer|repl(?:y|ied)|respond(?:ed)?|write|written|wrote)|(?:no|without\s+(?:an?\s+)?)(?:answer|reply|response)s?)\b(?:[^.;]*?\b(?:for|within|in|after)\s+(?:an?|one|\d{1,4})\s+(?:min(?:ute)?s?|hours?|days?|weeks?|months?)\b)/;

const EMAILS = `${EMAIL}(?:(?:,|, and| and| or) ${EMAIL})*`;
const PHONES = `${PHONE}(?:(?:,|, and| and| or) ${PHONE})*`;
const addresses = (list: string) => [...new Set(list.split(/,| and | or /).map((a) => a.trim()).filter(Boolean))];

/**
 * Email replies, forwards and new emails, with their text as written (case kept). Read before every
 * other phrase: the quoted text is the email's, not instructions ("reply 'back at 9am EST'" names no
 * time zone).
 */
export function takeEmailActions(s: Scanner): ActionSpec[] {
  const out: ActionSpec[] = [];
  const text = `(${QUOTED})`;
  const reply = new RegExp(`\\breply(?: to (?:it|them|this|the (?:message|email|mail|sender)))?( to all| to everyone| all)?(?: with| saying| that says| with the text)?:? ${text}`, 'd');
  for (const m of s.takeAll(reply)) out.push({ kind: 'reply', at: m.index, phrase: s.plainGroup(m, 0).trim(), text: unquote(s.writtenGroup(m, 2)), replyAll: Boolean(m[1]) });
  const forward = new RegExp(`\\bforward(?: it| them| this| the (?:message|email|mail))? to (${EMAILS})(?:,? (?:with the note|with a note|with the text|saying|adding):? ${text})?`, 'd');
  for (const m of s.takeAll(forward)) {
    const spec: ActionSpec = { kind: 'forward', at: m.index, phrase: s.plainGroup(m, 0).trim(), to: addresses(m[1]!) };
    if (m[2]) spec.text = unquote(s.writtenGroup(m, 2));
    out.push(spec);
  }
  const send = new RegExp(`\\b(?:send|write) (?:an? )?(?:new )?(?:e-?mail|mail|message) to (${EMAILS})(?:,? with the subject:? ${text}(?: and)?)?,? (?:saying|that says|with the text|with the message|reading):? ${text}`, 'd');
  for (const m of s.takeAll(send)) {
    out.push({ kind: 'send', at: m.index, phrase: s.plainGroup(m, 0).trim(), to: addresses(m[1]!), subject: m[2] ? unquote(s.writtenGroup(m, 2)) : '', text: unquote(s.writtenGroup(m, 3)) });
  }
  // "email me", "notify ops@example.com by email", "send me an email": a notice written from the event (no
  // text given; an email with its text is the `send` above).
  const whom = `(me|us|${EMAILS})`;
  // "Email" is a verb only with its object right after it, never after an article ("an email to x@…" is a message).
  const notify = new RegExp(
    `(?<!\\b(?:an?|any|the|new|every|each|incoming|outgoing) )\\b(?:(?:e-?mail|notify|alert|warn|tell|write to) ${whom}(?: (?:by|via|with an?|in an?) e-?mail)?|send ${whom} an? (?:e-?mail|notice|notification|alert|message))(?![\\w@.])`,
    'd',
  );
  for (const m of s.takeAll(notify)) {
    const list = m[1] ?? m[2]!;
    out.push({ kind: 'notify', at: m.index, phrase: s.plainGroup(m, 0).trim(), to: /^(?:me|us)$/.test(list) ? ['me'] : addresses(list) });
  }
  // "text +1 212 555 0100 'Big payment'", "send a text (message) / an SMS to +1… saying '…'".
  const sendText = new RegExp(`\\b(?:text|sms|(?:send|write) (?:an? )?(?:text(?: message)?|sms) to) (${PHONES}),?(?: (?:saying|that says|with the text|with the message|reading))?:? ${text}`, 'd');
  for (const m of s.takeAll(sendText)) {
    out.push({ kind: 'text', at: m.index, phrase: m[0].trim(), to: [...new Set(m[1]!.split(/,| and | or /).map((n) => n.replace(/[ ().-]/g, '')).filter(Boolean))], text: unquote(s.writtenGroup(m, 2)) });
  }
  return out;
}

/** The actions the text asks for, in the order it states them. */
export function takeActions(s: Scanner): ActionSpec[] {
  const out: ActionSpec[] = [];
  const push = (m: RegExpExecArray[], spec: (m: RegExpExecArray) => ActionSpec) => out.push(...m.map(spec));
  const simple = (kind: 'read' | 'unread' | 'archive' | 'contact') => (m: RegExpExecArray): ActionSpec => ({ kind, at: m.index, phrase: s.plainGroup(m, 0).trim() });
  const cadenced = (m: RegExpExecArray): ActionSpec => {
    const cadence = /\b(daily|weekly|monthly)\b/.exec(m[0])?.[1] as 'daily' | 'weekly' | 'monthly' | undefined;
    // "a summary of unread emails": the emails not read yet (whenever they came), not the messages since the last run.
    const unread = /\bunread\b/.test(m[0]) ? (/\b(?:emails|mails?)\b/.test(m[0]) ? 'unreadEmails' : 'unread') : undefined;
    return { kind: 'digest', at: m.index, phrase: s.plainGroup(m, 0).trim(), ...(cadence ? { cadence } : {}), ...(unread ? { unread } : {}) };
  };

  push(
    s.takeAll(
      /\b(?:(?:write|send|create|make|post|prepare|compile|produce|record|give|email)\s+(?:me\s+|us\s+)?)?(?:a\s+|an\s+|the\s+)?(?:short\s+|daily\s+|weekly\s+|monthly\s+)?(?:summary|digest|recap|roundup)\b(?:\s+of\s+(?:the\s+|all\s+|my\s+)?(?:new\s+|unread\s+|recent\s+|latest\s+)?(?:messages|emails|mails?|inbox)(?:\s+(?:received\s+)?since\s+(?:the\s+)?last\s+(?:run|time))?)?(?:\s+as\s+a\s+(?:new\s+)?(?:message|note))?/,
    ),
    cadenced,
  );
  const THREAD_REF = `(?:the\\s+|its\\s+|this\\s+|that\\s+)?(?:${THREAD_NOUN}|it)`;
  push(s.takeAll(new RegExp(`\\b(?:close|resolve)\\s+${THREAD_REF}\\b`)), (m) => ({ kind: 'thread', at: m.index, phrase: s.plainGroup(m, 0).trim(), patch: { status: 'closed' } }));
  push(
    s.takeAll(new RegExp(`\\b(?:set|change)\\s+(?:the\\s+|its\\s+)?(?:thread|conversation)(?:'s)?\\s+status\\s+to\\s+(open|pending|closed)\\b|\\bmark\\s+${THREAD_REF}\\s+(?:as\\s+)?(pending|closed)\\b`)),
    (m) => ({ kind: 'thread', at: m.index, phrase: s.plainGroup(m, 0).trim(), patch: { status: (m[1] ?? m[2]) as 'open' | 'pending' | 'closed' } }),
  );
  push(
    s.takeAll(new RegExp(`\\bassign\\s+${THREAD_REF}\\s+to\\s+(${EMAIL})`)),
    (m) => ({ kind: 'thread', at: m.index, phrase: s.plainGroup(m, 0).trim(), patch: { assigneeEmail: m[1]! } }),
  );
  // The thread named (never "it", which is the message: "snooze it" snoozes the message).
  const THREAD_NAMED = `(?:the\\s+|its\\s+|this\\s+|that\\s+)?${THREAD_NOUN}`;
  push(s.takeAll(new RegExp(`\\bsnooze\\s+${THREAD_NAMED}${SNOOZE_FOR}`)), (m) => {
    const until = snoozeUntil(m);
    const phrase = s.plainGroup(m, 0).trim();
    return typeof until === 'string'
      ? { kind: 'thread', at: m.index, phrase, patch: { status: 'snoozed', snoozedUntil: until } }
      : { kind: 'thread', at: m.index, phrase, patch: {}, error: until.error };
  });
  const tagAction = (field: 'addTags' | 'removeTags', group: number) => (m: RegExpExecArray): ActionSpec => {
    const tags = tagsOf(s, m, group);
    const phrase = s.plainGroup(m, 0).trim();
    return 'error' in tags ? { kind: 'thread', at: m.index, phrase, patch: {}, error: tags.error } : { kind: 'thread', at: m.index, phrase, patch: { [field]: tags } };
  };
  push(s.takeAll(new RegExp(`\\b(?:tag|label)\\s+${THREAD_NAMED}\\s+(?:as\\s+|with\\s+)?(?:the\\s+)?(?:tags?\\s+|labels?\\s+)?${TAG_LIST}`)), tagAction('addTags', 1));
  push(s.takeAll(new RegExp(`\\badd\\s+(?:the\\s+|a\\s+)?(?:tags?|labels?)\\s+${TAG_LIST}\\s+to\\s+${THREAD_NAMED}`)), tagAction('addTags', 1));
  push(s.takeAll(new RegExp(`\\b(?:remove|delete|drop)\\s+(?:the\\s+)?(?:tags?|labels?)\\s+${TAG_LIST}\\s+from\\s+${THREAD_NAMED}|\\b(?:untag|unlabel)\\s+${THREAD_NAMED}\\s+${TAG_LIST}`)), (m) =>
    tagAction('removeTags', m[1] !== undefined ? 1 : 2)(m),
  );
  push(s.takeAll(/\bsummari[sz]e(?:\s+(?:the|all|my))?(?:\s+(?:new|unread|recent|latest))?(?:\s+(?:messages|emails|mails?|inbox))?(?:\s+since\s+(?:the\s+)?last\s+(?:run|time))?/), cadenced);
  push(
    s.takeAll(/\b(?:create|add|save|make)\s+(?:a\s+|the\s+)?(?:new\s+)?contact\s+(?:for|from|of|with)\s+(?:the\s+|its\s+|each\s+|their\s+)?sender\b|\b(?:add|save)\s+(?:the\s+|its\s+)?sender\s+(?:as\s+a\s+(?:new\s+)?contact|to\s+(?:my\s+|the\s+)?contacts)\b/),
    simple('contact'),
  );
  push(
    s.takeAll(new RegExp(`\\b(?:set|change|update)\\s+(?:its\\s+|the\\s+|their\\s+)?(importance|urgency|status)\\s+(?:to|as|=)\\s+(${QUOTED}|[a-z0-9_-]+)`)),
    // A status keeps the case it was written in; importance and urgency are lower-case words.
    (m) => ({ kind: 'set', at: m.index, phrase: s.plainGroup(m, 0).trim(), field: m[1] as 'importance', value: m[1] === 'status' ? unquote(s.writtenGroup(m, 2)) : unquote(s.plainGroup(m, 2)) }),
  );
  push(
    s.takeAll(new RegExp(`\\b(?:mark|flag|tag)${IT}\\s+(?:as\\s+|with\\s+)?${LEVEL}[-\\s](importance|urgency|priority)\\b`)),
    (m) => ({ kind: 'set', at: m.index, phrase: s.plainGroup(m, 0).trim(), field: m[2] === 'urgency' ? 'urgency' : 'importance', value: m[1] === 'medium' ? 'normal' : m[1]! }),
  );
  push(s.takeAll(new RegExp(`\\b(?:mark|flag|tag)${IT}\\s+(?:as\\s+)?(urgent|important)\\b`)), (m) => ({
    kind: 'set',
    at: m.index,
    phrase: s.plainGroup(m, 0).trim(),
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
  // Not inside an address (archive@example.com, snoozer@example.com).
  push(s.takeAll(new RegExp(`\\barchive${IT}(?![\\w@]|\\.\\w)`)), simple('archive'));
  push(
    s.takeAll(new RegExp(`\\bsnooze(?![\\w@]|\\.\\w)${IT}${SNOOZE_FOR}`)),
    (m) => {
      const until = snoozeUntil(m);
      return typeof until === 'string' ? { kind: 'snooze', at: m.index, phrase: s.plainGroup(m, 0).trim(), until } : { kind: 'snooze', at: m.index, phrase: s.plainGroup(m, 0).trim(), until: '', error: until.error };
    },
  );
  // "Snooze every email from x for 2 hours": the duration away from the verb.
  const bare = out.find((a) => a.kind === 'snooze' && !/\s(?:for|until)\s/.test(a.phrase));
  const duration = bare && s.take(/\bfor\s+(an?|one|\d{1,4})\s+(min(?:ute)?s?|hours?|days?|weeks?)\b/);
  if (bare && bare.kind === 'snooze' && duration) bare.until = snoozeUntil([duration[0], duration[1], duration[2], undefined] as unknown as RegExpExecArray) as string;
  return out.sort((a, b) => a.at - b.at);
}
