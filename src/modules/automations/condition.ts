import { CONDITION_OPERATORS, type Condition, type ConditionOperator, type ConditionTest, type DayOfWeekTest, type TimeOfDayTest } from './plan.js';

/**
 * Conditions on an event's record. Semantics:
 * - `field` is a dotted path into the record (`importance`, `metadata.source`, `items.0.name`).
 * - String comparisons are case-insensitive; a number compared with a string is compared as text.
 * - `sender` and `recipient` (and their sub-fields, e.g. `sender.email`) are matched by address: a string
 *   as it is (`Ada <ada@example.com>` by the part in angle brackets), an object by its `email`, `address`
 *   or `phoneNumber` (`contains` also looks at `name`), an array by any of its elements; phone numbers
 *   also match without their spaces, dots, dashes and parentheses (`+1 415 555-0123` equals `+14155550123`).
 * - A field holding an array matches a positive operator when one of its elements does; `not_*`
 *   operators are the negation of their positive twin (`not_contains` holds when no element contains).
 * - `in` takes an array of values; `gt`/`gte`/`lt`/`lte` compare numbers, or ISO 8601 date strings;
 *   `exists` holds when the value is present and neither null nor an empty string; `exists` and
 *   `not_exists` take no value.
 * - `sender.verified` is true when the record is an email whose From domain passed DMARC
 *   (`metadata.email.authentication.dmarc` is `pass`: the sender is authenticated), false otherwise; it takes
 *   `equals` (or `not_equals`) with `true` or `false`. Every other sender test reads the From header as
 *   written, which anyone can forge.
 * - `thread.…` (`thread.tags`, `thread.status`, …) reads the thread of the event's record (thread-context.ts):
 *   the record itself for a thread event, else the thread its `threadId` names, as it is when tested.
 * - A condition examines at most the first MAX_CONDITION_TEXT (10,000) characters of a string: a longer
 *   value is compared by its beginning only, so no input makes a test take long.
 */

const PARTY_FIELDS = new Set(['sender', 'recipient']);
const ADDRESS_KEYS = ['email', 'address', 'phoneNumber'] as const;
const NEGATIONS: Partial<Record<ConditionOperator, ConditionOperator>> = {
  not_equals: 'equals',
  not_contains: 'contains',
  not_exists: 'exists',
};
const MAX_DEPTH = 32;
/** The field a test reads to require an authenticated sender (DMARC pass). */
export const SENDER_VERIFIED = 'sender.verified';
/** The field a test reads for the tags of the event's thread (see thread-context.ts). */
export const THREAD_TAGS = 'thread.tags';
/** The most characters of one string a condition examines. */
export const MAX_CONDITION_TEXT = 10_000;

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Follows a dotted path; numeric segments index arrays. */
export function valueAtPath(value: unknown, path: readonly string[]): unknown {
  let current = value;
  for (const segment of path) {
    if (Array.isArray(current) && /^\d+$/.test(segment)) current = current[Number(segment)];
    else if (isRecord(current)) current = current[segment];
    else return undefined;
  }
  return current;
}

/**
 * `Ada Lovelace <ada@example.com>` (or `"Ada Lovelace" <…>`) → its name and address; any other string is an
 * address. Only the first MAX_CONDITION_TEXT characters are read, and the pattern is one that cannot
 * backtrack: a sender of many spaces must not hold the process.
 */
