import { and, eq, sql } from 'drizzle-orm';
import type { z } from 'zod';
import { debitCredits } from '../../accounts/accounts.js';
import { fieldError, notFound } from '../../core/errors.js';
import type { OperationContext } from '../../core/operation.js';
import type { Page, PageInput } from '../../core/pagination.js';
import { toDate } from '../../core/schemas.js';
import type { DbOrTx } from '../../db/client.js';
import { automationExecutions, automations } from '../../db/schema.js';
import { definedOnly, listPage, live, scopedRepository } from '../../db/scoped.js';
import { assertClientTransition, NOT_EVALUATED, type AutomationStatus } from './automations.lifecycle.js';
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

/** The response: the public columns; `triggerType` (the spec keeps it out) and the engine's bookkeeping stay inside. */
export function toAutomation(row: AutomationRow) {
  const {
    triggerType: _type,
    creatorPermissions: _creator,
    evaluateAfter: _evaluateAfter,
    evaluationAttempts: _attempts,
    consecutiveFailures: _failures,
    explicitTrigger: _explicit,
    ...rest
  } = row;
  return { ...rest, permissions: rest.permissions ?? {} };
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

type TriggerFields = Pick<CreateInput, 'triggerType' | 'triggerEvent' | 'cronExpression' | 'condition'>;

/** The trigger fields a client has set himself, after this request: evaluation keeps them, null forgets one. */
function explicitTrigger(before: Record<string, unknown>, sent: Partial<TriggerFields>): Record<string, unknown> {
  const out = { ...before };
  for (const key of ['triggerType', 'triggerEvent', 'cronExpression', 'condition'] as const) {
    if (sent[key] === null) delete out[key];
    else if (sent[key] !== undefined) out[key] = sent[key];
  }
  if (out.triggerType === 'event') delete out.cronExpression;
  return out;
}

/** What evaluation has to do for an automation in this status: evaluate now, or nothing (drafts and archived ones). */
const evaluationFor = (status: AutomationStatus) => (NOT_EVALUATED.includes(status) ? null : sql`now()`);

export async function createAutomation(ctx: OperationContext, input: CreateInput) {
  const cron = input.cronExpression ?? null;
  if (input.triggerType === 'event' && cron !== null) throw fieldError('cronExpression', ONLY_SCHEDULED_TAKE_CRON);
  const triggerType: TriggerType = input.triggerType ?? (cron !== null || describesSchedule(input.instructions) ? 'scheduled' : 'event');
  const status = input.status ?? DEFAULT_STATUS;
  const row = await automationRows.insert(ctx.db, {
    ...input,
    triggerType,
    cronExpression: cron,
    triggerEvent: input.triggerEvent ?? PLACEHOLDER_TRIGGER_EVENT,
    expiresAt: toDate(input.expiresAt),
    status,
    permissions: {},
    organizationId: ctx.orgId,
    createdBy: ctx.actorId,
    creatorPermissions: [...ctx.permissions],
    explicitTrigger: explicitTrigger({}, input),
    evaluateAfter: evaluationFor(status) as never,
  });
  return toAutomation(row);
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

/**
 * The changes a move to `to` brings besides the status: a move to `pending_evaluation` queues an
 * evaluation (charged), a move to `active` needs a plan and a live expiry, and resets the failure count.
 */
async function transitionChanges(ctx: OperationContext, row: AutomationRow, to: AutomationStatus, instructionsChanged: boolean) {
  const from = row.status as AutomationStatus;
  const changes: Partial<typeof automations.$inferInsert> = {};
  if (to === 'pending_evaluation' && (from !== to || instructionsChanged)) {
    await debitCredits(ctx.db, ctx.orgId, EVALUATION_COST);
    Object.assign(changes, { evaluateAfter: sql`now()`, evaluationAttempts: 0, statusReason: null, actions: null, creatorPermissions: [...ctx.permissions] });
  }
  if (to === 'active' && from !== 'active') {
    if (!row.actions) throw fieldError('status', 'The automation has no plan yet: it becomes "active" once evaluation has built one');
    if (row.expiresAt && row.expiresAt.getTime() <= Date.now()) throw fieldError('status', 'The automation has expired (expiresAt is past); move expiresAt first');
    Object.assign(changes, { consecutiveFailures: 0, statusReason: null, nextRunAt: null });
  }
  if (to !== 'active') changes.nextRunAt = null;
  return changes;
}

/**
 * Applies the fields given. Changing `instructions` sends the automation back to `pending_evaluation`
 * (charged like the first evaluation) unless the same request parks it as a draft; `status` follows the
 * transitions table. The trigger stays consistent: a scheduled automation may have a cron expression
 * (evaluation infers one from the instructions), an event automation never has one.
 */
export async function updateAutomation(ctx: OperationContext, id: string, patch: UpdateInput) {
  const row = await lockAutomation(ctx.db, ctx.orgId, id);
  const { triggerType: requestedType, expiresAt, status: requestedStatus, ...rest } = patch;
  const changes: Partial<typeof automations.$inferInsert> = { ...definedOnly(rest), ...(expiresAt !== undefined ? { expiresAt: toDate(expiresAt) } : {}) };

  if (['triggerType', 'triggerEvent', 'cronExpression', 'condition'].some((k) => k in patch && patch[k as keyof UpdateInput] !== undefined)) {
    changes.explicitTrigger = explicitTrigger(row.explicitTrigger, patch);
  }
  const instructionsChanged = patch.instructions !== undefined && patch.instructions !== row.instructions;
  let to = (requestedStatus ?? row.status) as AutomationStatus;
  if (instructionsChanged && requestedStatus !== 'draft' && row.status !== 'draft' && row.status !== 'archived') to = 'pending_evaluation';
  assertClientTransition(row.status as AutomationStatus, to);
  if (requestedStatus !== undefined || to !== row.status || instructionsChanged) {
    Object.assign(changes, { status: to }, await transitionChanges(ctx, row, to, instructionsChanged));
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
  return toAutomation(await automationRows.update(ctx.db, ctx.orgId, id, changes));
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
  const changes = await transitionChanges(ctx, row, to, false);
  return toAutomation(await automationRows.update(ctx.db, ctx.orgId, id, { ...changes, status: to }));
}

export async function deleteAutomation(db: DbOrTx, orgId: string, id: string) {
  return toAutomation(await automationRows.softDelete(db, orgId, id, undefined));
}

export type ExecutionRow = typeof automationExecutions.$inferSelect;

export function toExecution(row: ExecutionRow) {
  const { organizationId: _org, depth: _depth, createdAt: _created, ...rest } = row;
  return rest;
}

/** The runs of one live automation, newest first by default. */
export async function listExecutions(db: DbOrTx, orgId: string, automationId: string, page: PageInput): Promise<Page<ReturnType<typeof toExecution>>> {
  if (!(await automationRows.exists(db, orgId, automationId))) throw notFound('Automation');
  const rows = await listPage(db, automationExecutions, and(eq(automationExecutions.organizationId, orgId), eq(automationExecutions.automationId, automationId)), page);
  return { items: rows.map(toExecution) };
}
