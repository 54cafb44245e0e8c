import type { Condition, Plan } from './plan.js';

const VERBS: Record<string, string> = { create: 'creates', update: 'updates', delete: 'deletes', archive: 'archives', send: 'sends' };

/** "messages.update" -> "updates a message"; "contacts.emails.create" -> "creates a contacts email". */
function describeStep(operation: string): string {
  const parts = operation.split('.');
  const action = parts.pop() ?? operation;
  const noun = parts
    .map((p, i) => (i === parts.length - 1 ? p.replace(/ies$/, 'y').replace(/s$/, '') : p))
    .join(' ')
    .replace(/_/g, ' ');
  return `${VERBS[action] ?? `runs ${action.replace(/_/g, ' ')} on`} a ${noun}`;
}

function describeCondition(c: Condition): string {
  if ('all' in c) return c.all.map(describeCondition).join(' and ');
  if ('any' in c) return `(${c.any.map(describeCondition).join(' or ')})`;
  if ('not' in c) return `not (${describeCondition(c.not)})`;
  const value = c.value === undefined ? '' : ` ${JSON.stringify(c.value)}`;
  return `${c.field} ${c.operator.replace(/_/g, ' ')}${value}`;
}

/** One or two plain sentences describing what a plan does and when, generated from the plan alone. */
export function summarizePlan(plan: Plan): string {
  const when =
    plan.triggerType === 'scheduled'
      ? `Runs on the schedule "${plan.cronExpression ?? ''}" (${plan.timezone ?? 'UTC'})`
      : `Runs on each "${plan.triggerEvent}" event${plan.condition ? ` where ${describeCondition(plan.condition)}` : ''}`;
  const steps = plan.actions.map((s) => describeStep(s.operation));
  const what = steps.length <= 1 ? (steps[0] ?? 'does nothing') : `${steps.slice(0, -1).join(', ')} and then ${steps.at(-1)}`;
  return `${when} and ${what}.`;
}
