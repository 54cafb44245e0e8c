import { and, asc, eq, isNull, sql } from 'drizzle-orm';
import parsePhoneNumber from 'libphonenumber-js/max';
import { notFound } from '../../core/errors.js';
import { pageOrder, pageWindow, type Page, type PageInput } from '../../core/pagination.js';
import type { DbOrTx } from '../../db/client.js';
import { contactAddresses, contactEmails, contactPhoneNumbers, contacts } from '../../db/schema.js';
import { scopedRepository } from '../../db/scoped.js';

export const contactRows = scopedRepository(contacts, 'Contact');
export const emailRows = scopedRepository(contactEmails, 'Contact email');
export const phoneNumberRows = scopedRepository(contactPhoneNumbers, 'Contact phone number');
export const addressRows = scopedRepository(contactAddresses, 'Contact address');

/** The three child lists, live rows oldest first, fetched in the same query as their contacts. */
const withChildren = {
  emails: { where: isNull(contactEmails.deletedAt), orderBy: [asc(contactEmails.createdAt), asc(contactEmails.id)] },
  phoneNumbers: { where: isNull(contactPhoneNumbers.deletedAt), orderBy: [asc(contactPhoneNumbers.createdAt), asc(contactPhoneNumbers.id)] },
  addresses: { where: isNull(contactAddresses.deletedAt), orderBy: [asc(contactAddresses.createdAt), asc(contactAddresses.id)] },
};

/**
 * The two hot reads run as prepared statements: building the relational query and having PostgreSQL plan
 * it again for every request cost more than executing it (about 1 ms of planning for 0.3 ms of execution).
 * Prepared once per database handle (a transaction handle just prepares its own), named so node-postgres
 * keeps the plan on each pooled connection.
 */
const org = sql.placeholder('orgId');
const prepareGet = (db: DbOrTx) =>
  db.query.contacts
    .findFirst({ where: and(eq(contacts.organizationId, org), isNull(contacts.deletedAt), eq(contacts.id, sql.placeholder('id'))), with: withChildren })
    .prepare('contacts_get');
const prepareList = (db: DbOrTx, dir: 'asc' | 'desc') =>
  db.query.contacts
    .findMany({
      where: and(eq(contacts.organizationId, org), isNull(contacts.deletedAt)),
      with: withChildren,
      orderBy: pageOrder({ sortOrder: dir, limit: 1, offset: 0 }, contacts.createdAt, contacts.id),
      limit: sql.placeholder('limit'),
      offset: sql.placeholder('offset'),
    })
    .prepare(`contacts_list_${dir}`);
const prepared = new WeakMap<DbOrTx, { get: ReturnType<typeof prepareGet>; asc: ReturnType<typeof prepareList>; desc: ReturnType<typeof prepareList> }>();
function statements(db: DbOrTx) {
  let found = prepared.get(db);
  if (!found) {
    found = { get: prepareGet(db), asc: prepareList(db, 'asc'), desc: prepareList(db, 'desc') };
    prepared.set(db, found);
  }
  return found;
}

export async function getContact(db: DbOrTx, orgId: string, id: string) {
  const row = await statements(db).get.execute({ orgId, id });
  if (!row) throw notFound('Contact');
  return row;
}

export type ContactWithChildren = Awaited<ReturnType<typeof getContact>>;

export async function listContacts(db: DbOrTx, orgId: string, page: PageInput): Promise<Page<ContactWithChildren>> {
  const items = await statements(db)[page.sortOrder].execute({ orgId, ...pageWindow(page) });
  return { items };
}

export async function createContact(db: DbOrTx, orgId: string, values: Omit<typeof contacts.$inferInsert, 'organizationId'>) {
  const row = await contactRows.insert(db, { ...values, organizationId: orgId });
  return { ...row, emails: [], phoneNumbers: [], addresses: [] } satisfies ContactWithChildren;
}

export async function updateContact(db: DbOrTx, orgId: string, id: string, patch: Partial<typeof contacts.$inferInsert>) {
  await contactRows.update(db, orgId, id, patch);
  return getContact(db, orgId, id);
}

/** Soft-deletes the contact and its emails, phone numbers and addresses together. */
export async function deleteContact(db: DbOrTx, orgId: string, id: string) {
  return db.transaction(async (tx) => {
    const contact = await getContact(tx, orgId, id);
    const deleted = await contactRows.softDelete(tx, orgId, id);
    for (const table of [contactEmails, contactPhoneNumbers, contactAddresses]) {
      await tx
        .update(table)
        .set({ deletedAt: sql`now()`, updatedAt: sql`now()` })
        .where(and(eq(table.organizationId, orgId), eq(table.contactId, id), isNull(table.deletedAt)));
    }
    return { ...contact, ...deleted, emails: [], phoneNumbers: [], addresses: [] };
  });
}

/** 404 unless the contact is live in the organization. */
export async function assertContact(db: DbOrTx, orgId: string, id: string) {
  if (!(await contactRows.exists(db, orgId, id))) throw notFound('Contact');
}

/** `countryCode` and `nationalNumber` derived from an international number; the number stored as E.164. */
export function phoneParts(phoneNumber: string) {
  const parsed = parsePhoneNumber(phoneNumber);
  if (!parsed) throw new Error('phone number was validated by the schema');
  return { phoneNumber: parsed.number, countryCode: parsed.countryCallingCode, nationalNumber: parsed.nationalNumber };
}
