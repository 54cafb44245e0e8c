import type { Condition, Plan, PlanStep } from '../../src/modules/automations/plan.js';

/** Building blocks of the plans the evaluator tests expect: conditions, steps and the two kinds of trigger. */

/** The evaluators' clock in these tests: a Monday morning. */
export const NOW = new Date('2030-01-07T08:00:00Z');

export const eq = (field: string, value: unknown): Condition => ({ field, operator: 'equals', value });
export const all = (...cs: Condition[]): Condition => ({ all: cs });
export const not = (c: Condition): Condition => ({ not: c });
export const email = eq('type', 'email');
/** A word in the text or the summary. */
export const words = (...ws: string[]): Condition => ({ any: ws.flatMap((w) => [{ field: 'text', operator: 'contains', value: w }, { field: 'summary', operator: 'contains', value: w }]) as Condition[] });
export const time = (from: string, to: string): Condition => ({ timeOfDay: { from, to } });
export const days = (...d: number[]): Condition => ({ dayOfWeek: d });

/** A change of the message the event is about. */
export const update = (patch: Record<string, unknown>): PlanStep => ({ operation: 'messages.update', input: { id: '{{event.resourceId}}', ...patch } });
export const read = update({ readAt: '{{now}}' });
export const archive = update({ archivedAt: '{{now}}' });
export const snooze = (until: string) => update({ snoozedUntil: until });
export const digest: PlanStep = {
  operation: 'messages.create',
  input: { direction: 'incoming', type: 'note', sender: 'Switchboard automations', summary: 'Digest of the messages since {{lastRunAt}}', text: '{{digest}}' },
};

/** A plan's permissions: the operations its steps use. */
export const opsOf = (actions: PlanStep[]) => ({ operations: [...new Set(actions.map((a) => a.operation))] });

export const onEvent = (triggerEvent: string, condition: Condition | null, actions: PlanStep[], timezone: string | null = null): Plan => ({
  triggerType: 'event',
  triggerEvent,
  cronExpression: null,
  timezone,
  condition,
  actions,
  permissions: opsOf(actions),
});

export const scheduled = (cronExpression: string, actions: PlanStep[] = [digest], timezone: string | null = null): Plan => ({
  triggerType: 'scheduled',
  triggerEvent: 'schedule.tick',
  cronExpression,
  timezone,
  condition: null,
  actions,
  permissions: opsOf(actions),
});
