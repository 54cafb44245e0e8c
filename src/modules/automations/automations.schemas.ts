import { CronExpressionParser } from 'cron-parser';
import { z } from 'zod';
import { AuditFields, components, DateTimeInput, IdParam, JsonObject, LongText, ShortText, Uuid } from '../../core/schemas.js';

export const AutomationIdParam = { id: IdParam('automation') };
export const AutomationId = z.strictObject(AutomationIdParam);

export const AUTOMATION_STATUSES = [
  'draft',
  'pending_evaluation',
  'evaluation_failed',
  'code_generation_failed',
  'pending_approval',
  'active',
  'paused',
  'completed',
  'expired',
  'failed',
  'archived',
] as const;

/** The status of an automation created without one: its instructions are evaluated at once. */
export const DEFAULT_STATUS = 'pending_evaluation';

/** Stored as `triggerEvent` when the create request has none; evaluation replaces it with the event inferred from the instructions. */
export const PLACEHOLDER_TRIGGER_EVENT = 'automation.pending';

export const TRIGGER_TYPES = ['event', 'scheduled'] as const;
export type TriggerType = (typeof TRIGGER_TYPES)[number];

const INT32_MAX = 2_147_483_647;

/** Five fields (minute hour day-of-month month day-of-week), six with leading seconds, or a macro such as `@daily`. */
export function isValidCron(expression: string): boolean {
  const trimmed = expression.trim();
  const fields = trimmed.split(/\s+/).length;
  if (!trimmed.startsWith('@') && fields !== 5 && fields !== 6) return false;
  try {
    CronExpressionParser.parse(trimmed);
    return true;
  } catch {
    return false;
  }
}

const CronExpression = ShortText(255)
  .trim()
  .refine(isValidCron, 'Must be a valid cron expression: 5 fields (minute hour day-of-month month day-of-week), 6 with leading seconds, or a macro such as "@daily"')
  .describe('Cron schedule of a scheduled automation, e.g. "0 9 * * 1-5" (5 fields, 6 with leading seconds, or @hourly/@daily/@weekly/@monthly/@yearly)');

const GroupMetadata = z
  .strictObject({
    purpose: ShortText(1000).optional().describe('Why the automations of the group exist'),
    createdBy: ShortText(255).optional().describe('Who or what created the group'),
    aiTaskId: ShortText(255).optional().describe('Id of the assistant task that created the group'),
    tags: z.array(ShortText(100)).max(100).optional().describe('Tags of the group'),
  })
  .describe('Metadata of the automation group: `purpose`, `createdBy`, `aiTaskId` (strings) and `tags` (array of strings)');

/** Largest number of steps a create or update body may carry; the plan check allows fewer (see `statusReason`). */
const MAX_GIVEN_STEPS = 100;

export const PlanStepSchema = z.object({
  operation: z.string().describe('Operation id, e.g. "messages.update"'),
  input: JsonObject.describe('Its input; string values may hold templates such as "{{event.resourceId}}" or "{{now}}"'),
});

const GivenPlanStep = z.strictObject({
  operation: z
    .string()
    .max(255)
    .regex(/^[a-z][a-z_]*(\.[a-z][a-z_]*)+$/, 'Must be an operation id, e.g. "messages.update"')
    .describe('Operation id of a write, e.g. "messages.update"'),
  input: JsonObject.describe('Its input (templates allowed)'),
});

