import { eq } from 'drizzle-orm';
import { fieldError } from '../../core/errors.js';
import type { Page, PageInput } from '../../core/pagination.js';
import { toDate } from '../../core/schemas.js';
import type { DbOrTx } from '../../db/client.js';
import { customers, customerTransactions } from '../../db/schema.js';
import { definedOnly, scopedRepository, softDeleteLive } from '../../db/scoped.js';
import { businessRows } from '../businesses/businesses.repository.js';
import { contactRows } from '../contacts/contacts.repository.js';

export const customerRows = scopedRepository(customers, 'Customer');
export const transactionRows = scopedRepository(customerTransactions, 'Customer transaction');

type Customer = typeof customers.$inferSelect;

/** The reference to a business that customers and their transactions may hold (a live business of the organization). */
export const businessReference = { table: businessRows.table, message: 'No business with this id exists in the organization' };

/** A reference in a body must name a live record of the caller's organization; otherwise it is the client's input error. */
export async function assertRefs(db: DbOrTx, orgId: string, refs: { businessId?: string | null | undefined; contactId?: string | null | undefined }) {
  if (refs.businessId && !(await businessRows.exists(db, orgId, refs.businessId))) {
    throw fieldError('businessId', businessReference.message);
  }
  if (refs.contactId && !(await contactRows.exists(db, orgId, refs.contactId))) {
    throw fieldError('contactId', 'No contact with this id exists in the organization');
  }
}

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

export async function createCustomer(db: DbOrTx, orgId: string, body: CustomerBody) {
  await assertRefs(db, orgId, body);
  return customerRows.insert(db, { ...customerValues(body), organizationId: orgId });
}

export async function updateCustomer(db: DbOrTx, orgId: string, id: string, body: CustomerBody) {
  // The customer first, so an unknown id is a 404 whatever the body names.
  await customerRows.get(db, orgId, id);
  await assertRefs(db, orgId, body);
  return customerRows.update(db, orgId, id, customerValues(body));
}

/** Soft-deletes the customer and its transactions together. */
export async function deleteCustomer(db: DbOrTx, orgId: string, id: string) {
  return db.transaction(async (tx) => {
    const deleted = await customerRows.softDelete(tx, orgId, id);
    await softDeleteLive(tx, customerTransactions, orgId, eq(customerTransactions.customerId, id));
    return deleted;
  });
}