function splitAddressString(s: string): { address: string; name: string | null } {
  const t = s.slice(0, MAX_CONDITION_TEXT).trim();
  const m = /^(?:"([^"]*)"\s*|"?([^"<]*))<([^>]+)>$/.exec(t);
  if (m) return { address: m[3]!.trim(), name: (m[1] ?? m[2]!).trim() || null };
  return { address: t, name: null };
}

/** The address and name of one party (a sender or recipient element). */
export function partyOf(value: unknown): { address: string | null; name: string | null } {
  if (typeof value === 'string') return splitAddressString(value);
  if (isRecord(value)) {
    const key = ADDRESS_KEYS.find((k) => typeof value[k] === 'string' && value[k] !== '');
    return { address: key ? (value[key] as string) : null, name: typeof value.name === 'string' ? value.name : null };
  }
  return { address: null, name: null };
}

/** Whether the record's sender is authenticated: an email whose From domain passed DMARC. */
export function senderVerified(record: unknown): boolean {
  const dmarc = valueAtPath(record, ['metadata', 'email', 'authentication', 'dmarc']);
  return typeof dmarc === 'string' && dmarc.toLowerCase() === 'pass';
}

/** The values a test on `sender…`/`recipient…` compares with. */
function partyCandidates(record: unknown, path: readonly string[], operator: ConditionOperator): unknown[] {
  const root = valueAtPath(record, path.slice(0, 1));
  const parties = Array.isArray(root) ? root : [root];
  const sub = path.slice(1);
  const out: unknown[] = [];
  for (const party of parties) {
    if (sub.length === 0) {
      const { address, name } = partyOf(party);
      if (address !== null) out.push(address);
      if (isRecord(party)) for (const k of ADDRESS_KEYS) if (typeof party[k] === 'string' && party[k] !== address) out.push(party[k]);
      if (name !== null && (operator === 'contains' || operator === 'starts_with' || operator === 'ends_with')) out.push(name);
    } else if (typeof party === 'string') {
      const split = splitAddressString(party);
      if (sub.length === 1 && sub[0] === 'name') out.push(split.name ?? undefined);
      else if (sub.length === 1 && (ADDRESS_KEYS as readonly string[]).includes(sub[0]!)) out.push(split.address);
    } else {
      out.push(valueAtPath(party, sub));
    }
  }
  // Phone numbers are also compared without their spaces, dots, dashes and parentheses.
  const phones = out.filter((c): c is string => typeof c === 'string' && PHONE_LIKE.test(c)).map((c) => c.replace(/[\s().-]/g, ''));
  return [...out, ...phones];
}

const PHONE_LIKE = /^\+?[\d\s().-]{6,}$/;

const isDateString = (s: string) => /^\d{4}-\d{2}-\d{2}([T ][\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/i.test(s) && !Number.isNaN(Date.parse(s));
const isScalar = (v: unknown): v is string | number | boolean => typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';
const lower = (v: string | number | boolean) => String(v).toLowerCase();

function looseEquals(a: unknown, b: unknown): boolean {
  if (isScalar(a) && isScalar(b)) {
    if (typeof a === 'string' || typeof b === 'string') return lower(a) === lower(b);
    return a === b;
  }
  if (a === null || b === null || a === undefined || b === undefined) return (a ?? null) === (b ?? null);
  return JSON.stringify(a) === JSON.stringify(b);
}

function compare(a: unknown, b: unknown): number | null {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'number' && typeof b === 'string' && b.trim() !== '' && Number.isFinite(Number(b))) return a - Number(b);
  if (typeof a === 'string' && typeof b === 'number' && a.trim() !== '' && Number.isFinite(Number(a))) return Number(a) - b;
  if (typeof a === 'string' && typeof b === 'string' && isDateString(a) && isDateString(b)) return Date.parse(a) - Date.parse(b);
  return null;
}

/** One positive operator on one scalar-or-object value. */
function holds(operator: ConditionOperator, value: unknown, expected: unknown): boolean {
  const actual = typeof value === 'string' ? value.slice(0, MAX_CONDITION_TEXT) : value;
  switch (operator) {
    case 'exists':
      return actual !== undefined && actual !== null && actual !== '';
    case 'equals':
      return looseEquals(actual, expected);
    case 'contains':
      return isScalar(actual) && isScalar(expected) && lower(actual).includes(lower(expected));
    case 'starts_with':
      return isScalar(actual) && isScalar(expected) && lower(actual).startsWith(lower(expected));
    case 'ends_with':
      return isScalar(actual) && isScalar(expected) && lower(actual).endsWith(lower(expected));
    case 'in':
      return Array.isArray(expected) && expected.some((e) => looseEquals(actual, e));
    case 'gt':
    case 'gte':
    case 'lt':
    case 'lte': {
      const c = compare(actual, expected);
      if (c === null) return false;
      return operator === 'gt' ? c > 0 : operator === 'gte' ? c >= 0 : operator === 'lt' ? c < 0 : c <= 0;
    }
    default:
      return false;
  }
}

function testHolds(test: ConditionTest, record: unknown): boolean {
  const positive = NEGATIONS[test.operator] ?? test.operator;
  const negate = positive !== test.operator;
  const path = test.field.split('.');
  let candidates: unknown[];
  if (test.field === SENDER_VERIFIED) candidates = [senderVerified(record)];
  else if (PARTY_FIELDS.has(path[0]!)) candidates = partyCandidates(record, path, positive);
  else {
    const value = valueAtPath(record, path);
    candidates = Array.isArray(value) && positive !== 'equals' && positive !== 'exists' ? value : [value];
    if (Array.isArray(value) && positive === 'equals') candidates = [value, ...value];
    if (Array.isArray(value) && positive === 'exists') candidates = value.length ? [true] : [];
  }
  const any = candidates.some((c) => holds(positive, c, test.value));
  return negate ? !any : any;
}

/** When the event happened, and the time zone its time tests (`timeOfDay`, `dayOfWeek`) are read in (UTC when null). */
export interface ConditionContext {
  at: Date;
  timezone: string | null;
}

/**
 * Whether the condition holds on the record (the event's `data`) and the event's time. Without a
 * `context`, a time test throws: it must never be judged against a guessed time or zone.
 */
export function evaluateCondition(condition: Condition, record: unknown, context?: ConditionContext, depth = 0): boolean {
  if (depth > MAX_DEPTH) return false;
  if ('all' in condition) return condition.all.every((c) => evaluateCondition(c, record, context, depth + 1));
  if ('any' in condition) return condition.any.some((c) => evaluateCondition(c, record, context, depth + 1));
  if ('not' in condition) return !evaluateCondition(condition.not, record, context, depth + 1);
  if ('timeOfDay' in condition || 'dayOfWeek' in condition) return timeTestHolds(condition, context);
  return testHolds(condition, record);
}

const VALUELESS = new Set<ConditionOperator>(['exists', 'not_exists']);
const TEXTUAL = new Set<ConditionOperator>(['contains', 'not_contains', 'starts_with', 'ends_with']);
const ORDERED = new Set<ConditionOperator>(['gt', 'gte', 'lt', 'lte']);

// ------------------------------------------------------------------ tests on the event's time

const HHMM = /^([01]\d|2[0-3]):([0-5]\d)$/;
const minutesOf = (hhmm: string) => Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3, 5));
const WEEKDAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const formatters = new Map<string, Intl.DateTimeFormat>();

