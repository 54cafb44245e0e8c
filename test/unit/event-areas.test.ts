import { describe, expect, it } from 'vitest';
import { EVENT_TYPES, eventReadPermission } from '../../src/modules/events/events.catalog.js';

describe('the permission that shows an event’s record', () => {
  it('is the read permission of its area, for every type of the catalog', () => {
    for (const type of EVENT_TYPES) expect(eventReadPermission(type), type).toMatch(/^[a-z]+:read$/);
    expect(eventReadPermission('contact.email.created')).toBe('contacts:read');
    expect(eventReadPermission('customer.transaction.deleted')).toBe('customers:read');
    expect(eventReadPermission('domain.registration.updated')).toBe('domains:read');
    expect(eventReadPermission('message.received')).toBe('messages:read');
    expect(eventReadPermission('webhook.created')).toBe('webhooks:read');
  });

  it('is every permission for a type of no known area', () => {
    expect(eventReadPermission('invoice.created')).toBe('*');
  });
});
