import { eq } from 'drizzle-orm';
import { z } from 'zod';
import { defineOperation, type Operation } from '../../core/operation.js';
import { Pagination } from '../../core/pagination.js';
import { IdParam, ShortText } from '../../core/schemas.js';
import type { contactEmails } from '../../db/schema.js';
import type { ScopedTable, scopedRepository } from '../../db/scoped.js';
import {
  addressRows,
  assertContact,
  createContact,
  deleteContact,
  emailRows,
  getContact,
  listContacts,
  phoneNumberRows,
  phoneParts,
  updateContact,
} from './contacts.repository.js';
import {
  Contact,
  ContactAddress,
  ContactAddressCreate,
  ContactAddressUpdate,
  ContactCreateInput,
  ContactEmail,
  ContactEmailCreate,
  ContactEmailUpdate,
  ContactPhoneNumber,
  ContactPhoneNumberCreate,
  ContactPhoneNumberUpdate,
  ContactUpdateInput,
} from './contacts.schemas.js';

const ContactId = { id: IdParam('contact') };

const contactOperations: Operation[] = [
  defineOperation({
    id: 'contacts.list',
    kind: 'list',
    method: 'GET',
    path: '/contacts',
    summary: 'List contacts',
    description:
      'Contacts of the organization, each with its emails, phone numbers and addresses embedded. `name`, `email` and `phone` find contacts without paging through all of them (all given filters apply).',
    input: Pagination.extend({
      name: ShortText(200).optional().describe('Words that must all appear in the name, first or last name or company (case-insensitive)'),
      email: ShortText(320).optional().describe('An email address of the contact, exactly (case-insensitive)'),
      phone: ShortText(64).optional().describe('A phone number of the contact, in any format: its digits are matched (the end of the number)'),
    }).strict(),
    output: Contact,
    handler: (input, ctx) => listContacts(ctx.db, ctx.orgId, input),
  }),
  defineOperation({
    id: 'contacts.create',
    method: 'POST',
    event: 'contact.created',
    path: '/contacts',
    summary: 'Create a contact',
    description: 'Every field is optional. Emails, phone numbers and addresses are added through their own operations.',
    input: ContactCreateInput,
    output: Contact,
    handler: (input, ctx) => createContact(ctx.db, ctx.orgId, input),
  }),
  defineOperation({
    id: 'contacts.get',
    method: 'GET',
    path: '/contacts/{id}',
    summary: 'Get a contact',
    description: 'The contact with its emails, phone numbers and addresses embedded.',
    input: z.strictObject(ContactId),
    output: Contact,
    handler: (input, ctx) => getContact(ctx.db, ctx.orgId, input.id),
  }),
  defineOperation({
    id: 'contacts.update',
    method: 'PATCH',
    event: 'contact.updated',
    path: '/contacts/{id}',
    summary: 'Update a contact',
    description: 'Only the fields present in the body are changed; null clears a field.',
    input: ContactUpdateInput,
    output: Contact,
    handler: ({ id, ...patch }, ctx) => updateContact(ctx.db, ctx.orgId, id, patch),
  }),
  defineOperation({
    id: 'contacts.delete',
    method: 'DELETE',
    event: 'contact.deleted',
    path: '/contacts/{id}',
    summary: 'Delete a contact',
    description: 'Soft delete: the contact and its emails, phone numbers and addresses get `deletedAt` and disappear from lists and gets.',
    input: z.strictObject(ContactId),
    output: Contact,
    handler: (input, ctx) => deleteContact(ctx.db, ctx.orgId, input.id),
  }),
];

type Rows = ReturnType<typeof scopedRepository<ScopedTable & { contactId: typeof contactEmails.contactId }>>;

/**
 * The five operations of a contact's child list (emails, phone numbers, addresses), all under
 * `/contacts/{id}/<segment>`, all answering 404 when the contact is not live in the organization.
 */
