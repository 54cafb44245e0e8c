import { defineOperation, type Operation } from '../../core/operation.js';
import { Pagination } from '../../core/pagination.js';
import type { AutomationStatus } from './automations.lifecycle.js';
import {
  createAutomation,
  deleteAutomation,
  EVALUATION_COST,
  getAutomation,
  listAutomations,
  listExecutions,
  MAX_AUTOMATIONS_PER_ORGANIZATION,
  previewAutomation,
  transitionAutomation,
  updateAutomation,
} from './automations.repository.js';
import {
  Automation,
  AutomationCreateInput,
  AutomationExecution,
  AutomationId,
  AutomationPreview,
  AutomationPreviewInput,
  AutomationUpdateInput,
  DEFAULT_STATUS,
  PLACEHOLDER_TRIGGER_EVENT,
} from './automations.schemas.js';

const BY_A_PERSON =
  'Made with an OAuth access token (an assistant over MCP), the call does not activate: it answers the automation with its status unchanged and `approvalUrl`, the page where a person of the organization reviews the plan and approves or rejects it (an API key activates directly).';

const AUTHORITY =
  'An automation never does what the people who set it up could not do themselves, now: it acts for whoever last set up what it does (`actsFor`), and before every run that credential must still be live and hold every permission the plan uses, or the automation is paused with a `statusReason`.';

/** POST /automations/{id}/<action>: one move of the lifecycle, answering the automation. */
function lifecycleOperation(action: string, to: AutomationStatus, from: readonly AutomationStatus[] | 'any', summary: string, description: string, effects?: Operation['effects']) {
  return defineOperation({
    ...(to === 'active' ? { errors: ['FORBIDDEN' as const] } : {}),
    ...(effects ? { effects } : {}),
    id: `automations.${action}`,
    method: 'POST',
    status: 200,
    event: 'automation.updated',
    path: `/automations/{id}/${action}`,
    summary,
    description,
    input: AutomationId,
    output: Automation,
    handler: (input, ctx) => transitionAutomation(ctx, input.id, from, to),
  });
}

