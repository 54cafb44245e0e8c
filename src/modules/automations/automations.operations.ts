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
  transitionAutomation,
  updateAutomation,
} from './automations.repository.js';
import { Automation, AutomationCreateInput, AutomationExecution, AutomationId, AutomationUpdateInput, DEFAULT_STATUS, PLACEHOLDER_TRIGGER_EVENT } from './automations.schemas.js';

/** POST /automations/{id}/<action>: one move of the lifecycle, answering the automation. */
function lifecycleOperation(action: string, to: AutomationStatus, from: readonly AutomationStatus[] | 'any', summary: string, description: string, effects?: Operation['effects']) {
  return defineOperation({
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
      `Only \`name\` and \`instructions\` are needed. Without \`status\` the automation starts "${DEFAULT_STATUS}": a background worker evaluates the instructions into a plan (trigger, condition, steps) and moves it to "pending_approval" (approve it to run), "evaluation_failed" or "code_generation_failed" (see \`statusReason\`). The answer is immediate.`,
      `Fields given explicitly (\`triggerEvent\`, \`cronExpression\`, \`condition\`, \`triggerType\`) win over what evaluation infers. Without \`triggerEvent\` the placeholder "${PLACEHOLDER_TRIGGER_EVENT}" is stored until evaluation. \`triggerType\` is never returned.`,
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
      `New \`instructions\` send the automation back to "pending_evaluation", which costs ${EVALUATION_COST} credit like the first evaluation (402 \`INSUFFICIENT_CREDITS\` and nothing changed when the balance is too low); so does a move to "pending_evaluation" through \`status\`.`,
      '`status` follows the transitions table (README, "Automations"); a move it does not allow is a 400 naming the allowed targets. Switching to `triggerType` "event" clears `cronExpression`.',
    ].join('\n\n'),
    input: AutomationUpdateInput,
    output: Automation,
    errors: ['INSUFFICIENT_CREDITS'],
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
  lifecycleOperation('approve', 'active', ['pending_approval'], 'Approve an automation', 'Moves an automation from "pending_approval" to "active": it runs from now on.'),
  lifecycleOperation('pause', 'paused', ['active'], 'Pause an automation', 'Moves an "active" automation to "paused": it does not run until resumed. Missed events and ticks are not replayed.'),
  lifecycleOperation('resume', 'active', ['paused', 'failed'], 'Resume an automation', 'Moves a "paused" (or "failed") automation back to "active" and resets its failure count.'),
  lifecycleOperation('archive', 'archived', 'any', 'Archive an automation', 'Moves an automation to "archived" from any status: it never runs again and cannot change status afterwards.', { destructive: true }),
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
