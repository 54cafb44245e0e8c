/**
 * The business areas. Each is a REST permission area (`contacts:read`, `contacts:write`) and an MCP tool
 * category (the toolset a user approves on the consent page). This list is the catalog of both.
 */
export const CATEGORIES = [
  { id: 'contacts', title: 'Contacts', description: 'People and their emails, phone numbers and addresses' },
  { id: 'messages', title: 'Messages', description: 'Incoming and outgoing email and phone messages, search, read/archive/snooze flags, and sending email and text messages (send, reply, forward; texts through a text channel)' },
  { id: 'customers', title: 'Customers', description: 'Customers and their transactions' },
  { id: 'businesses', title: 'Businesses', description: 'The businesses of the organization' },
  { id: 'folders', title: 'Folders', description: 'Folders and their hierarchy' },
  { id: 'automations', title: 'Automations', description: 'Event-driven and scheduled automations' },
  { id: 'channels', title: 'Channels', description: 'Email channels: the addresses the organization receives and sends as, and their mail servers' },
  { id: 'domains', title: 'Domains', description: 'Domains and their registrations' },
  { id: 'events', title: 'Events', description: 'The record of every change: what was created, updated or deleted, by whom (read-only)' },
  { id: 'threads', title: 'Threads', description: 'Conversations: status, assignee, tags, snoozes and internal notes' },
  { id: 'webhooks', title: 'Webhooks', description: "Endpoints that receive the organization's events, their signing secrets and deliveries" },
] as const;

export type Category = (typeof CATEGORIES)[number]['id'];
export const CATEGORY_IDS = CATEGORIES.map((c) => c.id) as [Category, ...Category[]];
export const isCategory = (value: string): value is Category => (CATEGORY_IDS as string[]).includes(value);
