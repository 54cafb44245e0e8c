import { defineOperation, type Operation } from '../../core/operation.js';
import { Pagination } from '../../core/pagination.js';
import { toDate } from '../../core/schemas.js';
import { customers, customerTransactions } from '../../db/schema.js';
import { definedOnly } from '../../db/scoped.js';
import { childResource } from '../child-resource.js';
import { businessReference, createCustomer, customerRows, deleteCustomer, getCustomer, listCustomers, transactionRows, updateCustomer } from './customers.repository.js';
import {
  Customer,
  CustomerCreateInput,
  CustomerId,
  CustomerTransaction,
  CustomerUpdateInput,
  TransactionCreateFields,
  TransactionUpdateFields,
} from './customers.schemas.js';

const customerOperations: Operation[] = [
  defineOperation({
    id: 'customers.list',
    kind: 'list',
    method: 'GET',
    path: '/customers',
    summary: 'List customers',
    description: 'Customers of the organization, newest first by default.',
    input: Pagination.strict(),
    output: Customer,
    handler: (input, ctx) => listCustomers(ctx.db, ctx.orgId, input),
  }),
  defineOperation({
    id: 'customers.create',
    method: 'POST',
    event: 'customer.created',
    path: '/customers',
    summary: 'Create a customer',
    description: 'Every field is optional. `businessId` and `contactId` must name live records of the organization.',
    input: CustomerCreateInput,
    output: Customer,
    handler: (input, ctx) => createCustomer(ctx.db, ctx.orgId, input),
  }),
  defineOperation({
    id: 'customers.get',
    method: 'GET',
    path: '/customers/{id}',
    summary: 'Get a customer',
    input: CustomerId,
    output: Customer,
    handler: (input, ctx) => getCustomer(ctx.db, ctx.orgId, input.id),
  }),
  defineOperation({
    id: 'customers.update',
    method: 'PATCH',
    event: 'customer.updated',
    path: '/customers/{id}',
    summary: 'Update a customer',
    description: 'Only the fields present in the body are changed; null clears a field; `data` is replaced as a whole.',
    input: CustomerUpdateInput,
    output: Customer,
    handler: ({ id, ...body }, ctx) => updateCustomer(ctx.db, ctx.orgId, id, body),
  }),
  defineOperation({
    id: 'customers.delete',
    method: 'DELETE',
    event: 'customer.deleted',
    path: '/customers/{id}',
    summary: 'Delete a customer',
    description: 'Soft delete: the customer and its transactions get `deletedAt` and disappear from lists and gets.',
    input: CustomerId,
    output: Customer,
    handler: (input, ctx) => deleteCustomer(ctx.db, ctx.orgId, input.id),
  }),
];

/** A transaction's columns from a body: the date parsed, absent fields left out. */
const transactionValues = <B extends { transactionDate?: string | null | undefined }>({ transactionDate, ...rest }: B) =>
  definedOnly({ ...rest, transactionDate: toDate(transactionDate) });

const transactionOperations = childResource({
  area: 'customers',
  parent: 'customer',
  parentRows: customerRows,
  segment: 'transactions',
  action: 'transaction',
  param: 'transactionId',
  singular: 'transaction',
  plural: 'transactions',
  rows: transactionRows,
  parentColumn: customerTransactions.customerId,
  output: CustomerTransaction,
  present: (row) => row,
  // The total is cheap here (one customer's rows, index `customer_transactions_customer`).
  listDescription: 'Newest first by default. `meta.pagination.total` is included.',
  // Each write is one statement: the customer's liveness, its business as the default and the business a
  // body names are checked in it; an unknown customer or transaction is a 404 whatever the body names.
  oneStatement: true,
  // Absent businessId: the customer's own business (a null in the body means "none").
  fromParent: { businessId: customers.businessId },
  references: { businessId: businessReference },
  create: {
    summary: 'Add a transaction to a customer',
    description: "`amount`, `currency`, `status` and `type` are required. `businessId` defaults to the customer's business.",
    fields: TransactionCreateFields,
    toInsert: (body, customer, ctx) => ({
      ...transactionValues(body),
      amount: body.amount,
      currency: body.currency,
      status: body.status,
      type: body.type,
      customerId: customer.id,
      organizationId: ctx.orgId,
    }),
  },
  update: {
    method: 'PUT',
    description: 'Accepts partial bodies: only the fields present are changed, null clears `businessId`, `description` or `transactionDate`. 404 for an unknown transaction.',
    fields: TransactionUpdateFields,
    toPatch: (body) => transactionValues(body),
  },
  deleteDescription: 'Soft delete: the transaction gets `deletedAt` and disappears from lists and gets.',
});

export const customersOperations: Operation[] = [...customerOperations, ...transactionOperations];
