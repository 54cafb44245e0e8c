import { defineOperation, type Operation } from '../../core/operation.js';
import { Pagination } from '../../core/pagination.js';
import { ShortText } from '../../core/schemas.js';
import { contactAddresses, contactEmails, contactPhoneNumbers } from '../../db/schema.js';
import { childResource } from '../child-resource.js';
import {
  addressRows,
  contactRows,
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
  ContactId,
  ContactPhoneNumber,
  ContactPhoneNumberCreate,
  ContactPhoneNumberUpdate,
  ContactUpdateInput,
} from './contacts.schemas.js';

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
    input: ContactId,
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
    input: ContactId,
    output: Contact,
    handler: (input, ctx) => deleteContact(ctx.db, ctx.orgId, input.id),
  }),
];

/** What the three child lists of a contact share. */
const ofContact = { area: 'contacts', parent: 'contact', parentRows: contactRows, oneStatement: true } as const;
const patchOnly = { method: 'PATCH', description: 'Only the fields present in the body are changed.' } as const;

export const contactsOperations: Operation[] = [
  ...contactOperations,
  ...childResource({
    ...ofContact,
    segment: 'emails',
    action: 'email',
    param: 'emailId',
    singular: 'email address',
    plural: 'email addresses',
    rows: emailRows,
    parentColumn: contactEmails.contactId,
    output: ContactEmail,
    present: (row) => row,
    create: { summary: 'Add an email address to a contact', fields: ContactEmailCreate, toInsert: (body, contact, ctx) => ({ ...body, contactId: contact.id, organizationId: ctx.orgId }) },
    update: { ...patchOnly, fields: ContactEmailUpdate, toPatch: (body) => body },
  }),
  ...childResource({
    ...ofContact,
    segment: 'phone-numbers',
    action: 'phone_number',
    param: 'phoneNumberId',
    singular: 'phone number',
    plural: 'phone numbers',
    rows: phoneNumberRows,
    parentColumn: contactPhoneNumbers.contactId,
    output: ContactPhoneNumber,
    present: (row) => row,
    create: {
      summary: 'Add a phone number to a contact',
      fields: ContactPhoneNumberCreate,
      // The number is stored as E.164 with its country code and national number derived from it.
      toInsert: (body, contact, ctx) => ({ ...body, ...phoneParts(body.phoneNumber), contactId: contact.id, organizationId: ctx.orgId }),
    },
    update: { ...patchOnly, fields: ContactPhoneNumberUpdate, toPatch: (body) => (body.phoneNumber === undefined ? body : { ...body, ...phoneParts(body.phoneNumber) }) },
  }),
  ...childResource({
    ...ofContact,
    segment: 'addresses',
    action: 'address',
    param: 'addressId',
    singular: 'address',
    plural: 'addresses',
    rows: addressRows,
    parentColumn: contactAddresses.contactId,
    output: ContactAddress,
    present: (row) => row,
    create: { summary: 'Add an address to a contact', fields: ContactAddressCreate, toInsert: (body, contact, ctx) => ({ ...body, contactId: contact.id, organizationId: ctx.orgId }) },
    update: { ...patchOnly, fields: ContactAddressUpdate, toPatch: (body) => body },
  }),
];
