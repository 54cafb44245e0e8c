import { eq } from 'drizzle-orm';
import type { z } from 'zod';
import { fieldError, notFound } from '../../core/errors.js';
import type { Page, PageInput } from '../../core/pagination.js';
import { toDate } from '../../core/schemas.js';
import type { DbOrTx } from '../../db/client.js';
import { automations } from '../../db/schema.js';
import { definedOnly, live, scopedRepository } from '../../db/scoped.js';
import {
  DEFAULT_STATUS,
  PLACEHOLDER_TRIGGER_EVENT,
  type AutomationCreateInput,
  type AutomationUpdateInput,
  type TriggerType,
} from './automations.schemas.js';

export const automationRows = scopedRepository(automations, 'Automation');

type AutomationRow = typeof automations.$inferSelect;
type CreateInput = z.output<typeof AutomationCreateInput>;
type UpdateInput = Omit<z.output<typeof AutomationUpdateInput>, 'id'>;

/** The response: every column but `triggerType`, which the spec keeps out of responses. */
export function toAutomation(row: AutomationRow) {
  const { triggerType: _hidden, ...rest } = row;
  return { ...rest, permissions: rest.permissions ?? {} };
}

/**
 * Wording that describes a time-based schedule ("every Monday", "daily", "at 9am"). A heuristic for
 * the create request that gives no `triggerType`; evaluation refines what the automation does.
 */
const SCHEDULE_WORDING = [
  /\b(every|each)\s+(other\s+|\d+\s+)?(second|minute|hour|day|week|fortnight|month|quarter|year|morning|afternoon|evening|night|weekday|weekend|monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?\b/i,
  /\b(hourly|daily|nightly|weekly|fortnightly|monthly|quarterly|yearly|annually)\b/i,
  /\bat\s+(\d{1,2}(:\d{2})?\s*(am|pm)|\d{1,2}:\d{2}|noon|midnight)\b/i,
  /\b(cron|on a schedule)\b/i,
];

export const describesSchedule = (instructions: string) => SCHEDULE_WORDING.some((re) => re.test(instructions));

function resolveCreateTrigger(input: CreateInput): { triggerType: TriggerType; cronExpression: string | null } {
  const cron = input.cronExpression ?? null;
  if (input.triggerType === 'event' && cron !== null) {
    throw fieldError('cronExpression', 'Only scheduled automations take a cronExpression; send triggerType "scheduled" or leave triggerType out');
  }
  const inferred = cron !== null || describesSchedule(input.instructions) ? 'scheduled' : 'event';
  const triggerType = input.triggerType ?? inferred;
  if (triggerType === 'scheduled' && cron === null) {
    throw fieldError(
      'cronExpression',
      input.triggerType
        ? 'Required when triggerType is "scheduled"'
        : 'Required: the instructions describe a schedule, so the automation is scheduled; send a cron expression (e.g. "0 9 * * *") or triggerType "event"',
    );
  }
  return { triggerType, cronExpression: cron };
}

export async function createAutomation(db: DbOrTx, orgId: string, actorId: string, input: CreateInput) {
  const trigger = resolveCreateTrigger(input);
  const row = await automationRows.insert(db, {
    ...input,
    ...trigger,
    triggerEvent: input.triggerEvent ?? PLACEHOLDER_TRIGGER_EVENT,
    expiresAt: toDate(input.expiresAt),
    status: input.status ?? DEFAULT_STATUS,
    permissions: {},
    organizationId: orgId,
    createdBy: actorId,
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

/**
 * Applies the fields given. The trigger stays consistent with what is stored: a scheduled automation
 * always has a cron expression, an event automation never has one.
 */
export async function updateAutomation(db: DbOrTx, orgId: string, id: string, patch: UpdateInput) {
  const { triggerType: requestedType, expiresAt, ...rest } = patch;
  const changes = { ...definedOnly(rest), ...(expiresAt !== undefined ? { expiresAt: toDate(expiresAt) } : {}) };
  if (requestedType === undefined && patch.cronExpression === undefined) {
    return toAutomation(await automationRows.update(db, orgId, id, changes));
  }
  return db.transaction(async (tx) => {
    const [stored] = await tx
      .select({ triggerType: automations.triggerType, cronExpression: automations.cronExpression })
      .from(automations)
      .where(live(automations, orgId, eq(automations.id, id)))
      .for('update');
    if (!stored) throw notFound('Automation');
    const sentCron = typeof patch.cronExpression === 'string';
    const triggerType = requestedType ?? (sentCron ? 'scheduled' : (stored.triggerType as TriggerType));
    let cronExpression = patch.cronExpression === undefined ? stored.cronExpression : patch.cronExpression;
    if (triggerType === 'event') {
      if (sentCron) throw fieldError('cronExpression', 'Only scheduled automations take a cronExpression; send triggerType "scheduled" or leave triggerType out');
      cronExpression = null;
    } else if (cronExpression === null) {
      throw fieldError('cronExpression', 'Required while triggerType is "scheduled"; to make the automation event-driven send triggerType "event"');
    }
    return toAutomation(await automationRows.update(tx, orgId, id, { ...changes, triggerType, cronExpression }));
  });
}

export async function deleteAutomation(db: DbOrTx, orgId: string, id: string) {
  return toAutomation(await automationRows.softDelete(db, orgId, id));
}
