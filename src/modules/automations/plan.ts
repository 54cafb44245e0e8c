import { TRIGGER_EVENT_SEPARATOR } from '../events/events.catalog.js';

/**
 * What evaluation makes of an automation's instructions: the plan. The engine runs it; the evaluators
 * (built-in English vocabulary, or an OpenAI-compatible model) produce it; `validatePlan` checks it.
 *
 * A plan is plain JSON so that it can be stored, returned to clients and written by a model.
 */

/** Operators of a condition test. String comparisons are case-insensitive. */
export const CONDITION_OPERATORS = [
  'equals',
  'not_equals',
  'contains',
  'not_contains',
  'starts_with',
  'ends_with',
  'in',
  'exists',
  'not_exists',
  'gt',
  'gte',
  'lt',
  'lte',
] as const;
export type ConditionOperator = (typeof CONDITION_OPERATORS)[number];

/**
 * One test on the event's record (`data`): `field` is a dotted path (`importance`, `sender`,
 * `sender.email`, `metadata.source`). For `sender` and `recipient` the value is matched by its address:
 * a string as it is, an object by its `email`, `address` or `phoneNumber` (and `name` for contains).
 */
export interface ConditionTest {
  field: string;
  operator: ConditionOperator;
  value?: unknown;
}

/**
 * A test on when the event happened, read in the automation's time zone (UTC when it has none):
 * `from` ≤ local time < `to`, both `HH:MM` on a 24-hour clock; when `from` is later than `to` the range
 * wraps past midnight (`22:00`–`06:00`), and `to` `00:00` means until midnight.
 */
export interface TimeOfDayTest {
  timeOfDay: { from: string; to: string };
}

/** A test on the day of the week the event happened, read in the automation's time zone: 0 is Sunday … 6 Saturday. */
export interface DayOfWeekTest {
  dayOfWeek: number[];
}

/** A condition: a test on the record or on the event's time, or `all` / `any` of conditions, or `not` one. */
export type Condition = ConditionTest | TimeOfDayTest | DayOfWeekTest | { all: Condition[] } | { any: Condition[] } | { not: Condition };

/** The event types a `triggerEvent` names (one, or several separated by commas). */
export const triggerEventTypes = (triggerEvent: string): string[] => triggerEvent.split(TRIGGER_EVENT_SEPARATOR);

/** The `triggerEvent` of a plan triggered by each of these event types (in a stable order). */
export const joinTriggerEvents = (types: readonly string[]): string => [...new Set(types)].join(TRIGGER_EVENT_SEPARATOR);

/** Whether an event of this type triggers a plan whose `triggerEvent` is given. */
export const triggerMatches = (triggerEvent: string, eventType: string): boolean => triggerEvent === eventType || triggerEventTypes(triggerEvent).includes(eventType);

/**
 * One step: an operation of the operation table (`messages.update`) with its input. String values of
 * the input may hold templates (`{{event.resourceId}}`, `{{now}}`, …): see `template.ts`.
 */
export interface PlanStep {
  operation: string;
  input: Record<string, unknown>;
}

export type TriggerType = 'event' | 'scheduled';

export interface Plan {
  triggerType: TriggerType;
  /** An event type of the catalog (or several, comma-separated: see `triggerEventTypes`), or `schedule.tick` for scheduled automations. */
  triggerEvent: string;
  /** Five-field cron expression for scheduled automations, else null. */
  cronExpression: string | null;
  /** IANA time zone the cron expression and the time conditions are read in; null means UTC. */
  timezone: string | null;
  /** Must hold on the event's `data` for the automation to run; null means always. */
  condition: Condition | null;
  actions: PlanStep[];
  /** The operations the plan may call: exactly the operations of its steps. */
  permissions: { operations: string[] };
}

/** What the evaluator is given: the automation as stored, with the fields the user fixed himself. */
export interface EvaluationRequest {
  name: string;
  description: string | null;
  instructions: string;
  /** Fields the creator gave explicitly; they win over what the instructions suggest. */
  given: {
    triggerType?: TriggerType | undefined;
    triggerEvent?: string | undefined;
    cronExpression?: string | undefined;
    condition?: Record<string, unknown> | undefined;
  };
  now: Date;
  /** Who created it, for "me" in the instructions: a person's sign-in email; null for an API key (no person). */
  creator?: { email: string | null } | undefined;
}

export type EvaluationOutcome =
  | { status: 'planned'; plan: Plan }
  /** `evaluation_failed`: the instructions cannot be understood; `code_generation_failed`: understood, but no valid plan. */
  | { status: 'evaluation_failed' | 'code_generation_failed'; reason: string };

export interface Evaluator {
  readonly name: string;
  evaluate(request: EvaluationRequest): Promise<EvaluationOutcome>;
}
