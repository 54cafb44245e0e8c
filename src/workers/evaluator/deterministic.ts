import { SCHEDULE_TRIGGER } from '../../modules/events/events.catalog.js';
import type { Condition, EvaluationOutcome, EvaluationRequest, Evaluator, Plan, PlanStep, TriggerType } from '../../modules/automations/plan.js';
import { normalize, Scanner, takeActions, takeLevels, takeMessageConditions, takeSchedule, takeTimeZone, takeTrigger, type ActionSpec } from './vocabulary.js';

/** The sender of the messages the digest action writes. */
export const DIGEST_SENDER = 'Switchboard automations';

const NO_TRIGGER =
  'No trigger or schedule was recognized in the instructions. Say when the automation runs, e.g. "When a new email arrives from ada@example.com, …", "When a customer is added, …" or "Every Monday at 9, …".';
const NO_ACTION =
  'No action was recognized in the instructions. Say what the automation does, e.g. "… mark it as read", "… archive it", "… snooze it for 2 hours", "… set its importance to high", "… create a contact for the sender" or "… write a summary of the messages since the last run".';

const ON_MESSAGE = new Set<ActionSpec['kind']>(['read', 'unread', 'archive', 'snooze', 'set', 'contact']);
const MESSAGE_EVENTS = new Set(['message.received', 'message.sent', 'message.created', 'message.updated']);

const updateMessage = (patch: Record<string, unknown>): PlanStep => ({ operation: 'messages.update', input: { id: '{{event.resourceId}}', ...patch } });

function stepsOf(action: ActionSpec, index: number, types: string[]): PlanStep[] {
  switch (action.kind) {
    case 'read':
      return [updateMessage({ readAt: '{{now}}' })];
    case 'unread':
      return [updateMessage({ readAt: null })];
    case 'archive':
      return [updateMessage({ archivedAt: '{{now}}' })];
    case 'snooze':
      return [updateMessage({ snoozedUntil: action.until })];
    case 'set':
      return [updateMessage({ [action.field]: action.value })];
    case 'contact': {
      const byPhone = types.length > 0 && types.every((t) => t === 'phone' || t === 'sms');
      return [
        { operation: 'contacts.create', input: { name: '{{sender.name}}' } },
        byPhone
          ? { operation: 'contacts.create_phone_number', input: { id: `{{steps.${index}.id}}`, phoneNumber: '{{sender.address}}' } }
          : { operation: 'contacts.create_email', input: { id: `{{steps.${index}.id}}`, email: '{{sender.address}}' } },
      ];
    }
    case 'digest':
      return [
        {
          operation: 'messages.create',
          input: { direction: 'incoming', type: 'note', sender: DIGEST_SENDER, summary: 'Digest of the messages since {{lastRunAt}}', text: '{{digest}}' },
        },
      ];
  }
}

const fail = (status: 'evaluation_failed' | 'code_generation_failed', reason: string): EvaluationOutcome => ({ status, reason });

/** Joins tests into one condition: none → null, one → itself, more → `all`. */
const conjunction = (tests: Condition[]): Condition | null => (tests.length === 0 ? null : tests.length === 1 ? tests[0]! : { all: tests });

/**
 * Builds the plan from the instructions with the English vocabulary (vocabulary.ts). Only the
 * `instructions` are read; the fields the creator gave (`given`) are kept as they are.
 */
export function planFromInstructions(request: EvaluationRequest): EvaluationOutcome {
  const { given } = request;
  const s = new Scanner(normalize(request.instructions));
  const zone = takeTimeZone(s);
  if ('error' in zone) return fail('evaluation_failed', zone.error);
  const actions = takeActions(s);
  const schedule = takeSchedule(s);
  const levels = takeLevels(s);
  const trigger = takeTrigger(s);

  const givenEvent = given.triggerEvent && given.triggerEvent !== 'automation.pending' ? given.triggerEvent : undefined;
  const triggerType: TriggerType | null =
    given.triggerType ?? (given.cronExpression ? 'scheduled' : givenEvent ? 'event' : schedule ? 'scheduled' : trigger ? 'event' : null);
  if (!triggerType) return fail('evaluation_failed', NO_TRIGGER);

  let triggerEvent: string;
  let cronExpression: string | null;
  if (triggerType === 'scheduled') {
    cronExpression = given.cronExpression ?? schedule;
    if (!cronExpression) return fail('evaluation_failed', `The automation is scheduled but the instructions state no schedule. Say when it runs, e.g. "Every Monday at 9, …", "Every day at 7:30 pm, …" or "Every 15 minutes, …".`);
    triggerEvent = givenEvent ?? SCHEDULE_TRIGGER;
  } else {
    cronExpression = given.cronExpression ?? null;
    const event = givenEvent ?? trigger?.event;
    if (!event) return fail('evaluation_failed', NO_TRIGGER);
    triggerEvent = event;
  }

  const types = trigger?.types ?? [];
  const onMessage = triggerType === 'event' && MESSAGE_EVENTS.has(triggerEvent);
  let condition: Condition | null = (given.condition as Condition | undefined) ?? null;
  if (!given.condition && onMessage) condition = conjunction(takeMessageConditions(s, trigger && MESSAGE_EVENTS.has(trigger.event) ? types : [], levels));

  if (actions.length === 0) return fail('evaluation_failed', NO_ACTION);
  const misplaced = actions.find((a) => ON_MESSAGE.has(a.kind) && !onMessage);
  if (misplaced) {
    const what = triggerType === 'scheduled' ? 'a scheduled automation has no message' : `its trigger "${triggerEvent}" is not a message event`;
    return fail(
      'code_generation_failed',
      `"${misplaced.phrase}" acts on the message that triggered the automation, but ${what}. Trigger it on messages, e.g. "When a new email arrives, ${misplaced.phrase}".`,
    );
  }

  const steps: PlanStep[] = [];
  for (const action of actions) steps.push(...stepsOf(action, steps.length, types));
  const plan: Plan = {
    triggerType,
    triggerEvent,
    cronExpression,
    timezone: zone.zone,
    condition,
    actions: steps,
    permissions: { operations: [...new Set(steps.map((st) => st.operation))] },
  };
  return { status: 'planned', plan };
}

/** The built-in evaluator: deterministic, offline, English. */
export const builtinEvaluator: Evaluator = {
  name: 'builtin',
  evaluate: async (request) => planFromInstructions(request),
};
