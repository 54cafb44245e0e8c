import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';

/**
 * events:read lists every event, but an event's record only to a caller who may read its area; an
 * endpoint can be pointed at the events of an area only by a caller who may read that area.
 */

const { a, b } = useTestApp();

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('events of areas the caller cannot read', () => {
  it('are listed with data null and the permission that would show it', async () => {
    const contact = (await a.request('POST', '/v1/contacts', { name: 'Secret Ada', notes: 'private' })).json.data;
    const message = (await a.request('POST', '/v1/messages', { direction: 'incoming', type: 'email', text: 'confidential' })).json.data;

    const eventsOnly = await a.keyWith(['events:read']);
    const listed = await eventsOnly.request('GET', '/v1/events?limit=100');
    expect(listed.status).toBe(200);
    const created = (listed.json.data as Json[]).find((e) => e.type === 'contact.created' && e.resourceId === contact.id)!;
    expect(created).toMatchObject({ resourceId: contact.id, data: null, dataWithheld: { reason: 'permission', needs: 'contacts:read' } });
    expect(listed.body).not.toContain('Secret Ada');
    expect(listed.body).not.toContain('confidential');
    const one = await eventsOnly.request('GET', `/v1/events/${created.id}`);
    expect(one.json.data).toMatchObject({ id: created.id, data: null, dataWithheld: { needs: 'contacts:read' } });

    // With contacts:read the contact's events show their record, the message's still do not.
    const withContacts = await a.keyWith(['events:read', 'contacts:read']);
    const seen = (await withContacts.request('GET', '/v1/events?limit=100')).json.data as Json[];
    expect(seen.find((e) => e.type === 'contact.created' && e.resourceId === contact.id)).toMatchObject({ data: { name: 'Secret Ada' }, dataWithheld: null });
    expect(seen.find((e) => e.type === 'message.received' && e.resourceId === message.id)).toMatchObject({ data: null, dataWithheld: { needs: 'messages:read' } });

    // A key with every permission sees everything.
    const all = (await a.request('GET', `/v1/events/${created.id}`)).json.data;
    expect(all).toMatchObject({ data: { id: contact.id, name: 'Secret Ada' }, dataWithheld: null });
  });
});

describe('webhook subscriptions', () => {
  it('need the read permission of every area subscribed to, at create and when url or eventTypes change', async () => {
    const hooksOnly = await b.keyWith(['webhooks:read', 'webhooks:write']);
    const refused = await hooksOnly.request('POST', '/v1/webhooks', { url: 'https://example.com/hook', eventTypes: ['contact.created'] });
    expect(refused.status, refused.body).toBe(403);
    expect(refused.json.error).toMatchObject({ code: 'FORBIDDEN' });
    expect(refused.json.error.message).toContain('contacts:read');
    expect((await hooksOnly.request('POST', '/v1/webhooks', { url: 'https://example.com/hook' })).status).toBe(403); // ["*"] by default
    expect((await hooksOnly.request('POST', '/v1/webhooks', { url: 'https://example.com/hook', eventTypes: ['*'] })).status).toBe(403);
    const own = await hooksOnly.request('POST', '/v1/webhooks', { url: 'https://example.com/hook', eventTypes: ['webhook.created'] });
    expect(own.status, own.body).toBe(201);

    // An endpoint someone else subscribed to contacts cannot be re-pointed by a key that cannot read contacts.
    const theirs = await b.request('POST', '/v1/webhooks', { url: 'https://crm.example.com/hook', eventTypes: ['contact.created', 'contact.updated'] });
    expect(theirs.status).toBe(201);
    const id = theirs.json.data.id as string;
    const repointed = await hooksOnly.request('PATCH', `/v1/webhooks/${id}`, { url: 'https://attacker.example.net/hook' });
    expect(repointed.status, repointed.body).toBe(403);
    expect((await b.request('GET', `/v1/webhooks/${id}`)).json.data.url).toBe('https://crm.example.com/hook');
    expect((await hooksOnly.request('PATCH', `/v1/webhooks/${id}`, { eventTypes: ['customer.created'] })).status).toBe(403);
    // Changes that do not redirect any record are allowed, and so is narrowing to what the key may read.
    expect((await hooksOnly.request('PATCH', `/v1/webhooks/${id}`, { description: 'CRM sync' })).status).toBe(200);
    expect((await hooksOnly.request('PATCH', `/v1/webhooks/${id}`, { eventTypes: ['webhook.updated'], url: 'https://other.example.net/hook' })).status).toBe(200);

    const withContacts = await b.keyWith(['webhooks:write', 'contacts:read']);
    expect((await withContacts.request('POST', '/v1/webhooks', { url: 'https://example.com/contacts', eventTypes: ['contact.created', 'contact.email.created'] })).status).toBe(201);
  });
});
