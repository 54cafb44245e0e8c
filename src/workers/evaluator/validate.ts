import type { z } from 'zod';
import { AppError } from '../../core/errors.js';
import { operationCategory, operationPermission, parseInput, type Operation } from '../../core/operation.js';
import { hasPermission } from '../../core/permissions.js';
import { operationById, operations } from '../../operations.js';
import { isEventType, SCHEDULE_TRIGGER } from '../../modules/events/events.catalog.js';
import { isValidCron } from '../../modules/automations/automations.schemas.js';
import { conditionIssues } from '../../modules/automations/condition.js';
import { triggerEventTypes, type Plan } from '../../modules/automations/plan.js';
import { parseExpression, renderTemplates, templateExpressions, templateIssues, type TemplateContext } from '../../modules/automations/template.js';
import { sendSchemas } from '../../modules/channels/kinds.js';
import { canonicalTimeZone } from './vocabulary.js';

/** Areas whose operations a plan may not call: automations may not manage automations, events are read-only. */
export const FORBIDDEN_STEP_AREAS = new Set(['automations', 'events']);
export const MAX_STEPS = 20;


/** The operations a plan may call: the writes outside the forbidden areas. */
export const plannableOperations = (): Operation[] => operations.filter((op) => op.method !== 'GET' && !FORBIDDEN_STEP_AREAS.has(operationCategory(op)));

const SAMPLE_ID = '6f1c2b9e-8d4a-4c3e-9b7a-2e5f1d0c3a4b';
const SAMPLE_NOW = new Date('2030-01-07T08:00:00.000Z');

function sampleContext(plan: Plan, steps: number): TemplateContext {
  return {
    // Its record (`event.data`, the sender) is known only at run time: those templates stay as written.
    event: { id: SAMPLE_ID, type: plan.triggerEvent, resourceId: SAMPLE_ID, occurredAt: SAMPLE_NOW.toISOString(), data: {} },
    now: SAMPLE_NOW,
    lastRunAt: null,
    steps: Array.from({ length: steps }, () => ({ id: SAMPLE_ID })),
    timezone: plan.timezone && canonicalTimeZone(plan.timezone) ? plan.timezone : null,
    digest: 'Sample digest',
    unreadDigest: { unread: 'Sample digest', unreadEmails: 'Sample digest' },
    mailChannel: SAMPLE_ID,
  };
}

/**
 * Expressions whose value is only known at run time (the event's record, what earlier steps answered
 * besides their id, the sender): the schema cannot judge them before the run.
 */
function runtimeOnly(expr: string): boolean {
  const parsed = parseExpression(expr);
  if (typeof parsed === 'string') return false;
  if (parsed.kind === 'event') return parsed.path[0] === 'data';
  if (parsed.kind === 'step') return !(parsed.path.length === 1 && parsed.path[0] === 'id');
  return parsed.kind === 'sender';
}

/**
 * Issues the operation's schema finds in the rendered input, except under values known only at run time.
 * Those stay as written (`{{sender.phoneNumber}}`) rather than take a sample's value, so that no sample
 * decides what the input is: a send whose `to` is a template is a text or an email by the rest of its
 * input (a subject, an address), as it will be at run time.
 */
function inputIssues(op: Operation, input: Record<string, unknown>, ctx: TemplateContext): string[] {
  const rendered = renderTemplates(input, ctx, runtimeOnly);
  if (op.id === 'messages.send') return sendIssues(input, rendered);
  try {
    parseInput(op, rendered);
    return [];
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
  }
  const skipped = templateExpressions(input)
    .filter(({ expr }) => runtimeOnly(expr))
    .map(({ at }) => at);
  const parsed = op.input.safeParse(rendered);
  if (parsed.success) return ['holds text the service refuses (NUL characters, lone surrogates or too deep nesting)'];
  return parsed.error.issues
    .filter((issue) => {
      const at = issue.path.join('.');
      return !skipped.some((s) => at === s || at.startsWith(`${s}.`));
    })
    .map((issue) => `${issue.path.length ? issue.path.join('.') : '(input)'}: ${issue.message}`);
}

/** A schema's issues with the input, except under values known only at run time. */
function issuesOf(schema: z.ZodType, input: Record<string, unknown>, rendered: unknown): z.core.$ZodIssue[] {
  const parsed = schema.safeParse(rendered);
  if (parsed.success) return [];
  const skipped = templateExpressions(input)
    .filter(({ expr }) => runtimeOnly(expr))
    .map(({ at }) => at);
  return parsed.error.issues.filter((issue) => {
    const at = issue.path.join('.');
    return !skipped.some((x) => at === x || at.startsWith(`${x}.`));
  });
}