/** The fields of a create body; the update body has the same ones, all optional. */
const fields = {
  name: ShortText(255).min(1).describe('Name of the automation, 1 to 255 characters'),
  instructions: LongText.min(1).describe('Natural-language instructions: what the automation does and when'),
  description: LongText.nullable().optional().describe('Longer description'),
  triggerEvent: z
    .string()
    .max(255)
    .regex(/^[A-Za-z][A-Za-z0-9_-]*(\.[A-Za-z][A-Za-z0-9_-]*)+$/, 'Must be a dotted resource.action name, e.g. "message.received"')
    .optional()
    .describe(
      `Event type that triggers the automation, a dotted resource.action name such as "message.received". When omitted at creation, "${PLACEHOLDER_TRIGGER_EVENT}" is stored and the actual event type is inferred from \`instructions\` during evaluation.`,
    ),
  triggerType: z
    .enum(TRIGGER_TYPES)
    .optional()
    .describe(
      'How the automation is triggered: "event" or "scheduled" (which needs `cronExpression`). When omitted it is inferred: "scheduled" when `cronExpression` is given or the instructions describe a schedule, else "event". Accepted but never returned.',
    ),
  cronExpression: CronExpression.nullable().optional(),
  condition: JsonObject.nullable().optional().describe('Condition the event must meet (free-form JSON object)'),
  actions: z
    .array(GivenPlanStep)
    .min(1)
    .max(MAX_GIVEN_STEPS)
    .nullable()
    .optional()
    .describe(
      'A plan you write (with `triggerEvent` or `cronExpression`): checked like an evaluated one, then needs approval; null forgets it',
    ),
  enabled: z.boolean().optional().describe('Whether the automation may run (default true)'),
  groupId: Uuid.nullable().optional().describe('Group of related automations'),
  groupName: ShortText(255).nullable().optional().describe('Name of the group'),
  groupMetadata: GroupMetadata.nullable().optional(),
  maxExecutions: z.number().int().min(1).max(INT32_MAX).nullable().optional().describe('Largest number of runs; null or absent means unlimited'),
  currentExecutions: z.number().int().min(0).max(INT32_MAX).optional().describe('Runs so far, at least 0 (default 0)'),
  expiresAt: DateTimeInput.nullable().optional().describe('When the automation stops running; null or absent means never'),
  status: z
    .enum(AUTOMATION_STATUSES)
    .optional()
    .describe(
      `Lifecycle status (default "${DEFAULT_STATUS}": evaluated, then "pending_approval"). "draft" waits until patched to "pending_evaluation"; "active" is evaluated and runs without an approval step (with an API key; through an OAuth token it is evaluated and then waits for a person, and the answer carries \`approvalUrl\`)`,
    ),
};

export const AutomationCreateInput = z.strictObject(fields);

export const AutomationUpdateInput = z.strictObject({
  ...AutomationIdParam,
  ...fields,
  name: fields.name.optional(),
  instructions: fields.instructions.optional(),
  triggerEvent: fields.triggerEvent.describe('Event type that triggers the automation, a dotted resource.action name'),
  triggerType: fields.triggerType.describe(
    'Switches between "event" and "scheduled" (which needs a `cronExpression`, here or already stored). Switching to "event" clears the stored `cronExpression`. Accepted but never returned.',
  ),
});

/** Who made an automation active: a person (on the approval page) or an API key, with the app that asked for it. */
export const Approver = z.object({
  type: z.enum(['user', 'apiKey']),
  id: Uuid.describe('The person or the API key'),
  name: z.string().describe("The person's name (or email), or the API key's name (or prefix)"),
  client: z.string().optional().describe('The name of the app (OAuth client) that asked for the approval, when one did'),
});

