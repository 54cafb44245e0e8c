import { defineOperation, type Operation } from '../../core/operation.js';
import { Pagination } from '../../core/pagination.js';
import { definedOnly } from '../../db/scoped.js';
import { businessRows, businessWrites } from './businesses.repository.js';
import { Business, BusinessCreateInput, BusinessId, BusinessUpdateInput } from './businesses.schemas.js';

export const businessesOperations: Operation[] = [
  defineOperation({
    id: 'businesses.list',
    kind: 'list',
    method: 'GET',
    path: '/businesses',
    summary: 'List businesses',
    description: 'Businesses of the organization, newest first by default.',
    input: Pagination.strict(),
    output: Business,
    handler: (input, ctx) => businessRows.list(ctx.db, ctx.orgId, input),
  }),
  defineOperation({
    id: 'businesses.create',
    method: 'POST',
    event: 'business.created',
    path: '/businesses',
    summary: 'Create a business',
    description: '`name` is required. `createdBy` is the API key (or signed-in user) making the request.',
    input: BusinessCreateInput,
    output: Business,
    handler: (input, ctx) => businessWrites.insert(ctx.db, ctx.orgId, { ...definedOnly(input), name: input.name, createdBy: ctx.actorId }),
  }),
  defineOperation({
    id: 'businesses.get',
    method: 'GET',
    path: '/businesses/{id}',
    summary: 'Get a business',
    input: BusinessId,
    output: Business,
    handler: (input, ctx) => businessRows.get(ctx.db, ctx.orgId, input.id),
  }),
  defineOperation({
    id: 'businesses.update',
    method: 'PATCH',
    event: 'business.updated',
    path: '/businesses/{id}',
    summary: 'Update a business',
    description: 'Only the fields present in the body are changed; `data` is replaced as a whole.',
    input: BusinessUpdateInput,
    output: Business,
    handler: ({ id, ...patch }, ctx) => businessWrites.update(ctx.db, ctx.orgId, id, definedOnly(patch)),
  }),
  defineOperation({
    id: 'businesses.delete',
    method: 'DELETE',
    event: 'business.deleted',
    path: '/businesses/{id}',
    summary: 'Delete a business',
    description:
      'Soft delete: the business gets `deletedAt` and disappears from lists and gets. Customers and transactions that name it keep their `businessId`.',
    input: BusinessId,
    output: Business,
    handler: (input, ctx) => businessWrites.softDelete(ctx.db, ctx.orgId, input.id),
  }),
];
