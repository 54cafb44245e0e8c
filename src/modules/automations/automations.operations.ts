import { z } from 'zod';
import { defineOperation, type Operation } from '../../core/operation.js';
import { Pagination } from '../../core/pagination.js';
import { IdParam } from '../../core/schemas.js';
import { createAutomation, deleteAutomation, getAutomation, listAutomations, updateAutomation } from './automations.repository.js';
import { Automation, AutomationCreateInput, AutomationUpdateInput, DEFAULT_STATUS, PLACEHOLDER_TRIGGER_EVENT } from './automations.schemas.js';

const AutomationId = z.strictObject({ id: IdParam('automation') });

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
    path: '/automations',
    summary: 'Create an automation (costs 1 credit)',
    description: [
      "Costs 1 credit (its instructions are evaluated), debited in the same transaction as the create; with too few credits the answer is 402 `INSUFFICIENT_CREDITS` and nothing is written.",
      `\`status\` defaults to "${DEFAULT_STATUS}". Without \`triggerEvent\` the placeholder "${PLACEHOLDER_TRIGGER_EVENT}" is stored.`,
      'Without `triggerType` it is inferred: "scheduled" when `cronExpression` is given or the instructions describe a schedule ("every Monday", "daily", "at 9am"), else "event". A scheduled automation needs a valid `cronExpression`; an event automation takes none. `triggerType` is never returned.',
    ].join('\n\n'),
    input: AutomationCreateInput,
    output: Automation,
    errors: ['INSUFFICIENT_CREDITS'],
    handler: (input, ctx) => createAutomation(ctx.db, ctx.orgId, ctx.actorId, input),
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
    path: '/automations/{id}',
    summary: 'Update an automation',
    description:
      'Only the fields present in the body are changed; null clears a nullable field. Free of charge. A scheduled automation keeps a valid `cronExpression`; switching to `triggerType` "event" clears it.',
    input: AutomationUpdateInput,
    output: Automation,
    handler: ({ id, ...patch }, ctx) => updateAutomation(ctx.db, ctx.orgId, id, patch),
  }),
  defineOperation({
    id: 'automations.delete',
    method: 'DELETE',
    path: '/automations/{id}',
    summary: 'Delete an automation',
    description: 'Soft delete: the automation gets `deletedAt` and disappears from lists and gets.',
    input: AutomationId,
    output: Automation,
    handler: (input, ctx) => deleteAutomation(ctx.db, ctx.orgId, input.id),
  }),
];
