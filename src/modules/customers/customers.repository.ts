import { sql } from 'drizzle-orm';
import type { Page, PageInput } from '../../core/pagination.js';
import { toDate } from '../../core/schemas.js';
import type { DbOrTx } from '../../db/client.js';
import { customers, customerTransactions } from '../../db/schema.js';
import { definedOnly, scopedRepository, softDeleteLive } from '../../db/scoped.js';
import { orgId, scopedWrites, type Reference } from '../../db/scoped-writes.js';
import { businessRows } from '../businesses/businesses.repository.js';
import { contactRows } from '../contacts/contacts.repository.js';

export const customerRows = scopedRepository(customers, 'Customer');
export const transactionRows = scopedRepository(customerTransactions, 'Customer transaction');

type Customer = typeof customers.$inferSelect;

/** The reference to a business that customers and their transactions may hold (a live business of the organization). */
export const businessReference: Reference = { table: businessRows.table, message: 'No business with this id exists in the organization' };
const contactReference: Reference = { table: contactRows.table, message: 'No contact with this id exists in the organization' };

// ------------------------------------------------------------------ customers

export interface CustomerBody {
  businessId?: string | null | undefined;
  contactId?: string | null | undefined;
  type?: string | null | undefined;
  name?: string | null | undefined;
  email?: string | null | undefined;
  phone?: string | null | undefined;
  notes?: string | null | undefined;
  status?: string | null | undefined;
  customerSince?: string | null | undefined;
  data?: Record<string, unknown> | undefined;
}

const customerValues = ({ customerSince, ...rest }: CustomerBody) => definedOnly({ ...rest, customerSince: toDate(customerSince) });

export const listCustomers = (db: DbOrTx, orgId: string, page: PageInput): Promise<Page<Customer>> => customerRows.list(db, orgId, page);

export const getCustomer = (db: DbOrTx, orgId: string, id: string) => customerRows.get(db, orgId, id);

/**
 * One statement each: the business and the contact a body names are checked in it (an unknown customer is
 * a 404 whatever the body names), and a delete takes the customer's transactions with it.
 */
const customerWrites = scopedWrites<Customer, Omit<typeof customers.$inferInsert, 'organizationId'>>({
  table: customers,
  label: 'Customer',
  references: { businessId: businessReference, contactId: contactReference },
  cascade: (db) => [softDeleteLive(db, customerTransactions, orgId, sql`${customerTransactions.customerId} IN (SELECT id FROM written)`).getSQL()],
});

export const createCustomer = (db: DbOrTx, org: string, body: CustomerBody) => customerWrites.insert(db, org, customerValues(body));

export const updateCustomer = (db: DbOrTx, org: string, id: string, body: CustomerBody) => customerWrites.update(db, org, id, customerValues(body));

/** Soft-deletes the customer and its transactions together. */
export const deleteCustomer = (db: DbOrTx, org: string, id: string) => customerWrites.softDelete(db, org, id);
