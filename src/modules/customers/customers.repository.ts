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
type Transaction = typeof customerTransactions.$inferSelect;

/** A reference in a body must name a live record of the caller's organization; otherwise it is the client's input error. */
async function assertRefs(db: DbOrTx, orgId: string, refs: { businessId?: string | null | undefined; contactId?: string | null | undefined }) {
  if (refs.businessId && !(await businessRows.exists(db, orgId, refs.businessId))) {
    throw fieldError('businessId', 'No business with this id exists in the organization');
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

// ------------------------------------------------------------------ transactions

export interface TransactionBody {
  businessId?: string | null | undefined;
  amount?: string | undefined;
  currency?: string | undefined;
  status?: string | undefined;
  type?: string | undefined;
  description?: string | null | undefined;
  transactionDate?: string | null | undefined;
}

const transactionValues = ({ transactionDate, ...rest }: TransactionBody) => definedOnly({ ...rest, transactionDate: toDate(transactionDate) });
const ofCustomer = (customerId: string) => eq(customerTransactions.customerId, customerId);

/**
 * A customer's transactions. The total is cheap here (one customer's rows, index
 * `customer_transactions_customer`), so it is included. 404 unless the customer is live.
 */
export async function listTransactions(db: DbOrTx, orgId: string, customerId: string, page: PageInput): Promise<Page<Transaction>> {
  await customerRows.get(db, orgId, customerId);
  return transactionRows.list(db, orgId, page, { where: ofCustomer(customerId), withTotal: true });
}

export async function createTransaction(
  db: DbOrTx,
  orgId: string,
  customerId: string,
  body: TransactionBody & Required<Pick<TransactionBody, 'amount' | 'currency' | 'status' | 'type'>>,
) {
  const customer = await customerRows.get(db, orgId, customerId);
  await assertRefs(db, orgId, body);
  return transactionRows.insert(db, {
    // Absent businessId: the customer's own business (a null in the body means "none").
    businessId: customer.businessId,
    ...transactionValues(body),
    amount: body.amount,
    currency: body.currency,
    status: body.status,
    type: body.type,
    customerId,
    organizationId: orgId,
  });
}

// A customer's soft delete also deletes its transactions, so scoping by customer id is enough for gets and writes.
export const getTransaction = (db: DbOrTx, orgId: string, customerId: string, id: string) => transactionRows.get(db, orgId, id, ofCustomer(customerId));

export async function updateTransaction(db: DbOrTx, orgId: string, customerId: string, id: string, body: TransactionBody) {
  await transactionRows.get(db, orgId, id, ofCustomer(customerId));
  await assertRefs(db, orgId, body);
  return transactionRows.update(db, orgId, id, transactionValues(body), ofCustomer(customerId));
}

export const deleteTransaction = (db: DbOrTx, orgId: string, customerId: string, id: string) =>
  transactionRows.softDelete(db, orgId, id, ofCustomer(customerId));
