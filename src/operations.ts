import type { Operation } from './core/operation.js';
import { contactsOperations } from './modules/contacts/contacts.operations.js';

/** Every operation of the service. The REST routes, the OpenAPI document and the MCP tools are built from it. */
export const operations: Operation[] = [...contactsOperations];
