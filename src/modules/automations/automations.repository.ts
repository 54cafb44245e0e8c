import { isDeepStrictEqual } from 'node:util';
import { and, desc, eq, gt, inArray, isNull, lte, sql } from 'drizzle-orm';
import type { z } from 'zod';
import { debitCredits } from '../../accounts/accounts.js';
import { credentialOf, missingPermissions, type Credential } from '../../accounts/credentials.js';
import { isCategory } from '../../core/categories.js';
import { AppError, fieldError, notFound } from '../../core/errors.js';
import { SEND_PERMISSION, type Permission } from '../../core/permissions.js';
import { sendsMessages, type OperationContext } from '../../core/operation.js';
import type { Page, PageInput } from '../../core/pagination.js';
import { toDate } from '../../core/schemas.js';
import type { DbOrTx } from '../../db/client.js';
import { automationExecutions, automations, events, messages } from '../../db/schema.js';
import { definedOnly, listPage, live, scopedRepository } from '../../db/scoped.js';
import { assertClientTransition, NOT_EVALUATED, type AutomationStatus } from './automations.lifecycle.js';
import { activatesDirectly, approvalUrl, whoIs, type Who } from './approvals.js';
import { eventReadPermission, SCHEDULE_TRIGGER } from '../events/events.catalog.js';
import { evaluateCondition } from './condition.js';
import { readsThread, threadsOfEvents, withThread } from './thread-context.js';
import { triggerEventTypes, type Condition, type PlanStep } from './plan.js';
import { renderTemplates, unreadDigestsIn, usesDigest, usesMailChannel, type TemplateContext, type UnreadDigest } from './template.js';
import { noticeChannelOf } from '../channels/email/email.channels.js';
import { channelKinds } from '../channels/kinds.js';
import {
  DEFAULT_STATUS,
  PLACEHOLDER_TRIGGER_EVENT,
  type AutomationCreateInput,
  type AutomationUpdateInput,
  type TriggerType,
} from './automations.schemas.js';

export const automationRows = scopedRepository(automations, 'Automation');

export type AutomationRow = typeof automations.$inferSelect;
type CreateInput = z.output<typeof AutomationCreateInput>;
type UpdateInput = Omit<z.output<typeof AutomationUpdateInput>, 'id'>;

/** Credits one evaluation of the instructions costs (at create, and again for each re-evaluation). */
export const EVALUATION_COST = 1;

/** Automations an organization may have (deleted ones do not count), like its webhook endpoints. */
export const MAX_AUTOMATIONS_PER_ORGANIZATION = 100;

/** The fields that say what an automation does or when it fires: changing one sends it back to approval. */
const PLAN_FIELDS = ['condition', 'triggerEvent', 'triggerType', 'cronExpression', 'actions'] as const;

/** The response: the public columns; `triggerType` (the spec keeps it out) and the engine's bookkeeping stay inside. */
export function toAutomation(row: AutomationRow) {
  const {
    triggerType: _type,
    creatorPermissions: _creator,
    evaluateAfter: _evaluateAfter,
    evaluationAttempts: _attempts,
    consecutiveFailures: _failures,
    explicitTrigger: _explicit,
    actsForType,
    actsForId,
    actsForGrantId,
    actsForPasswordStamp: _stamp,
    createdVia: _createdVia,
    approvalRequestedBy: _requestedBy,
    approvalRequestedAt: _requestedAt,
    ...rest
  } = row;
  const actsFor = actsForType && actsForId ? { type: actsForType as 'api_key' | 'user', id: actsForId, grantId: actsForGrantId } : null;
  return { ...rest, permissions: rest.permissions ?? {}, actsFor, approvedBy: rest.approvedBy as Who | null };
}

/** The columns that record the credential an automation acts for. */
export const actsForColumns = (cred: Credential | null) => ({
  actsForType: cred?.type ?? null,
  actsForId: cred?.id ?? null,
  actsForGrantId: cred?.grantId ?? null,
  actsForPasswordStamp: cred?.passwordStamp ?? null,
});

