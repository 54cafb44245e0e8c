import { CronExpressionParser } from 'cron-parser';
import { partyOf, valueAtPath } from './condition.js';

/**
 * Templates in the string values of a plan step's input: `{{expression}}`.
 *
 * - `event.id`, `event.type`, `event.resourceId`, `event.occurredAt`, `event.data`, `event.data.<path>`
 * - `now`; `now+<n><unit>` / `now-<n><unit>` with unit m, h, d or w (`now+2h`, `now+30m`): ISO 8601 UTC
 * - `next(<5-field cron>)`: the next time after now matching the cron, read in the automation's time zone (UTC when none)
 * - `lastRunAt`: when the last successful run finished; before the first run, 24 hours before now
 * - `steps.<n>`, `steps.<n>.<path>`: the record an earlier step (0-based) answered with
 * - `sender.address`, `sender.name`: taken from the event's `data.sender` as conditions read it;
 *   `sender.phoneNumber`: its phone number (a text's sender), missing when it has none
 * - `digest`: a text summary of the messages recorded since the last run (computed by the engine);
 *   `digest.unread`: of the incoming messages not read yet, `digest.unreadEmails`: of the emails not read yet
 * - `mailChannel`: the id of an email channel of the organization that can send (an active one with a relay,
 *   other than the channel of a `channel.*` event when there is another; computed by the engine), for notices
 *
 * A string that is exactly one template takes the value's own type (an object, a number, null when the
 * value is missing); elsewhere templates are replaced by text (empty for a missing value).
 */

export interface TemplateContext {
  event: { id: string; type: string; resourceId: string | null; occurredAt: string; data: unknown } | null;
  now: Date;
  lastRunAt: Date | null;
  /** What the earlier steps answered with (their `data`). */
  steps: unknown[];
  timezone: string | null;
  digest?: string;
  /** `{{digest.unread}}`, `{{digest.unreadEmails}}`: computed by the engine when the plan uses them. */
  unreadDigest?: Partial<Record<UnreadDigest, string>>;
  /** `{{mailChannel}}`: computed by the engine when the plan uses it (null when the organization has none). */
  mailChannel?: string | null;
}

/** When there was no run yet, `lastRunAt` is this long before now. */
export const FIRST_RUN_LOOKBACK_MS = 24 * 3600_000;

// `[^{}]*` (not `\s*(.*?)\s*`): linear on any text; the expression is trimmed after the match.
const TEMPLATE = /\{\{([^{}]*)\}\}/g;
const WHOLE = /^\{\{([^{}]*)\}\}$/;
const UNIT_MS = { m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 } as const;
const PATH = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;

type Parsed =
  | { kind: 'event'; path: string[] }
  | { kind: 'now'; offsetMs: number }
  | { kind: 'next'; cron: string }
  | { kind: 'lastRunAt' }
  | { kind: 'step'; index: number; path: string[] }
  | { kind: 'sender'; part: 'address' | 'name' | 'phoneNumber' }
  | { kind: 'digest' }
  | { kind: 'unreadDigest'; which: UnreadDigest }
  | { kind: 'mailChannel' };

/** Parses one expression (the text between the braces); a string says why it is not one. */
export function parseExpression(expr: string): Parsed | string {
  if (expr === 'now') return { kind: 'now', offsetMs: 0 };
  const rel = /^now\s*([+-])\s*(\d{1,6})\s*([mhdw])$/.exec(expr);
  if (rel) return { kind: 'now', offsetMs: (rel[1] === '-' ? -1 : 1) * Number(rel[2]) * UNIT_MS[rel[3] as keyof typeof UNIT_MS] };
  const next = /^next\((.*)\)$/.exec(expr);
  if (next) {
    const cron = next[1]!.trim();
    if (cron.split(/\s+/).length !== 5) return `next(…) needs a 5-field cron expression, e.g. next(0 9 * * 1)`;
    try {
      CronExpressionParser.parse(cron);
    } catch {
      return `"${cron}" is not a valid cron expression`;
    }
    return { kind: 'next', cron };
  }
  if (expr === 'lastRunAt') return { kind: 'lastRunAt' };
  if (expr === 'digest') return { kind: 'digest' };
  if (expr === 'digest.unread') return { kind: 'unreadDigest', which: 'unread' };
  if (expr === 'digest.unreadEmails') return { kind: 'unreadDigest', which: 'unreadEmails' };
  if (expr === 'mailChannel') return { kind: 'mailChannel' };
  if (expr === 'sender.address' || expr === 'sender.name' || expr === 'sender.phoneNumber') return { kind: 'sender', part: expr.slice('sender.'.length) as 'address' | 'name' | 'phoneNumber' };
  if (PATH.test(expr)) {
    const path = expr.split('.');
    if (path[0] === 'event') {
      if (path.length === 2 && ['id', 'type', 'resourceId', 'occurredAt', 'data'].includes(path[1]!)) return { kind: 'event', path: path.slice(1) };
      if (path.length > 2 && path[1] === 'data') return { kind: 'event', path: path.slice(1) };
    }
    if (path[0] === 'steps' && path.length >= 2 && /^\d{1,3}$/.test(path[1]!)) return { kind: 'step', index: Number(path[1]), path: path.slice(2) };
  }
  return `unknown template expression "{{${expr}}}"`;
}