export const automationsOperations: Operation[] = [
  defineOperation({
    id: 'automations.list',
    kind: 'list',
    method: 'GET',
    path: '/automations',
    summary: 'List automations',
    input: Pagination.strict(),
    output: Automation,
    handler: (input, ctx) => listAutomations(ctx.db, ctx.orgId, input),
  }),
  defineOperation({
    id: 'automations.create',
    method: 'POST',
    event: 'automation.created',
    cost: EVALUATION_COST,
    path: '/automations',
    summary: 'Create an automation',
    description: [
      `Only \`name\` and \`instructions\` are needed. Without \`status\` it starts "${DEFAULT_STATUS}": a background worker evaluates the instructions into a plan and moves it to "pending_approval" (approve it to run), "evaluation_failed" or "code_generation_failed" (\`statusReason\` says why).`,
      `Explicit \`triggerEvent\`, \`cronExpression\`, \`condition\`, \`triggerType\` win over evaluation (\`triggerEvent\` is "${PLACEHOLDER_TRIGGER_EVENT}" until then; \`triggerType\` is never returned).`,
      `Or write the plan yourself with \`actions\`. Either plan is checked against your permissions (beyond them: "code_generation_failed"). At most ${MAX_AUTOMATIONS_PER_ORGANIZATION} automations per organization.`,
    ].join('\n\n'),
    input: AutomationCreateInput,
    output: Automation,
    handler: (input, ctx) => createAutomation(ctx, input),
  }),
  defineOperation({
    id: 'automations.get',
    method: 'GET',
    path: '/automations/{id}',
    summary: 'Get an automation',
    input: AutomationId,
    output: Automation,
    handler: (input, ctx) => getAutomation(ctx.db, ctx.orgId, input.id),
  }),
  defineOperation({
    id: 'automations.update',
    method: 'PATCH',
    event: 'automation.updated',
    path: '/automations/{id}',
    summary: 'Update an automation',
    description: [
      'Only the fields present in the body are changed; null clears a nullable field.',
      `A change to \`instructions\`, \`condition\`, \`triggerEvent\`, \`triggerType\`, \`cronExpression\` or \`actions\` sends it back to "pending_evaluation", then to approval (unless it is "expired", or is or becomes "draft" or "archived"); the plan is checked against your permissions and acts for you.`,
      `Evaluating new \`instructions\` (or a move to "pending_evaluation" through \`status\`) costs ${EVALUATION_COST} credit (402 \`INSUFFICIENT_CREDITS\` and nothing changed when too low); checking a changed trigger, condition or written plan is free.`,
      '`status` follows the transitions table (docs/automations.md); a move it does not allow is a 400 naming the allowed targets. Switching to `triggerType` "event" clears `cronExpression`.',
      `\`status: "active"\` is an approval (or a resume), and so is \`enabled: true\` on an "active" automation that was disabled: ${BY_A_PERSON}`,
      'A longer life than the person approved is asked for the same way: through an OAuth token, a later or null `expiresAt`, or more runs left (a higher or null `maxExecutions`, a lower `currentExecutions`), is kept but pauses an "active" automation, and the answer carries `approvalUrl` where a person resumes it; an earlier end or fewer runs left change nothing of the status. An API key changes them directly.',
    ].join('\n\n'),
    input: AutomationUpdateInput,
    output: Automation,
    errors: ['INSUFFICIENT_CREDITS', 'FORBIDDEN'],
    handler: ({ id, ...patch }, ctx) => updateAutomation(ctx, id, patch),
  }),
  defineOperation({
    id: 'automations.delete',
    method: 'DELETE',
    event: 'automation.deleted',
    path: '/automations/{id}',
    summary: 'Delete an automation',
    description: 'Soft delete: the automation gets `deletedAt`, disappears from lists and gets, and never runs again.',
    input: AutomationId,
    output: Automation,
    handler: (input, ctx) => deleteAutomation(ctx.db, ctx.orgId, input.id),
  }),
  lifecycleOperation(
    'approve',
    'active',
    ['pending_approval'],
    'Approve an automation',
    `Moves an automation from "pending_approval" to "active": it runs from now on. Read \`planSummary\` and \`actions\` first: that is what you consent to. The caller must hold every permission the plan uses (403 \`FORBIDDEN\` naming the missing ones; a plan that sends needs the sending consent too) and becomes the one it acts for. \`expiresAt\` must be null (never expires) or in the future. ${BY_A_PERSON} ${AUTHORITY}`,
  ),
  lifecycleOperation('pause', 'paused', ['active'], 'Pause an automation', 'Moves an "active" automation to "paused": it does not run until resumed. Missed events and ticks are not replayed.'),
  lifecycleOperation(
    'resume',
    'active',
    ['paused', 'failed'],
    'Resume an automation',
    `Moves a "paused" (or "failed") automation back to "active" and resets its failure count. The caller must hold every permission the plan uses (403 \`FORBIDDEN\` naming the missing ones) and becomes the one it acts for (so a person with those permissions resumes an automation paused because its credential was revoked). ${BY_A_PERSON}`,
  ),
  lifecycleOperation('archive', 'archived', 'any', 'Archive an automation', 'Moves an automation to "archived" from any status: it never runs again and cannot change status afterwards.', { destructive: true }),
  defineOperation({
    id: 'automations.preview',
    method: 'POST',
    status: 200,
    path: '/automations/{id}/preview',
    summary: 'Preview what an automation would do',
    description:
      "A dry run of the plan for one event (`eventId`, by default the organization's latest event of the automation's `triggerEvent`; a scheduled automation has none): whether the condition holds and each step with its input rendered for that event and now. Nothing is written, run or charged. The caller must hold every permission the plan uses, and read permission on the area of the event's record (403 otherwise); an automation without a plan is a 400.",
    errors: ['FORBIDDEN'],
    input: AutomationPreviewInput,
    output: AutomationPreview,
    handler: ({ id, eventId }, ctx) => previewAutomation(ctx, id, eventId, new Date()),
  }),
  defineOperation({
    id: 'automations.list_executions',
    kind: 'list',
    method: 'GET',
    path: '/automations/{id}/executions',
    summary: "List an automation's executions",
    description: 'One execution per triggering event or cron tick: its status, error, and the records each step touched. Newest first by default.',
    input: Pagination.extend(AutomationId.shape).strict(),
    output: AutomationExecution,
    handler: ({ id, ...page }, ctx) => listExecutions(ctx.db, ctx.orgId, id, page),
  }),
];