/** The local minute of the day and day of the week (0 = Sunday) of an instant in a time zone. */
export function localTime(at: Date, timezone: string | null): { minute: number; day: number } {
  const zone = timezone ?? 'UTC';
  let format = formatters.get(zone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', { timeZone: zone, hourCycle: 'h23', hour: '2-digit', minute: '2-digit', weekday: 'short' });
    formatters.set(zone, format);
  }
  const parts = Object.fromEntries(format.formatToParts(at).map((p) => [p.type, p.value]));
  return { minute: Number(parts.hour) * 60 + Number(parts.minute), day: WEEKDAYS.indexOf(parts.weekday ?? '') };
}

function timeTestHolds(test: TimeOfDayTest | DayOfWeekTest, context: ConditionContext | undefined): boolean {
  if (!context) throw new Error('A time condition (timeOfDay, dayOfWeek) needs the time of the event and the time zone');
  const local = localTime(context.at, context.timezone);
  if ('dayOfWeek' in test) return test.dayOfWeek.includes(local.day);
  const from = minutesOf(test.timeOfDay.from);
  const to = minutesOf(test.timeOfDay.to);
  if (from < to) return local.minute >= from && local.minute < to;
  return local.minute >= from || local.minute < to; // wraps past midnight; `to` 00:00 is midnight
}