/** The credential recorded on an automation, or null (an automation that predates the record). */
export const recordedCredential = (row: AutomationRow): Credential | null =>
  row.actsForType && row.actsForId
    ? { type: row.actsForType as Credential['type'], id: row.actsForId, grantId: row.actsForGrantId, passwordStamp: row.actsForPasswordStamp }
    : null;

/**
 * The permissions the steps of a plan use. Every step is a write (the plan check refuses reads), so an
 * operation `<area>.<action>` needs `<area>:write`; the plan's `permissions.operations` count as well. A
 * plan that sends (a send, reply or forward step) needs the sending consent too (`messages:send`), unless
 * `consents` is false (a dry run sends nothing).
 */
export function planPermissions(row: Pick<AutomationRow, 'actions' | 'permissions'>, consents = true): Permission[] {
  const ops = [...((row.actions ?? []) as PlanStep[]).map((s) => s.operation)];
  const listed = ((row.permissions ?? {}) as { operations?: unknown }).operations;
  if (Array.isArray(listed)) ops.push(...listed.filter((o): o is string => typeof o === 'string'));
  const areas = [...new Set(ops.map((op) => op.slice(0, op.indexOf('.'))))].filter(isCategory).sort();
  const sends = consents && ops.some(sendsMessages);
  return [...areas.map((area) => `${area}:write` as Permission), ...(sends ? [SEND_PERMISSION as Permission] : [])];
}

/** A permission as a person knows it: the sending consent by its label on the consent page. */
export const permissionLabel = (p: string) => (p === SEND_PERMISSION ? `"${p}" (the consent "Send email and text messages on your behalf")` : `"${p}"`);

/** 403 naming the permissions of the plan the caller lacks (approve, resume, preview). */
function assertHoldsPlan(ctx: OperationContext, row: AutomationRow, action: string, consents = true) {
  const missing = missingPermissions(ctx.permissions, planPermissions(row, consents));
  if (missing.length) {
    throw new AppError('FORBIDDEN', `To ${action} this automation the caller must hold every permission its plan uses; missing: ${missing.map(permissionLabel).join(', ')}`);
  }
}

/** An automation can become active: it has a plan, and `expiresAt` is null or in the future. */
function assertActivatable(row: AutomationRow) {
  if (!row.actions) throw fieldError('status', 'The automation has no plan yet: it becomes "active" once evaluation has built one');
  if (row.expiresAt && row.expiresAt.getTime() <= Date.now()) throw fieldError('status', 'The automation has expired (expiresAt is past); set expiresAt to null or a future time first');
}

/** The record of a caller (an OAuth token) asking for the automation to become active: who, and when. */
async function approvalAsked(ctx: OperationContext) {
  return { approvalRequestedBy: (await whoIs(ctx.db, ctx.actor)) as never, approvalRequestedAt: sql`now()` as never };
}

/**
 * Wording that describes a time-based schedule ("every Monday", "daily", "at 9am"): a first guess of
 * `triggerType` for a create that gives none. Evaluation settles it.
 */
