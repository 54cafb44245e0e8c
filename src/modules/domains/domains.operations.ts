import { z } from 'zod';
import { defineOperation, type Operation } from '../../core/operation.js';
import { Pagination } from '../../core/pagination.js';
import { domainRegistrations } from '../../db/schema.js';
import { childResource } from '../child-resource.js';
import { createDomain, deleteDomain, domainDnsRecords, domainRows, getDomain, listDomains, registrationRows, rotateDkimKey, verifyDomain } from './domains.repository.js';
import { DnsRecord, Domain, DomainCreateInput, DomainId, DomainRegistration, RegistrationCreateFields, RegistrationUpdateFields } from './domains.schemas.js';

const domainOperations: Operation[] = [
  defineOperation({
    id: 'domains.list',
    kind: 'list',
    method: 'GET',
    path: '/domains',
    summary: 'List domains',
    input: Pagination.strict(),
    output: Domain,
    handler: (input, ctx) => listDomains(ctx.db, ctx.orgId, input),
  }),
  defineOperation({
    id: 'domains.create',
    method: 'POST',
    event: 'domain.created',
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
    handler: (input, ctx) => getDomain(ctx.db, ctx.orgId, input.id),
  }),
  defineOperation({
    id: 'domains.rotate_dkim_key',
    method: 'POST',
    // A second call replaces the signing key (the previous one stops signing): it replaces a secret.
    effects: { destructive: true },
    event: 'domain.updated',
    path: '/domains/{id}/dkim-key',
    summary: 'Generate a DKIM signing key for the domain',
    description:
      'Generates an RSA 2048 key under a new selector and answers the domain with its `dkim` (the public part: the private key is stored encrypted and never returned). ' +
      'From then on, mail sent through a channel whose address is at this domain is DKIM-signed (d=<domain>, s=<selector>). ' +
      'Publish the DKIM record of `GET /domains/{id}/dns-records` first. Calling it again rotates the key: the previous one stops signing at once. ' +
      'With PostgreSQL the server needs its SECRETS_KEY to store the key (400 otherwise).',
    input: DomainId,
    output: Domain,
    handler: (input, ctx) => rotateDkimKey(ctx.db, ctx.orgId, input.id, new Date()),
  }),
  defineOperation({
    id: 'domains.verify',
    method: 'POST',
    status: 200,
    // The event's transaction is open across the DNS lookup: `resolveTxt` gives it one try of 1.5 s at most.
    event: 'domain.updated',
    path: '/domains/{id}/verify',
    summary: 'Verify that the organization owns the domain',
    description:
      'Looks up the TXT record `_switchboard.<domain>` and marks the domain verified when it holds `verification.token` (publish `verification.record` first). ' +
      'Receiving mail at an address of the domain through the SMTP receiver, and naming an address of it as a channel\'s `outbound.from`, need it verified. ' +
      'A domain already verified answers as it is. 400 when the record is not found (yet: new records can take minutes to be seen); ' +
      '409 `CONFLICT` when another organization has verified the domain (a domain belongs to one organization; its owner is not named).',
    effects: { openWorld: true },
    errors: ['CONFLICT'],
    input: DomainId,
    output: Domain,
    handler: (input, ctx) => verifyDomain(ctx.db, ctx.orgId, input.id, new Date()),
  }),
  defineOperation({
    id: 'domains.dns_records',
    method: 'GET',
    path: '/domains/{id}/dns-records',
    summary: 'List the DNS records to publish for the domain',
    description:
      'What to publish for mail at this domain: MX (to the service\'s SMTP receiver, the host of its public URL), SPF (the relays of the channels at the domain), ' +
      'DKIM (once a key exists, see `POST /domains/{id}/dkim-key`) and DMARC (reporting only, to start with).',
    input: DomainId,
    output: z.array(DnsRecord),
    handler: (input, ctx) => domainDnsRecords(ctx.db, ctx.orgId, input.id),
  }),
  defineOperation({
    id: 'domains.delete',
    method: 'DELETE',
    event: 'domain.deleted',
    path: '/domains/{id}',
    summary: 'Delete a domain and its registrations',
    description: 'Soft delete: the domain and its registrations get `deletedAt` and disappear from lists and gets. The name can then be added again.',
    input: DomainId,
    output: Domain,
    handler: (input, ctx) => deleteDomain(ctx.db, ctx.orgId, input.id),
  }),
];

const registrationOperations = childResource({
  area: 'domains',
  parent: 'domain',
  parentRows: domainRows,
  segment: 'registrations',
  action: 'registration',
  param: 'registrationId',
  singular: 'registration',
  plural: 'registrations',
  idLabel: 'domain registration',
  rows: registrationRows,
  parentColumn: domainRegistrations.domainId,
  output: DomainRegistration,
  present: (row) => row,
  create: {
    summary: 'Record a registration of a domain',
    description: 'Every field is optional: `state` defaults to "pending", the three flags to true, `period` to 1 year.',
    fields: RegistrationCreateFields,
    toInsert: (body, domain, ctx) => ({ ...body, organizationId: ctx.orgId, domainId: domain.id, createdBy: ctx.actorId }),
  },
  update: {
    method: 'PUT',
    description: 'Partial updates are accepted exactly as PATCH would: only the fields present in the body are changed; null clears `externalDomainId` or `externalId`.',
    fields: RegistrationUpdateFields,
    toPatch: (body) => body,
  },
  deleteDescription: 'Soft delete: the registration gets `deletedAt` and disappears from lists and gets.',
  oneStatement: true,
});

export const domainsOperations: Operation[] = [...domainOperations, ...registrationOperations];