function timeTestIssues(value: Record<string, unknown>, at: string): string[] {
  if (Object.keys(value).length !== 1) return [`${at}: "${'timeOfDay' in value ? 'timeOfDay' : 'dayOfWeek'}" must be the only key of its object`];
  if ('dayOfWeek' in value) {
    const days = value.dayOfWeek;
    if (!Array.isArray(days) || days.length === 0 || days.length > 7 || !days.every((d) => Number.isInteger(d) && d >= 0 && d <= 6) || new Set(days).size !== days.length) {
      return [`${at}.dayOfWeek: must be a non-empty array of distinct days, 0 (Sunday) to 6 (Saturday)`];
    }
    return [];
  }
  const range = value.timeOfDay;
  if (!isRecord(range) || Object.keys(range).some((k) => k !== 'from' && k !== 'to')) return [`${at}.timeOfDay: must be {from: "HH:MM", to: "HH:MM"}`];
  const issues: string[] = [];
  for (const key of ['from', 'to'] as const) if (typeof range[key] !== 'string' || !HHMM.test(range[key])) issues.push(`${at}.timeOfDay.${key}: must be a time "HH:MM" on a 24-hour clock`);
  if (issues.length === 0 && range.from === range.to) issues.push(`${at}.timeOfDay: "from" and "to" must differ`);
  return issues;
}

/** What is wrong with a value meant as a Condition; an empty array means it is valid. */
export function conditionIssues(value: unknown, at = 'condition', depth = 0): string[] {
  if (depth > MAX_DEPTH) return [`${at}: nested deeper than ${MAX_DEPTH} levels`];
  if (!isRecord(value)) return [`${at}: must be an object: a test {field, operator, value}, {timeOfDay: {from, to}}, {dayOfWeek: [...]}, or {all: [...]}, {any: [...]}, {not: {...}}`];
  const keys = Object.keys(value);
  for (const group of ['all', 'any'] as const) {
    if (!(group in value)) continue;
    if (keys.length !== 1) return [`${at}: "${group}" must be the only key of its object`];
    const list = value[group];
    if (!Array.isArray(list) || list.length === 0) return [`${at}.${group}: must be a non-empty array of conditions`];
    return list.flatMap((c, i) => conditionIssues(c, `${at}.${group}[${i}]`, depth + 1));
  }
  if ('not' in value) {
    if (keys.length !== 1) return [`${at}: "not" must be the only key of its object`];
    return conditionIssues(value.not, `${at}.not`, depth + 1);
  }
  if ('timeOfDay' in value || 'dayOfWeek' in value) return timeTestIssues(value, at);
  const issues: string[] = [];
  const unknown = keys.filter((k) => k !== 'field' && k !== 'operator' && k !== 'value');
  if (unknown.length) issues.push(`${at}: unknown key(s) ${unknown.map((k) => `"${k}"`).join(', ')}`);
  const { field, operator } = value;
  if (typeof field !== 'string' || !/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/.test(field)) issues.push(`${at}.field: must be a dotted path such as "sender" or "metadata.source"`);
  if (typeof operator !== 'string' || !(CONDITION_OPERATORS as readonly string[]).includes(operator)) {
    issues.push(`${at}.operator: must be one of ${CONDITION_OPERATORS.join(', ')}`);
    return issues;
  }
  const op = operator as ConditionOperator;
  const has = 'value' in value && value.value !== undefined;
  const v = value.value;
  if (field === SENDER_VERIFIED && !((op === 'equals' || op === 'not_equals') && typeof v === 'boolean')) {
    return [...issues, `${at}: "${SENDER_VERIFIED}" is true or false: {"field": "${SENDER_VERIFIED}", "operator": "equals", "value": true} requires a sender whose domain passed DMARC`];
  }
  if (VALUELESS.has(op)) {
    if (has) issues.push(`${at}.value: "${op}" takes no value`);
  } else if (!has) issues.push(`${at}.value: "${op}" needs a value`);
  else if (op === 'in') {
    if (!Array.isArray(v) || v.length === 0) issues.push(`${at}.value: "in" needs a non-empty array of values`);
  } else if (TEXTUAL.has(op)) {
    if (!(typeof v === 'string' && v !== '') && typeof v !== 'number') issues.push(`${at}.value: "${op}" needs a non-empty string`);
  } else if (ORDERED.has(op)) {
    if (!(typeof v === 'number' && Number.isFinite(v)) && !(typeof v === 'string' && isDateString(v))) issues.push(`${at}.value: "${op}" needs a number or an ISO 8601 date`);
  }
  return issues;
}
