import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import openapiTS, { astToString } from 'openapi-typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSwitchboardClient, SwitchboardError, type Schema, type Switchboard } from '../../clients/typescript/src/index.js';
import type { Tenant } from '../helpers/app.js';
import { startLiveApp, type LiveApp } from '../mcp/helpers.js';

/** The typed client against a running server: a walk through resources, errors, pagination to the end. */

const ROOT = resolve(import.meta.dirname, '../..');
let t: LiveApp;
let a: Tenant;
let sb: Switchboard;

beforeAll(async () => {
  t = await startLiveApp();
  a = await t.tenant({ credits: 1 });
  sb = createSwitchboardClient({ baseUrl: t.origin, apiKey: a.key });
});
afterAll(() => t?.close());

async function caught(promise: Promise<unknown>): Promise<SwitchboardError> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof SwitchboardError) return err;
    throw err;
  }
  throw new Error('expected a SwitchboardError');
}

describe('switchboard-client', () => {
  it('creates, reads, updates and deletes with typed answers', async () => {
    const { data: contact } = await sb.call(sb.api.POST('/contacts', { body: { firstName: 'Ada', lastName: 'Lovelace' } }));
    const typed: Schema<'Contact'> = contact;
    expect(typed.firstName).toBe('Ada');
    await sb.call(sb.api.POST('/contacts/{id}/emails', { params: { path: { id: contact.id } }, body: { email: 'ada@example.com' } }));
    const { data: again } = await sb.call(sb.api.GET('/contacts/{id}', { params: { path: { id: contact.id } } }));
    expect(again.emails.map((e) => e.email)).toEqual(['ada@example.com']);
    const { data: renamed } = await sb.call(sb.api.PATCH('/contacts/{id}', { params: { path: { id: contact.id } }, body: { lastName: 'King' } }));
    expect(renamed.lastName).toBe('King');
    const { data: message } = await sb.call(sb.api.POST('/messages', { body: { direction: 'incoming', type: 'email', text: 'Hello from the client' } }));
    expect(message.direction).toBe('incoming');
    const { data: deleted } = await sb.call(sb.api.DELETE('/contacts/{id}', { params: { path: { id: contact.id } } }));
    expect(deleted.deletedAt).not.toBeNull();
  });

  it('walks through every other resource: customers and transactions, businesses, domains and registrations, events, webhooks', async () => {
    const { data: business } = await sb.call(sb.api.POST('/businesses', { body: { name: 'Acme' } }));
    const { data: customer } = await sb.call(sb.api.POST('/customers', { body: { name: 'Grace', businessId: business.id } }));
    const { data: transaction } = await sb.call(
      sb.api.POST('/customers/{id}/transactions', { params: { path: { id: customer.id } }, body: { amount: '19.99', currency: 'USD', status: 'paid', type: 'sale' } }),
    );
    const { data: transactions } = await sb.call(sb.api.GET('/customers/{id}/transactions', { params: { path: { id: customer.id } } }));
    expect(transactions.map((x) => x.id)).toEqual([transaction.id]);
    const { data: domain } = await sb.call(sb.api.POST('/domains', { body: { name: 'Acme.Example' } }));
    expect(domain.name).toBe('acme.example');
    const { data: registration } = await sb.call(sb.api.POST('/domains/{id}/registrations', { params: { path: { id: domain.id } }, body: {} }));
    expect(registration.state).toBe('pending');
    const { data: events } = await sb.call(sb.api.GET('/events', { params: { query: { type: 'domain.created' } } }));
    expect(events.map((e) => e.resourceId)).toContain(domain.id);
    const { data: webhook } = await sb.call(sb.api.POST('/webhooks', { body: { url: 'https://hooks.example.com/switchboard', eventTypes: ['contact.created'] } }));
    expect(webhook.secret).toMatch(/^whsec_/);
    const { data: deliveries } = await sb.call(sb.api.GET('/webhooks/{id}/deliveries', { params: { path: { id: webhook.id } } }));
    expect(deliveries).toEqual([]);
  });

  it('walks every page of a list to the first empty page', async () => {
    for (let i = 0; i < 7; i++) await sb.call(sb.api.POST('/folders', { body: { name: `Folder ${i}` } }));
    const names: string[] = [];
    for await (const folder of sb.all((offset) => sb.api.GET('/folders', { params: { query: { limit: 3, offset } } }))) names.push(folder.name);
    expect(names.sort()).toEqual(Array.from({ length: 7 }, (_, i) => `Folder ${i}`).sort());
    const { meta } = await sb.call(sb.api.GET('/folders', { params: { query: { limit: 3 } } }));
    expect(meta?.pagination).toEqual({ limit: 3, offset: 0, hasMore: true });
  });

  it('throws SwitchboardError with code, status, the validation tree and the request id', async () => {
    const invalid = await caught(sb.call(sb.api.POST('/contacts', { body: { firstName: 42 as unknown as string } })));
    expect(invalid).toMatchObject({ code: 'VALIDATION_ERROR', status: 400 });
    expect(invalid.details?.properties?.firstName?.errors.length).toBeGreaterThan(0);
    expect(invalid.requestId).toMatch(/.+/);
    const missing = await caught(sb.call(sb.api.GET('/contacts/{id}', { params: { path: { id: '00000000-0000-4000-8000-000000000000' } } })));
    expect(missing).toMatchObject({ code: 'NOT_FOUND', status: 404 });
    // The one credit pays for the first automation; the second is a 402.
    await sb.call(sb.api.POST('/automations', { body: { name: 'Digest', instructions: 'Every Monday at 9, summarise new messages.' } }));
    const broke = await caught(sb.call(sb.api.POST('/automations', { body: { name: 'Another', instructions: 'Every day at 7, summarise new messages.' } })));
    expect(broke).toMatchObject({ code: 'INSUFFICIENT_CREDITS', status: 402 });
    const wrong = createSwitchboardClient({ baseUrl: t.origin, apiKey: 'sb_wrong' });
    expect(await caught(wrong.call(wrong.api.GET('/contacts')))).toMatchObject({ code: 'UNAUTHORIZED', status: 401 });
  });

  it('is generated from the current document (npm run client:generate)', async () => {
    const document = JSON.parse(readFileSync(resolve(ROOT, 'test/http/openapi.snapshot.json'), 'utf8')) as Parameters<typeof openapiTS>[0];
    const expected = astToString(await openapiTS(document));
    const committed = readFileSync(resolve(ROOT, 'clients/typescript/src/openapi.ts'), 'utf8');
    // The CLI adds a header comment; compare the generated code itself.
    expect(committed.slice(committed.indexOf('export '))).toBe(expected.slice(expected.indexOf('export ')));
  });
});