/**
 * `messages.send` in a plan: its channel (and so its kind) is often known only at run time (a template, or
 * the organization's default), and each kind checks the send by its own shape. The plan is judged by the
 * kind it fits best: a kind's shape that takes it as it is wins; otherwise the kinds whose shape takes its
 * written recipients and misses none of its required fields (an email without a subject is rather a text
 * than an email; a send to ada@example.com is an email), and of those the first, with its issues.
 */
function sendIssues(input: Record<string, unknown>, rendered: unknown): string[] {
  const judged = sendSchemas().map((schema) => issuesOf(schema, input, rendered));
  if (judged.some((issues) => issues.length === 0)) return [];
  const missing = (issue: z.core.$ZodIssue) => issue.code === 'invalid_type' && issue.input === undefined;
  const fits = (issues: z.core.$ZodIssue[]) => !issues.some((i) => i.path[0] === 'to');
  const best = judged.find((issues) => fits(issues) && !issues.some(missing)) ?? judged.find(fits) ?? judged[0]!;
  return best.map((issue) => `${issue.path.length ? issue.path.join('.') : '(input)'}: ${issue.message}`);
}

/** What makes the plan unusable (`code_generation_failed`); an empty array means it can be stored and run. */
export function validatePlan(plan: Plan, opts: { creatorPermissions: readonly string[] }): string[] {
  const issues: string[] = [];
  if (plan.triggerType === 'scheduled') {
    if (plan.triggerEvent !== SCHEDULE_TRIGGER) issues.push(`A scheduled plan triggers on "${SCHEDULE_TRIGGER}", not "${plan.triggerEvent}"`);
    if (!plan.cronExpression || !isValidCron(plan.cronExpression)) issues.push(`"${plan.cronExpression ?? ''}" is not a valid cron expression (5 fields: minute hour day-of-month month day-of-week)`);
  } else if (plan.triggerType === 'event') {
    const types = triggerEventTypes(plan.triggerEvent);
    for (const type of types) if (!isEventType(type)) issues.push(`"${type}" is not an event type of the catalog`);
    if (new Set(types).size !== types.length) issues.push(`"${plan.triggerEvent}" names an event type twice`);
    if (plan.cronExpression !== null) issues.push('An event-triggered plan has no cronExpression');
  } else issues.push(`triggerType must be "event" or "scheduled"`);
  if (plan.timezone !== null && !canonicalTimeZone(plan.timezone)) issues.push(`"${plan.timezone}" is not an IANA time zone`);
  if (plan.condition !== null) issues.push(...conditionIssues(plan.condition));

  if (!Array.isArray(plan.actions) || plan.actions.length === 0) issues.push('The plan has no actions');
  else if (plan.actions.length > MAX_STEPS) issues.push(`The plan has more than ${MAX_STEPS} steps`);
  else {
    const ctx = sampleContext(plan, plan.actions.length);
    plan.actions.forEach((step, i) => {
      const at = `Step ${i + 1} (${step.operation})`;
      const op = operationById(step.operation);
      if (!op) return void issues.push(`${at}: unknown operation "${step.operation}"`);
      if (op.method === 'GET') return void issues.push(`${at}: only writes are plan steps; reads are not`);
      if (FORBIDDEN_STEP_AREAS.has(operationCategory(op))) return void issues.push(`${at}: operations of the "${operationCategory(op)}" area are not allowed in plans`);
      const needed = operationPermission(op);
      if (!hasPermission(opts.creatorPermissions, needed)) issues.push(`${at}: the creator lacks the "${needed}" permission`);
      if (step.input === null || typeof step.input !== 'object' || Array.isArray(step.input)) return void issues.push(`${at}: input must be an object`);
      const templates = templateIssues(step.input);
      issues.push(...templates.map((t) => `${at}: ${t}`));
      for (const { expr } of templateExpressions(step.input)) {
        const parsed = parseExpression(expr);
        if (typeof parsed !== 'string' && parsed.kind === 'step' && parsed.index >= i) issues.push(`${at}: "{{${expr}}}" refers to a step that has not run yet`);
        if (typeof parsed !== 'string' && (parsed.kind === 'event' || parsed.kind === 'sender') && plan.triggerType === 'scheduled') {
          issues.push(`${at}: "{{${expr}}}" needs an event, and a scheduled plan has none`);
        }
      }
      if (templates.length === 0) issues.push(...inputIssues(op, step.input, ctx).map((t) => `${at}: input ${t}`));
    });
  }

  const stepOps = [...new Set((plan.actions ?? []).map((s) => s.operation))].sort();
  const allowed = Array.isArray(plan.permissions?.operations) ? [...plan.permissions.operations].sort() : null;
  if (!allowed || allowed.length !== stepOps.length || allowed.some((op, i) => op !== stepOps[i])) {
    issues.push(`permissions.operations must list exactly the operations of the steps (${stepOps.join(', ') || 'none'})`);
  }
  return issues;
}