function childOperations(spec: {
  action: string;
  segment: string;
  param: string;
  singular: string;
  plural: string;
  rows: Rows;
  output: z.ZodType;
  create: Record<string, z.ZodType>;
  update: Record<string, z.ZodType>;
  /** Derived columns, computed from the validated body. */
  derive?: (body: Record<string, unknown>) => Record<string, unknown>;
}): Operation[] {
  const { rows } = spec;
  const parent = { id: IdParam('contact') };
  const ids = { ...parent, [spec.param]: IdParam(spec.singular) };
  const path = `/contacts/{id}/${spec.segment}`;
  const item = `${path}/{${spec.param}}`;
  const ofContact = (contactId: string) => eq(rows.table.contactId, contactId);
  const derive = spec.derive ?? ((b) => b);
  const child = (input: Record<string, unknown>) => input[spec.param] as string;

  return [
    defineOperation({
      id: `contacts.list_${spec.segment.replace('-', '_')}`,
      kind: 'list',
      method: 'GET',
      path,
      summary: `List a contact's ${spec.plural}`,
      input: Pagination.extend(parent).strict(),
      output: spec.output,
      handler: async (input, ctx) => {
        await assertContact(ctx.db, ctx.orgId, input.id);
        return rows.list(ctx.db, ctx.orgId, input, { where: ofContact(input.id), withTotal: true }) as never;
      },
    }),
    defineOperation({
      id: `contacts.create_${spec.action}`,
      method: 'POST',
      event: `contact.${spec.action}.created`,
      path,
      summary: `Add ${spec.singular.startsWith('a') || spec.singular.startsWith('e') ? 'an' : 'a'} ${spec.singular} to a contact`,
      input: z.strictObject({ ...parent, ...spec.create }),
      output: spec.output,
      handler: async ({ id, ...body }, ctx) => {
        await assertContact(ctx.db, ctx.orgId, id);
        return rows.insert(ctx.db, { ...derive(body), contactId: id, organizationId: ctx.orgId } as never) as never;
      },
    }),
    defineOperation({
      id: `contacts.get_${spec.action}`,
      method: 'GET',
      path: item,
      summary: `Get a contact's ${spec.singular}`,
      input: z.strictObject(ids),
      output: spec.output,
      handler: async (input, ctx) => rows.get(ctx.db, ctx.orgId, child(input), ofContact(input.id as string)) as never,
    }),
    defineOperation({
      id: `contacts.update_${spec.action}`,
      method: 'PATCH',
      event: `contact.${spec.action}.updated`,
      path: item,
      summary: `Update a contact's ${spec.singular}`,
      description: 'Only the fields present in the body are changed.',
      input: z.strictObject({ ...ids, ...spec.update }),
      output: spec.output,
      handler: async (input, ctx) => {
        const { id, [spec.param]: childId, ...body } = input as Record<string, unknown>;
        return rows.update(ctx.db, ctx.orgId, childId as string, derive(body) as never, ofContact(id as string)) as never;
      },
    }),
    defineOperation({
      id: `contacts.delete_${spec.action}`,
      method: 'DELETE',
      event: `contact.${spec.action}.deleted`,
      path: item,
      summary: `Delete a contact's ${spec.singular}`,
      description: 'Soft delete: the record gets `deletedAt` and disappears from lists and gets.',
      input: z.strictObject(ids),
      output: spec.output,
      handler: async (input, ctx) => rows.softDelete(ctx.db, ctx.orgId, child(input), ofContact(input.id as string)) as never,
    }),
  ];
}

export const contactsOperations: Operation[] = [
  ...contactOperations,
  ...childOperations({
    action: 'email',
    segment: 'emails',
    param: 'emailId',
    singular: 'email address',
    plural: 'email addresses',
    rows: emailRows as unknown as Rows,
    output: ContactEmail,
    create: ContactEmailCreate,
    update: ContactEmailUpdate,
  }),
  ...childOperations({
    action: 'phone_number',
    segment: 'phone-numbers',
    param: 'phoneNumberId',
    singular: 'phone number',
    plural: 'phone numbers',
    rows: phoneNumberRows as unknown as Rows,
    output: ContactPhoneNumber,
    create: ContactPhoneNumberCreate,
    update: ContactPhoneNumberUpdate,
    derive: (body) => (typeof body.phoneNumber === 'string' ? { ...body, ...phoneParts(body.phoneNumber) } : body),
  }),
  ...childOperations({
    action: 'address',
    segment: 'addresses',
    param: 'addressId',
    singular: 'address',
    plural: 'addresses',
    rows: addressRows as unknown as Rows,
    output: ContactAddress,
    create: ContactAddressCreate,
    update: ContactAddressUpdate,
  }),
];