const SCHEDULE_WORDING = [
  /\b(every|each)\s+(other\s+|\d+\s+)?(second|minute|hour|day|week|fortnight|month|quarter|year|morning|afternoon|evening|night|weekday|weekend|monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?\b/i,
  /\b(hourly|daily|nightly|weekly|fortnightly|monthly|quarterly|yearly|annually)\b/i,
  /\bat\s+(\d{1,2}(:\d{2})?\s*(am|pm)|\d{1,2}:\d{2}|noon|midnight)\b/i,
  /\b(cron|on a schedule)\b/i,
];

export const describesSchedule = (instructions: string) => SCHEDULE_WORDING.some((re) => re.test(instructions));

const ONLY_SCHEDULED_TAKE_CRON = 'Only scheduled automations take a cronExpression; send triggerType "scheduled" or leave triggerType out';

type TriggerFields = Pick<CreateInput, 'triggerType' | 'triggerEvent' | 'cronExpression' | 'condition' | 'actions'>;

/**
 * The plan fields a client has set himself, after this request: evaluation keeps them, null forgets one.
 * `actions` given by a person replace evaluation altogether (the plan is checked, not evaluated).
 */
function explicitTrigger(before: Record<string, unknown>, sent: Partial<TriggerFields>): Record<string, unknown> {
  const out = { ...before };
  for (const key of PLAN_FIELDS) {
    if (sent[key] === null) delete out[key];
    else if (sent[key] !== undefined) out[key] = sent[key];
  }
  if (out.triggerType === 'event') delete out.cronExpression;
  return out;
}

/** What evaluation has to do for an automation in this status: evaluate now, or nothing (drafts and archived ones). */
const evaluationFor = (status: AutomationStatus) => (NOT_EVALUATED.includes(status) ? null : sql`now()`);

/** 400 past the organization's number of automations. Runs after the create's credit debit, which locks the organization's row: concurrent creates count one after the other. */
async function assertRoomForAutomation(db: DbOrTx, orgId: string) {
  const [existing] = await db
    .select({ n: sql<number>`count(*)::int` })
    .from(automations)
    .where(and(eq(automations.organizationId, orgId), isNull(automations.deletedAt)));
  if (Number(existing?.n ?? 0) >= MAX_AUTOMATIONS_PER_ORGANIZATION) {
    throw new AppError('VALIDATION_ERROR', `An organization may have at most ${MAX_AUTOMATIONS_PER_ORGANIZATION} automations; delete one first`);
  }
}

export async function createAutomation(ctx: OperationContext, input: CreateInput) {
  await assertRoomForAutomation(ctx.db, ctx.orgId);
  const cron = input.cronExpression ?? null;
  if (input.triggerType === 'event' && cron !== null) throw fieldError('cronExpression', ONLY_SCHEDULED_TAKE_CRON);
  const written = input.actions ?? null;
  const triggerType: TriggerType =
    input.triggerType ?? (cron !== null || (written === null && describesSchedule(input.instructions)) ? 'scheduled' : 'event');
  if (written !== null) {
    if (triggerType === 'scheduled' && cron === null) throw fieldError('cronExpression', 'Required with `actions` when triggerType is "scheduled"');
    if (triggerType === 'event' && input.triggerEvent === undefined) {
      throw fieldError('triggerEvent', 'Required with `actions`: the event that runs the plan (or give cronExpression for a schedule)');
    }
  }
  // Created "active" through an OAuth token, it is evaluated like any other and then waits for a person.
  const asks = input.status === 'active' && !activatesDirectly(ctx.actor);
  const status = asks ? DEFAULT_STATUS : (input.status ?? DEFAULT_STATUS);
  const row = await automationRows.insert(ctx.db, {
    ...input,
    actions: written as never,
    triggerType,
    cronExpression: cron,
    triggerEvent: input.triggerEvent ?? (written !== null && triggerType === 'scheduled' ? SCHEDULE_TRIGGER : PLACEHOLDER_TRIGGER_EVENT),
    expiresAt: toDate(input.expiresAt),
    status,
    permissions: {},
    organizationId: ctx.orgId,
    createdBy: ctx.actorId,
    creatorPermissions: [...ctx.permissions],
    ...actsForColumns(await credentialOf(ctx.db, ctx.actor)),
    createdVia: (await whoIs(ctx.db, ctx.actor)) as never,
    ...(asks ? await approvalAsked(ctx) : {}),
    explicitTrigger: explicitTrigger({}, input),
    evaluateAfter: evaluationFor(status) as never,
  });
  return asks ? { ...toAutomation(row), approvalUrl: approvalUrl(ctx, row.id) } : toAutomation(row);
}

export async function getAutomation(db: DbOrTx, orgId: string, id: string) {
  return toAutomation(await automationRows.get(db, orgId, id));
}

export async function listAutomations(db: DbOrTx, orgId: string, page: PageInput): Promise<Page<ReturnType<typeof toAutomation>>> {
  const { items } = await automationRows.list(db, orgId, page);
  return { items: items.map(toAutomation) };
}

async function lockAutomation(db: DbOrTx, orgId: string, id: string): Promise<AutomationRow> {
  const [row] = await db.select().from(automations).where(live(automations, orgId, eq(automations.id, id))).for('update');
  if (!row) throw notFound('Automation');
  return row;
}

/** What a request changes about the plan: new instructions, other plan fields (condition, trigger, steps), or nothing. */
interface PlanChange {
  instructions: boolean;
  plan: boolean;
  /** `actions` after the request (the steps a person wrote, or the evaluated ones kept). */
  actions: unknown;
  /** Whether the plan's steps are a person's (then the instructions are not evaluated). */
  written: boolean;
}

const NO_CHANGE: PlanChange = { instructions: false, plan: false, actions: null, written: false };

/**
 * The changes a move to `to` brings besides the status. A move to (or a change while in)
 * `pending_evaluation` queues an evaluation, or only a check of the plan when its steps are kept (written by
 * a person, or only the trigger or condition changed); it records the caller as the one the plan is checked
 * against and acts for. Evaluating the instructions costs `EVALUATION_COST`. A move to `active` needs a plan,
 * an `expiresAt` that is null or in the future, and a caller holding every permission the plan uses, who
 * becomes the one it acts for; it resets the failure count.
 */
async function transitionChanges(ctx: OperationContext, row: AutomationRow, to: AutomationStatus, change: PlanChange) {
  const from = row.status as AutomationStatus;
  const changes: Partial<typeof automations.$inferInsert> = {};
  if (to === 'pending_evaluation' && (from !== to || change.instructions || change.plan)) {
    // A bare request to evaluate again drops evaluated steps; new instructions drop them too unless a person wrote them.
    const keepSteps = change.written || (change.plan && !change.instructions);
    const evaluatesInstructions = !keepSteps || change.actions === null;
    if (change.instructions || (evaluatesInstructions && from !== to)) await debitCredits(ctx.db, ctx.orgId, EVALUATION_COST);
    Object.assign(changes, {
      evaluateAfter: sql`now()`,
      evaluationAttempts: 0,
      statusReason: null,
      planSummary: null,
      creatorPermissions: [...ctx.permissions],
      ...actsForColumns(await credentialOf(ctx.db, ctx.actor)),
      ...(keepSteps ? {} : { actions: null }),
    });
  }
  if (to === 'active' && from !== 'active') {
    assertActivatable(row);
    assertHoldsPlan(ctx, row, from === 'pending_approval' ? 'approve' : 'resume');
    // The app that asked for it (or created it) is named beside whoever gave the word.
    const who = await whoIs(ctx.db, ctx.actor);
    const asked = ((row.approvalRequestedBy ?? row.createdVia) as Who | null)?.client;
    const approvedBy = who && asked ? { ...who, client: asked } : who;
    Object.assign(changes, {
      consecutiveFailures: 0,
      statusReason: null,
      nextRunAt: null,
      ...actsForColumns(await credentialOf(ctx.db, ctx.actor)),
      approvedBy,
      approvedAt: sql`now()`,
      approvalRequestedBy: null,
      approvalRequestedAt: null,
    });
  }
  if (to !== 'active') changes.nextRunAt = null;
  return changes;
}

/**
 * Applies the fields given. Changing what the automation does or when it fires (`instructions`,
 * `condition`, `triggerEvent`, `triggerType`, `cronExpression`, `actions`) sends it back to
 * `pending_evaluation` (new instructions are evaluated and charged like the first evaluation; otherwise
 * only the changed plan is checked, free), against the permissions of the caller, and then to approval,
 * unless the same request parks it as a draft or archives it; `status` follows the transitions table.
 * The trigger stays consistent: a scheduled automation may have a cron expression (evaluation infers one
 * from the instructions), an event automation never has one.
 */
export async function updateAutomation(ctx: OperationContext, id: string, patch: UpdateInput) {
  const row = await lockAutomation(ctx.db, ctx.orgId, id);
  const { triggerType: requestedType, expiresAt, status: requestedStatus, ...rest } = patch;
  const changes: Partial<typeof automations.$inferInsert> = { ...definedOnly(rest), ...(expiresAt !== undefined ? { expiresAt: toDate(expiresAt) } : {}) };

  if (PLAN_FIELDS.some((k) => patch[k] !== undefined)) changes.explicitTrigger = explicitTrigger(row.explicitTrigger, patch);
  const instructionsChanged = patch.instructions !== undefined && patch.instructions !== row.instructions;
  const planChanged = PLAN_FIELDS.some((k) => patch[k] !== undefined && !isDeepStrictEqual(patch[k], row[k]));
  const explicit = (changes.explicitTrigger ?? row.explicitTrigger) as { actions?: unknown };
  const change: PlanChange = {
    instructions: instructionsChanged,
    plan: planChanged,
    actions: patch.actions === undefined ? row.actions : patch.actions,
    written: explicit.actions !== undefined,
  };
  // Forgetting a written plan has the instructions evaluated again, as new instructions would.
  if (patch.actions === null && row.explicitTrigger.actions !== undefined) change.instructions = true;
  let to = (requestedStatus ?? row.status) as AutomationStatus;
  // Drafts, archived and expired automations never run: their fields change without a move.
  const parked = requestedStatus === 'draft' || requestedStatus === 'archived' || ['draft', 'archived', 'expired'].includes(row.status);
  if ((change.instructions || change.plan) && !parked) to = 'pending_evaluation';
  assertClientTransition(row.status as AutomationStatus, to);
  // An OAuth token asks a person instead: the other fields change, the status stays (CONTRACT §8). Enabling a
  // disabled automation that would then run is the same request, and waits for a person the same way.
  const activates = to === 'active' && row.status !== 'active';
  const enables = patch.enabled === true && !row.enabled && row.status === 'active' && to === 'active';
  // A longer life than the person approved (a later or no `expiresAt`, more runs left: a higher or no
  // `maxExecutions`, a lower `currentExecutions`) is a new consent too: through a token, the running
  // automation pauses until a person resumes it on the page.
  const lengthens = row.status === 'active' && to === 'active' && !activatesDirectly(ctx.actor) && lengthensLife(row, patch);
  const asks = (activates || enables || lengthens) && !activatesDirectly(ctx.actor);
  if (lengthens) {
    to = 'paused';
    Object.assign(changes, await approvalAsked(ctx));
  } else if (asks) {
    assertActivatable(row);
    to = row.status as AutomationStatus;
    if (enables) delete changes.enabled;
    Object.assign(changes, await approvalAsked(ctx));
  }
  if (requestedStatus !== undefined || to !== row.status || change.instructions || change.plan) {
    Object.assign(changes, { status: to }, await transitionChanges(ctx, row, to, change));
  }

  if (requestedType !== undefined || patch.cronExpression !== undefined) {
    const sentCron = typeof patch.cronExpression === 'string';
    const triggerType = requestedType ?? (sentCron ? 'scheduled' : (row.triggerType as TriggerType));
    if (triggerType === 'event' && sentCron) throw fieldError('cronExpression', ONLY_SCHEDULED_TAKE_CRON);
    const cronExpression = triggerType === 'event' ? null : patch.cronExpression === undefined ? row.cronExpression : patch.cronExpression;
    if (triggerType === 'scheduled' && cronExpression === null && !instructionsChanged) {
      throw fieldError('cronExpression', 'Required while triggerType is "scheduled" (or send new instructions that state the schedule); to make the automation event-driven send triggerType "event"');
    }
    Object.assign(changes, { triggerType, cronExpression, nextRunAt: null });
  }
  if (lengthens) changes.statusReason = 'Paused: the new expiresAt, maxExecutions or currentExecutions lengthen what a person approved (a later end or more runs left); a person resumes it';
  const updated = toAutomation(await automationRows.update(ctx.db, ctx.orgId, id, changes));
  return asks ? { ...updated, approvalUrl: approvalUrl(ctx, id) } : updated;
}

/** Runs an automation has left: `maxExecutions` − `currentExecutions`, unlimited without `maxExecutions`. */
const runsLeft = (maxExecutions: number | null, currentExecutions: number) => (maxExecutions === null ? Infinity : maxExecutions - currentExecutions);

/**
 * The patch gives the automation a later or no end, or more runs left than it has: a higher or no
 * `maxExecutions`, a lower `currentExecutions` (a reset of the count is as many runs again as a higher cap).
 */
function lengthensLife(row: AutomationRow, patch: UpdateInput): boolean {
  const later = patch.expiresAt !== undefined && row.expiresAt !== null && (patch.expiresAt === null || toDate(patch.expiresAt)!.getTime() > row.expiresAt.getTime());
  const left = runsLeft(patch.maxExecutions === undefined ? row.maxExecutions : patch.maxExecutions, patch.currentExecutions ?? row.currentExecutions);
  return later || left > runsLeft(row.maxExecutions, row.currentExecutions);
}

/** approve / pause / resume / archive: a status move checked against the transitions table. */
export async function transitionAutomation(ctx: OperationContext, id: string, from: readonly AutomationStatus[] | 'any', to: AutomationStatus) {
  const row = await lockAutomation(ctx.db, ctx.orgId, id);
  const current = row.status as AutomationStatus;
  if (from !== 'any' && !from.includes(current)) {
    throw fieldError('status', `Only an automation in status ${from.map((s) => `"${s}"`).join(' or ')} can move to "${to}"; this one is "${current}"`);
  }
  assertClientTransition(current, to);
  if (current === to) return toAutomation(row);
  if (to === 'active' && !activatesDirectly(ctx.actor)) {
    assertActivatable(row);
    const asked = await automationRows.update(ctx.db, ctx.orgId, id, await approvalAsked(ctx));
    return { ...toAutomation(asked), approvalUrl: approvalUrl(ctx, id) };
  }
  const changes = await transitionChanges(ctx, row, to, NO_CHANGE);
  return toAutomation(await automationRows.update(ctx.db, ctx.orgId, id, { ...changes, status: to }));
}

export async function deleteAutomation(db: DbOrTx, orgId: string, id: string) {
  return toAutomation(await automationRows.softDelete(db, orgId, id, undefined));
}

export type ExecutionRow = typeof automationExecutions.$inferSelect;

export function toExecution(row: ExecutionRow) {
  const { organizationId: _org, depth: _depth, createdAt: _created, originId: _origin, ...rest } = row;
  return rest;
}

/** The runs of one live automation, newest first by default. */
export async function listExecutions(db: DbOrTx, orgId: string, automationId: string, page: PageInput): Promise<Page<ReturnType<typeof toExecution>>> {
  if (!(await automationRows.exists(db, orgId, automationId))) throw notFound('Automation');
  const rows = await listPage(db, automationExecutions, and(eq(automationExecutions.organizationId, orgId), eq(automationExecutions.automationId, automationId)), page);
  return { items: rows.map(toExecution) };
}

const DIGEST_MESSAGES = 50;

/** The lines of a digest: one per message, newest first, at most DIGEST_MESSAGES (and a note when there were more). */
function digestLines(rows: { createdAt: Date; direction: string; sender: unknown; summary: string | null; text: string | null }[]) {
  const shown = rows.slice(0, DIGEST_MESSAGES);
  const lines = shown.map((m) => {
    const who = typeof m.sender === 'string' ? m.sender : m.sender && typeof m.sender === 'object' ? String((m.sender as Record<string, unknown>).email ?? (m.sender as Record<string, unknown>).name ?? '') : '';
    const what = (m.summary ?? m.text ?? '').replace(/\s+/g, ' ').slice(0, 140);
    return `- ${m.createdAt.toISOString()} ${m.direction}${who ? ` from ${who}` : ''}: ${what}`;
  });
  const more = rows.length > DIGEST_MESSAGES ? `\n(and more; the ${DIGEST_MESSAGES} newest are listed)` : '';
  return { count: `${shown.length}${rows.length > DIGEST_MESSAGES ? '+' : ''}`, text: `${lines.join('\n')}${more}` };
}

const digestColumns = { createdAt: messages.createdAt, direction: messages.direction, sender: messages.sender, summary: messages.summary, text: messages.text };

/** The `{{digest}}` of a run: the organization's messages recorded after `since`, up to `now`, newest first. */
export async function digestSince(tx: DbOrTx, orgId: string, since: Date, now: Date): Promise<string> {
  const rows = await tx
    .select(digestColumns)
    .from(messages)
    .where(and(eq(messages.organizationId, orgId), isNull(messages.deletedAt), gt(messages.createdAt, since), lte(messages.createdAt, now)))
    .orderBy(desc(messages.createdAt))
    .limit(DIGEST_MESSAGES + 1);
  if (rows.length === 0) return `No new messages since ${since.toISOString()}.`;
  const { count, text } = digestLines(rows);
  return `${count} message(s) since ${since.toISOString()}:\n${text}`;
}

/** The kinds whose messages a digest of one kind holds (`unreadEmails`: email's), from the registry. */
const digestKinds = (which: UnreadDigest) => channelKinds().flatMap((k) => (k.unreadDigest === which ? [k.type] : []));

/** `{{digest.unread}}` and `{{digest.unreadEmails}}`: the incoming messages (or emails) not read yet, newest first. */
export async function unreadDigest(tx: DbOrTx, orgId: string, which: UnreadDigest): Promise<string> {
  const what = which === 'unreadEmails' ? 'unread email(s)' : 'unread message(s)';
  const rows = await tx
    .select(digestColumns)
    .from(messages)
    .where(and(eq(messages.organizationId, orgId), isNull(messages.deletedAt), eq(messages.direction, 'incoming'), isNull(messages.readAt), which === 'unread' ? undefined : inArray(messages.type, digestKinds(which))))
    .orderBy(desc(messages.createdAt))
    .limit(DIGEST_MESSAGES + 1);
  if (rows.length === 0) return `No ${what.replace('(s)', 's')}.`;
  const { count, text } = digestLines(rows);
  return `${count} ${what}:\n${text}`;
}

/** The unread digests the actions use, computed. */
export async function unreadDigests(tx: DbOrTx, orgId: string, actions: unknown): Promise<TemplateContext['unreadDigest']> {
  const wanted = unreadDigestsIn(actions);
  return Object.fromEntries(await Promise.all(wanted.map(async (w) => [w, await unreadDigest(tx, orgId, w)] as const)));
}

/**
 * A dry run: what the plan would do for an event (by default the latest one of its trigger) now —
 * whether the condition holds and each step's input with its templates rendered. Reads only: nothing is
 * written, run or charged. The caller must hold every permission the plan uses, and may see the event's
 * record only with read permission on its area.
 */
export async function previewAutomation(ctx: OperationContext, id: string, eventId: string | undefined, now: Date) {
  const row = await automationRows.get(ctx.db, ctx.orgId, id);
  if (!row.actions) throw fieldError('status', `The automation has no plan yet (it is "${row.status}"): preview it once evaluation has built one, or give \`actions\``);
  assertHoldsPlan(ctx, row, 'preview', false);
  const scheduled = row.triggerType === 'scheduled';
  let event: typeof events.$inferSelect | undefined;
  if (eventId !== undefined) {
    [event] = await ctx.db.select().from(events).where(and(eq(events.id, eventId), eq(events.organizationId, ctx.orgId)));
    if (!event) throw notFound('Event');
  } else if (!scheduled) {
    [event] = await ctx.db
      .select()
      .from(events)
      .where(and(eq(events.organizationId, ctx.orgId), inArray(events.type, triggerEventTypes(row.triggerEvent))))
      .orderBy(desc(events.occurredAt), desc(events.id))
      .limit(1);
  }
  const needed = event ? eventReadPermission(event.type) : null;
  if (needed && missingPermissions(ctx.permissions, [needed as Permission]).length) {
    throw new AppError('FORBIDDEN', `Previewing on a "${event!.type}" event shows its record, which needs the "${needed}" permission`);
  }
  const steps = row.actions as PlanStep[];
  const tctx: TemplateContext = {
    event: event ? { id: event.id, type: event.type, resourceId: event.resourceId, occurredAt: event.occurredAt.toISOString(), data: event.data } : null,
    now,
    lastRunAt: row.lastRunAt,
    steps: steps.map((s, i) => ({ id: `<id of the record step ${i + 1} (${s.operation}) answers with>` })),
    timezone: row.timezone,
  };
  if (usesDigest(row.actions)) tctx.digest = await digestSince(ctx.db, ctx.orgId, row.lastRunAt ?? new Date(now.getTime() - 24 * 3600_000), now);
  tctx.unreadDigest = await unreadDigests(ctx.db, ctx.orgId, row.actions);
  if (usesMailChannel(row.actions)) tctx.mailChannel = await noticeChannelOf(ctx.db, ctx.orgId, event?.type.startsWith('channel.') ? event.resourceId : null);
  let conditionHolds = true;
  if (row.condition) {
    try {
      const record = event ? withThread(event, readsThread(row.condition as unknown as Condition) ? await threadsOfEvents(ctx.db, [event]) : new Map()) : null;
      conditionHolds = evaluateCondition(row.condition as unknown as Condition, record, event ? { at: event.occurredAt, timezone: row.timezone } : undefined);
    } catch {
      conditionHolds = false;
    }
  }
  return {
    automationId: row.id,
    event: event ? { id: event.id, type: event.type, occurredAt: event.occurredAt } : null,
    conditionHolds,
    steps: steps.map((s) => ({ operation: s.operation, input: renderTemplates(s.input, tctx) as Record<string, unknown> })),
  };
}

/** What the approval page showed: the automation as it was then (`updatedAt`, to the millisecond). */
export const reviewedVersion = (row: Pick<AutomationRow, 'updatedAt'>) => row.updatedAt.toISOString();

/** The automation, locked, as the person reviewed it; a 400 on `version` when it changed since the page was opened. */
async function lockReviewed(ctx: OperationContext, id: string, version: string) {
  const row = await lockAutomation(ctx.db, ctx.orgId, id);
  if (reviewedVersion(row) !== version) throw fieldError('version', 'The automation changed since this page was opened: review it again before deciding');
  return row;
}

/**
 * The approval page's Approve: the automation exactly as the person reviewed it becomes active ("pending_approval",
 * or "paused" / "failed" as a resume), acting for the person's grant; anything else changes nothing.
 */
export async function approveReviewed(ctx: OperationContext, id: string, version: string) {
  const row = await lockReviewed(ctx, id, version);
  if (row.status === 'active') {
    // An active automation a person disabled, which an assistant asked to enable again.
    if (row.enabled) throw fieldError('status', 'The automation is already active');
    assertActivatable(row);
    assertHoldsPlan(ctx, row, 'enable');
    const who = await whoIs(ctx.db, ctx.actor);
    const asked = (row.approvalRequestedBy as Who | null)?.client;
    return toAutomation(
      await automationRows.update(ctx.db, ctx.orgId, id, {
        enabled: true,
        ...actsForColumns(await credentialOf(ctx.db, ctx.actor)),
        approvedBy: (who && asked ? { ...who, client: asked } : who) as never,
        approvedAt: sql`now()` as never,
        approvalRequestedBy: null,
        approvalRequestedAt: null,
      }),
    );
  }
  const from = row.status === 'pending_approval' ? ['pending_approval' as const] : (['paused', 'failed'] as const);
  return transitionAutomation(ctx, id, from, 'active');
}

/** The approval page's Reject: an automation waiting for approval is archived, with who rejected it and why as `statusReason`. */
export async function rejectReviewed(ctx: OperationContext, id: string, version: string, reason: string) {
  const row = await lockReviewed(ctx, id, version);
  if (row.status !== 'pending_approval') throw fieldError('status', `Only an automation waiting for approval can be rejected; this one is "${row.status}"`);
  const who = await whoIs(ctx.db, ctx.actor);
  const statusReason = `Rejected by ${who?.name ?? 'a person'} on the approval page${reason ? `: ${reason}` : ''}`;
  return toAutomation(await automationRows.update(ctx.db, ctx.orgId, id, { status: 'archived', statusReason, nextRunAt: null, approvalRequestedBy: null, approvalRequestedAt: null }));
}
