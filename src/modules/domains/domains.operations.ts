import { z } from 'zod';
import { defineOperation, type Operation } from '../../core/operation.js';
import { Pagination } from '../../core/pagination.js';
import {
  createDomain,
  createRegistration,
  deleteDomain,
  deleteRegistration,
  domainRows,
  getRegistration,
  listRegistrations,
  updateRegistration,
} from './domains.repository.js';
import {
  Domain,
  DomainCreateInput,
  DomainIdParam,
  DomainRegistration,
  RegistrationCreateFields,
  RegistrationIds,
  RegistrationUpdateFields,
} from './domains.schemas.js';

const DomainId = z.strictObject(DomainIdParam);
const RegistrationId = z.strictObject(RegistrationIds);

export const domainsOperations: Operation[] = [
  defineOperation({
    id: 'domains.list',
    kind: 'list',
    method: 'GET',
    path: '/domains',
    summary: 'List domains',
    input: Pagination.strict(),
    output: Domain,
    handler: (input, ctx) => domainRows.list(ctx.db, ctx.orgId, input),
  }),
  defineOperation({
    id: 'domains.create',
    method: 'POST',
    path: '/domains',
    summary: 'Add a domain',
    description:
      'The name is stored in canonical form: lowercase, without a trailing dot, internationalised names in punycode. A name that already exists (live) in the organization is refused with 400 at `name`.',
    input: DomainCreateInput,
    output: Domain,
    handler: (input, ctx) => createDomain(ctx.db, ctx.orgId, ctx.actorId, input.name),
  }),
  defineOperation({
    id: 'domains.get',
    method: 'GET',
    path: '/domains/{id}',
    summary: 'Get a domain',
    input: DomainId,
    output: Domain,
    handler: (input, ctx) => domainRows.get(ctx.db, ctx.orgId, input.id),
  }),
  defineOperation({
    id: 'domains.delete',
    method: 'DELETE',
    path: '/domains/{id}',
    summary: 'Delete a domain and its registrations',
    description: 'Soft delete: the domain and its registrations get `deletedAt` and disappear from lists and gets. The name can then be added again.',
    input: DomainId,
    output: Domain,
    handler: (input, ctx) => deleteDomain(ctx.db, ctx.orgId, input.id),
  }),
  defineOperation({
    id: 'domains.list_registrations',
    kind: 'list',
    method: 'GET',
    path: '/domains/{id}/registrations',
    summary: "List a domain's registrations",
    input: Pagination.extend(DomainIdParam).strict(),
    output: DomainRegistration,
    handler: ({ id, ...page }, ctx) => listRegistrations(ctx.db, ctx.orgId, id, page),
  }),
  defineOperation({
    id: 'domains.create_registration',
    method: 'POST',
    path: '/domains/{id}/registrations',
    summary: 'Record a registration of a domain',
    description: 'Every field is optional: `state` defaults to "pending", the three flags to true, `period` to 1 year.',
    input: z.strictObject({ ...DomainIdParam, ...RegistrationCreateFields }),
    output: DomainRegistration,
    handler: ({ id, ...values }, ctx) => createRegistration(ctx.db, ctx.orgId, ctx.actorId, id, values),
  }),
  defineOperation({
    id: 'domains.get_registration',
    method: 'GET',
    path: '/domains/{id}/registrations/{registrationId}',
    summary: "Get a domain's registration",
    input: RegistrationId,
    output: DomainRegistration,
    handler: (input, ctx) => getRegistration(ctx.db, ctx.orgId, input.id, input.registrationId),
  }),
  defineOperation({
    id: 'domains.update_registration',
    method: 'PUT',
    path: '/domains/{id}/registrations/{registrationId}',
    summary: "Update a domain's registration",
    description: 'Partial updates are accepted exactly as PATCH would: only the fields present in the body are changed; null clears `externalDomainId` or `externalId`.',
    input: z.strictObject({ ...RegistrationIds, ...RegistrationUpdateFields }),
    output: DomainRegistration,
    handler: ({ id, registrationId, ...patch }, ctx) => updateRegistration(ctx.db, ctx.orgId, id, registrationId, patch),
  }),
  defineOperation({
    id: 'domains.delete_registration',
    method: 'DELETE',
    path: '/domains/{id}/registrations/{registrationId}',
    summary: "Delete a domain's registration",
    description: 'Soft delete: the registration gets `deletedAt` and disappears from lists and gets.',
    input: RegistrationId,
    output: DomainRegistration,
    handler: (input, ctx) => deleteRegistration(ctx.db, ctx.orgId, input.id, input.registrationId),
  }),
];