export const Automation = z.object({
  ...AuditFields,
  name: z.string(),
  description: z.string().nullable(),
  triggerEvent: z.string().describe(`Event type that triggers the automation ("${PLACEHOLDER_TRIGGER_EVENT}" until it is inferred)`),
  cronExpression: z.string().nullable().describe('Cron schedule of a scheduled automation, else null'),
  condition: JsonObject.nullable(),
  instructions: z.string(),
  createdBy: Uuid.describe('API key or user that created the automation'),
  enabled: z.boolean(),
  permissions: JsonObject.describe('What the plan may do: `{ "operations": [operation ids] }`, set by evaluation; `{}` before'),
  groupId: Uuid.nullable(),
  groupName: z.string().nullable(),
  groupMetadata: GroupMetadata.nullable(),
  maxExecutions: z.number().int().nullable().describe('Largest number of runs; null means unlimited'),
  currentExecutions: z.number().int().describe('Runs so far'),
  expiresAt: z.iso.datetime().nullable().describe('When the automation stops running; null means never'),
  status: z.enum(AUTOMATION_STATUSES),
  statusReason: z.string().nullable().describe('Why evaluation or the last runs failed, or why the engine paused it; null otherwise'),
  nextRunAt: z.iso.datetime().nullable().describe('Next cron tick of an active scheduled automation; null otherwise'),
  lastRunAt: z.iso.datetime().nullable().describe('When the last successful run finished; null before the first'),
  timezone: z.string().nullable().describe('IANA time zone `cronExpression` is read in; null means UTC'),
  actions: z
    .array(PlanStepSchema)
    .nullable()
    .describe('The plan: steps run in order, in one transaction, each an operation of the REST table; null until evaluation built it (or as given by a person)'),
  planSummary: z
    .string()
    .nullable()
    .describe('What the plan does and when, in plain sentences generated from the plan (what an approver consents to); null without a plan'),
  actsFor: z
    .object({
      type: z.enum(['api_key', 'user']),
      id: Uuid.describe('The API key or the person'),
      grantId: Uuid.nullable().describe("The person's OAuth grant"),
    })
    .nullable()
    .describe('The credential it acts for (who last created, changed, approved or resumed it); checked before every run'),
  approvedBy: Approver.nullable().describe('Who last made it active (approved or resumed it): a person on the approval page or an API key; null before'),
  approvedAt: z.iso.datetime().nullable().describe('When it was last made active; null before'),
  approvalUrl: z
    .url()
    .optional()
    .describe(
      'Only in the answer to `approve`, `resume`, `PATCH status: "active"` or a create with `status: "active"` made with an OAuth access token (an assistant over MCP): such a call never activates; a person of the organization approves on this page (`$PUBLIC_URL/account/automations/{id}`), and the automation keeps its status until then',
    ),
});

export const AutomationPreviewInput = z.strictObject({
  ...AutomationIdParam,
  eventId: Uuid.optional().describe(
    "The event to try the plan on; by default the organization's latest event of the automation's `triggerEvent` (none for a scheduled automation)",
  ),
});

export const AutomationPreview = z.object({
  automationId: Uuid,
  event: z
    .object({ id: Uuid, type: z.string(), occurredAt: z.iso.datetime() })
    .nullable()
    .describe('The event the plan was tried on; null for a scheduled automation, or when no event of the trigger has been recorded yet'),
  conditionHolds: z.boolean().describe('Whether the condition holds on the event (true when there is no condition)'),
  steps: z
    .array(
      z.object({
        operation: z.string().describe('Operation id of the step'),
        input: JsonObject.describe('Its input with the templates rendered for this event and now; an earlier step\'s record is shown as a placeholder'),
      }),
    )
    .describe('The steps a run would take, in order (they would run only when `conditionHolds`)'),
});

export const EXECUTION_STATUSES = ['pending', 'succeeded', 'failed', 'skipped'] as const;

export const AutomationExecution = z.object({
  id: Uuid.describe('Id of the execution'),
  automationId: Uuid.describe('The automation that ran'),
  eventId: Uuid.nullable().describe('The event that triggered the run (event-triggered automations)'),
  scheduledFor: z.iso.datetime().nullable().describe('The cron tick of the run (scheduled automations)'),
  status: z.enum(EXECUTION_STATUSES).describe('"pending" (queued), "succeeded", "failed" (nothing was written) or "skipped" (the automation could no longer run, or a fan-out cap was reached: see `error`)'),
  error: z.string().nullable().describe('Why the run failed or was skipped'),
  steps: z
    .array(z.object({ operation: z.string(), resourceId: Uuid.nullable().describe('Id of the record the step touched') }))
    .describe('One entry per step that ran'),
  startedAt: z.iso.datetime().nullable(),
  finishedAt: z.iso.datetime().nullable(),
});

// Named schemas of the OpenAPI document (components/schemas).
components.add(Automation, { id: 'Automation' });
components.add(AutomationExecution, { id: 'AutomationExecution' });
components.add(AutomationPreview, { id: 'AutomationPreview' });