const lastRun = (ctx: TemplateContext) => ctx.lastRunAt ?? new Date(ctx.now.getTime() - FIRST_RUN_LOOKBACK_MS);

function evaluate(parsed: Parsed, ctx: TemplateContext): unknown {
  switch (parsed.kind) {
    case 'event':
      return ctx.event ? valueAtPath(ctx.event, parsed.path) : undefined;
    case 'now':
      return new Date(ctx.now.getTime() + parsed.offsetMs).toISOString();
    case 'next':
      return CronExpressionParser.parse(parsed.cron, { currentDate: ctx.now, tz: ctx.timezone ?? 'UTC' }).next().toISOString();
    case 'lastRunAt':
      return lastRun(ctx).toISOString();
    case 'step':
      return valueAtPath(ctx.steps[parsed.index], parsed.path);
    case 'sender': {
      const raw = ctx.event && valueAtPath(ctx.event.data, ['sender']);
      const first = Array.isArray(raw) ? raw[0] : raw;
      if (parsed.part === 'phoneNumber') return valueAtPath(first, ['phoneNumber']);
      return partyOf(first)[parsed.part];
    }
    case 'digest':
      return ctx.digest;
    case 'unreadDigest':
      return ctx.unreadDigest?.[parsed.which];
    case 'mailChannel':
      return ctx.mailChannel;
  }
}

function valueOf(expr: string, ctx: TemplateContext): unknown {
  const parsed = parseExpression(expr);
  if (typeof parsed === 'string') return undefined;
  const v = evaluate(parsed, ctx);
  return v !== null && typeof v === 'object' ? structuredClone(v) : v;
}

const asText = (v: unknown) => (v === undefined || v === null ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v));

function renderString(s: string, ctx: TemplateContext, keep?: (expr: string) => boolean): unknown {
  const whole = WHOLE.exec(s);
  if (whole && !keep?.(whole[1]!.trim())) return valueOf(whole[1]!.trim(), ctx) ?? null;
  return s.replace(TEMPLATE, (written, expr: string) => (keep?.(expr.trim()) ? written : asText(valueOf(expr.trim(), ctx))));
}

/**
 * The value with every template of its strings replaced (deeply; keys are left alone). Expressions `keep`
 * holds stay as written (the plan check leaves the values known only at run time unjudged).
 */
export function renderTemplates(value: unknown, ctx: TemplateContext, keep?: (expr: string) => boolean): unknown {
  if (typeof value === 'string') return renderString(value, ctx, keep);
  if (Array.isArray(value)) return value.map((v) => renderTemplates(v, ctx, keep));
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, renderTemplates(v, ctx, keep)]));
  return value;
}

/** Every template expression in the value, with the dotted path of the string that holds it. */
export function templateExpressions(value: unknown, at = ''): { at: string; expr: string }[] {
  if (typeof value === 'string') return [...value.matchAll(TEMPLATE)].map((m) => ({ at, expr: m[1]!.trim() }));
  const join = (k: string | number) => (at ? `${at}.${k}` : String(k));
  if (Array.isArray(value)) return value.flatMap((v, i) => templateExpressions(v, join(i)));
  if (value !== null && typeof value === 'object') return Object.entries(value).flatMap(([k, v]) => templateExpressions(v, join(k)));
  return [];
}

/** Unknown or malformed template expressions in the value (empty when all are known). */
export function templateIssues(value: unknown): string[] {
  return templateExpressions(value).flatMap(({ at, expr }) => {
    const parsed = parseExpression(expr);
    return typeof parsed === 'string' ? [`${at || 'value'}: ${parsed}`] : [];
  });
}

/** Whether the value uses `{{digest}}` (the engine computes the digest only then). */
export function usesDigest(value: unknown): boolean {
  return templateExpressions(value).some(({ expr }) => expr === 'digest');
}

/** The unread messages a digest lists: the incoming ones, or only the emails. */
export type UnreadDigest = 'unread' | 'unreadEmails';

/** The unread digests the value uses (`{{digest.unread}}`, `{{digest.unreadEmails}}`): the engine computes those only. */
export function unreadDigestsIn(value: unknown): UnreadDigest[] {
  const found = templateExpressions(value).map(({ expr }) => parseExpression(expr));
  return [...new Set(found.flatMap((p) => (typeof p === 'object' && p.kind === 'unreadDigest' ? [p.which] : [])))];
}

/** Whether the value uses `{{mailChannel}}` (the engine looks the channel up only then). */
export function usesMailChannel(value: unknown): boolean {
  return templateExpressions(value).some(({ expr }) => expr === 'mailChannel');
}
