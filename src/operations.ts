import type { Operation } from './core/operation.js';
import { channelsOperations } from './modules/channels/channels.operations.js';
import { automationsOperations } from './modules/automations/automations.operations.js';
import { businessesOperations } from './modules/businesses/businesses.operations.js';
import { contactsOperations } from './modules/contacts/contacts.operations.js';
import { customersOperations } from './modules/customers/customers.operations.js';
import { domainsOperations } from './modules/domains/domains.operations.js';
import { eventsOperations } from './modules/events/events.operations.js';
import { webhooksOperations } from './modules/webhooks/webhooks.operations.js';
import { foldersOperations } from './modules/folders/folders.operations.js';
import { messagesOperations } from './modules/messages/messages.operations.js';
import { sendingOperations } from './modules/channels/sending.operations.js';
import { smsOperations } from './modules/channels/sms/sms.operations.js';
import { inboundFailuresOperations } from './modules/channels/email/inbound-failures.js';
import { threadsOperations } from './modules/threads/threads.operations.js';

/** Every operation of the service. The REST routes, the OpenAPI document and the MCP tools are built from it. */
export const operations: Operation[] = [...contactsOperations, ...messagesOperations, ...sendingOperations, ...customersOperations, ...businessesOperations, ...foldersOperations, ...automationsOperations, ...domainsOperations, ...eventsOperations, ...webhooksOperations, ...channelsOperations, ...inboundFailuresOperations, ...smsOperations, ...threadsOperations];

const byId = new Map<string, Operation>(operations.map((op) => [op.id, op]));
/** The operation with this id (e.g. `messages.update`), as automation plans name them. */
export const operationById = (id: string): Operation | undefined => byId.get(id);
