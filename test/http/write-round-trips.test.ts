import { eq, sql } from 'drizzle-orm';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineOperation } from '../../src/core/operation.js';
import { contacts, events, files, organizations, webhookDeliveries, webhookEndpoints } from '../../src/db/schema.js';
import { Write } from '../../src/db/write.js';
import { jsonRow } from '../../src/db/json.js';
import { runOperation, type Caller } from '../../src/run-operation.js';
import { createTestApp, type Tenant, type TestApp } from '../helpers/app.js';
import { testDbKind } from '../helpers/database.js';
import { installStatementLog, roundTrips } from '../helpers/statement-log.js';

let t: TestApp;
let a: Tenant;
let uninstall: () => void;
beforeAll(async () => {
  // Keys are cached as in production, so that a request's round trips are its operation's.
  t = await createTestApp({ env: { API_KEY_CACHE_MS: '60000' } });
  a = await t.tenant({ credits: 5 });
  uninstall = installStatementLog(t);
});
afterAll(async () => {
  uninstall?.();
  await t?.close();
});

const eventsOf = (orgId: string, resourceId: string) =>
  t.database.db.select({ type: events.type, data: events.data }).from(events).where(sql`${events.organizationId} = ${orgId} AND ${events.resourceId} = ${resourceId}`).orderBy(events.occurredAt, events.type);

describe('round trips per write', () => {
  const counts: Record<string, number> = {};
  afterAll(() => {
    console.log(`round trips per operation (${testDbKind}):\n${Object.entries(counts).map(([k, n]) => `  ${k}: ${n}`).join('\n')}`);
  });

  it('a simple create, update or delete of a contact or a message is one round trip, with its events', async () => {
    // Warm-up: connections open, statements prepared.
    const warm = await a.request('POST', '/v1/contacts', { name: 'Warm' });
    await a.request('PATCH', `/v1/contacts/${warm.json.data.id}`, { notes: 'x' });
    await a.request('DELETE', `/v1/contacts/${warm.json.data.id}`);
    const warmMessage = await a.request('POST', '/v1/messages', { direction: 'incoming', type: 'email', text: 'warm' });
    await a.request('PATCH', `/v1/messages/${warmMessage.json.data.id}`, { readAt: '2026-11-25T10:00:00Z' });
    await a.request('DELETE', `/v1/messages/${warmMessage.json.data.id}`);

    const measure = async (kind: string, method: 'POST' | 'PATCH' | 'DELETE', url: string, body?: unknown) => {
      const { value: res, trips, statements } = await roundTrips(() => a.request(method, url, body));
      expect(res.status, `${kind}: ${res.body}`).toBeLessThan(300);
      counts[kind] = trips;
      expect(trips, `${kind} took ${trips} round trips:\n${statements.join('\n')}`).toBe(1);
      return res.json.data as { id: string } & Record<string, unknown>;
    };

    const contact = await measure('contacts.create', 'POST', '/v1/contacts', { name: 'Ada Lovelace', company: 'Analytical' });
    const updated = await measure('contacts.update', 'PATCH', `/v1/contacts/${contact.id}`, { jobTitle: 'Mathematician' });
    expect(updated).toMatchObject({ id: contact.id, name: 'Ada Lovelace', jobTitle: 'Mathematician', emails: [] });
    const deleted = await measure('contacts.delete', 'DELETE', `/v1/contacts/${contact.id}`);
    expect(deleted.deletedAt).toEqual(expect.any(String));
    expect((await eventsOf(a.orgId, contact.id)).map((e) => e.type).sort()).toEqual(['contact.created', 'contact.deleted', 'contact.updated']);

    const message = await measure('messages.create', 'POST', '/v1/messages', { direction: 'outgoing', type: 'email', text: 'Hello' });
    const updatedMessage = await measure('messages.update', 'PATCH', `/v1/messages/${message.id}`, { archivedAt: '2026-11-25T11:00:00Z', importance: 'high' });
    await measure('messages.delete', 'DELETE', `/v1/messages/${message.id}`);
    const recorded = await eventsOf(a.orgId, message.id);
    expect(recorded.map((e) => e.type).sort()).toEqual(['message.created', 'message.deleted', 'message.sent', 'message.updated']);
    // The event carries the record as the API answered it.
    const updateEvent = recorded.find((e) => e.type === 'message.updated')!.data as Record<string, unknown>;
    expect(updateEvent).toEqual(updatedMessage);
    expect(updateEvent).toMatchObject({ id: message.id, importance: 'high', archivedAt: '2026-11-25T11:00:00.000Z' });
    // Stored as the statement built it, so it reads back with the record's keys in the API's order.
    expect(Object.keys(updateEvent)).toEqual(Object.keys(updatedMessage));
  });

  it("a contact's email, phone number or address is one round trip to create, update or delete, its contact's liveness checked in the same statement", async () => {
    const contact = (await a.request('POST', '/v1/contacts', { name: 'Grace' })).json.data as { id: string };
    const warm = (await a.request('POST', `/v1/contacts/${contact.id}/emails`, { email: 'warm@example.com' })).json.data as { id: string };
    await a.request('PATCH', `/v1/contacts/${contact.id}/emails/${warm.id}`, { label: 'work' });
    await a.request('DELETE', `/v1/contacts/${contact.id}/emails/${warm.id}`);

    const measure = async (kind: string, method: 'POST' | 'PATCH' | 'DELETE', url: string, body?: unknown, status = 200) => {
      const { value: res, trips, statements } = await roundTrips(() => a.request(method, url, body));
      expect(res.status, `${kind}: ${res.body}`).toBe(status);
      counts[kind] = trips;
      expect(trips, `${kind} took ${trips} round trips:\n${statements.join('\n')}`).toBe(1);
      return res.json;
    };
    const email = (await measure('contacts.create_email', 'POST', `/v1/contacts/${contact.id}/emails`, { email: 'grace@example.com' }, 201)).data;
    expect(email).toMatchObject({ contactId: contact.id, email: 'grace@example.com', label: 'other', deletedAt: null });
    const relabelled = (await measure('contacts.update_email', 'PATCH', `/v1/contacts/${contact.id}/emails/${email.id}`, { label: 'work' })).data;
    expect(relabelled).toMatchObject({ id: email.id, label: 'work', email: 'grace@example.com' });
    const phone = (await measure('contacts.create_phone_number', 'POST', `/v1/contacts/${contact.id}/phone-numbers`, { phoneNumber: '+442079460958' }, 201)).data;
    expect(phone).toMatchObject({ phoneNumber: '+442079460958', countryCode: '44' });
    await measure('contacts.delete_phone_number', 'DELETE', `/v1/contacts/${contact.id}/phone-numbers/${phone.id}`);
    expect((await eventsOf(a.orgId, email.id)).map((e) => e.type)).toEqual(['contact.email.created', 'contact.email.updated']);
    // The answer and the event are the record as a read shows it.
    const read = (await a.request('GET', `/v1/contacts/${contact.id}/emails/${email.id}`)).json.data;
    expect(read).toEqual(relabelled);
    expect((await eventsOf(a.orgId, email.id))[1]!.data).toEqual(read);

    // A contact that is not live: the create writes nothing and answers the contact's 404; another contact's child is the child's 404.
    const other = (await a.request('POST', '/v1/contacts', { name: 'Other' })).json.data as { id: string };
    await a.request('DELETE', `/v1/contacts/${other.id}`);
    const refused = await measure('contacts.create_email (contact deleted)', 'POST', `/v1/contacts/${other.id}/emails`, { email: 'x@example.com' }, 404);
    expect(refused.error).toMatchObject({ code: 'NOT_FOUND', message: expect.stringContaining('Contact') });
    expect(refused.error.message).not.toContain('email');
    const foreign = await measure('contacts.update_email (another contact)', 'PATCH', `/v1/contacts/${other.id}/emails/${email.id}`, { label: 'home' }, 404);
    expect(foreign.error.message).toContain('email');
    expect((await a.request('GET', `/v1/contacts/${contact.id}/emails/${email.id}`)).json.data.label).toBe('work');
  });

  it("a customer's transaction is one round trip to create or update, its customer's business and the business it names checked in the same statement", async () => {
    const business = (await a.request('POST', '/v1/businesses', { name: 'Acme Holdings' })).json.data as { id: string };
    const customer = (await a.request('POST', '/v1/customers', { name: 'Acme Ltd', businessId: business.id })).json.data as { id: string };
    const body = { amount: '12.50', currency: 'EUR', status: 'completed', type: 'payment' };
    const warm = (await a.request('POST', `/v1/customers/${customer.id}/transactions`, body)).json.data as { id: string };
    await a.request('PUT', `/v1/customers/${customer.id}/transactions/${warm.id}`, { businessId: business.id });

    const created = await roundTrips(() => a.request('POST', `/v1/customers/${customer.id}/transactions`, body));
    expect(created.value.status, created.value.body).toBe(201);
    counts['customers.create_transaction'] = created.trips;
    expect(created.trips, created.statements.join('\n')).toBe(1);
    // The customer's business, as the default, and the amount as the text stored.
    expect(created.value.json.data).toMatchObject({ ...body, businessId: business.id, customerId: customer.id });
    const id = created.value.json.data.id as string;

    const updated = await roundTrips(() => a.request('PUT', `/v1/customers/${customer.id}/transactions/${id}`, { businessId: business.id, status: 'refunded' }));
    expect(updated.value.status, updated.value.body).toBe(200);
    counts['customers.update_transaction (names a business)'] = updated.trips;
    expect(updated.trips, updated.statements.join('\n')).toBe(1);
    expect(updated.value.json.data).toEqual((await a.request('GET', `/v1/customers/${customer.id}/transactions/${id}`)).json.data);
    expect((await eventsOf(a.orgId, id)).map((e) => e.type)).toEqual(['customer.transaction.created', 'customer.transaction.updated']);

    // A business the organization does not have: refused in the same round trip, nothing written.
    const refused = await roundTrips(() => a.request('PUT', `/v1/customers/${customer.id}/transactions/${id}`, { businessId: '00000000-0000-4000-8000-000000000001', status: 'lost' }));
    expect(refused.value.status).toBe(400);
    expect(refused.trips).toBe(1);
    expect((await a.request('GET', `/v1/customers/${customer.id}/transactions/${id}`)).json.data.status).toBe('refunded');
    expect(await eventsOf(a.orgId, id)).toHaveLength(2);
  });

  it('a business or a customer is one round trip to create, update or delete, the records a customer names checked in the same statement', async () => {
    const warmBusiness = (await a.request('POST', '/v1/businesses', { name: 'Warm' })).json.data as { id: string };
    await a.request('PATCH', `/v1/businesses/${warmBusiness.id}`, { name: 'Warmer' });
    const warm = (await a.request('POST', '/v1/customers', { name: 'Warm', businessId: warmBusiness.id })).json.data as { id: string };
    await a.request('PATCH', `/v1/customers/${warm.id}`, { businessId: warmBusiness.id, notes: 'warm' });
    await a.request('DELETE', `/v1/customers/${warm.id}`);
    await a.request('DELETE', `/v1/businesses/${warmBusiness.id}`);

    const measure = async (kind: string, method: 'POST' | 'PATCH' | 'DELETE', url: string, body: unknown, status: number) => {
      const { value: res, trips, statements } = await roundTrips(() => a.request(method, url, body));
      expect(res.status, `${kind}: ${res.body}`).toBe(status);
      counts[kind] = trips;
      expect(trips, `${kind} took ${trips} round trips:\n${statements.join('\n')}`).toBe(1);
      return res.json;
    };
    const business = (await measure('businesses.create', 'POST', '/v1/businesses', { name: 'Acme Holdings', data: { industry: 'Retail' } }, 201)).data;
    expect(business).toMatchObject({ name: 'Acme Holdings', data: { industry: 'Retail' }, organizationId: a.orgId, deletedAt: null });
    expect((await measure('businesses.update', 'PATCH', `/v1/businesses/${business.id}`, { name: 'Acme Group' }, 200)).data).toEqual(
      (await a.request('GET', `/v1/businesses/${business.id}`)).json.data,
    );
    const contact = (await a.request('POST', '/v1/contacts', { name: 'Ada' })).json.data as { id: string };
    const customer = (await measure('customers.create (names a business and a contact)', 'POST', '/v1/customers', { name: 'Acme Ltd', businessId: business.id, contactId: contact.id, customerSince: '2024-03-01T00:00:00Z', data: { tier: 'gold' } }, 201)).data;
    expect(customer).toMatchObject({ businessId: business.id, contactId: contact.id, customerSince: '2024-03-01T00:00:00.000Z', data: { tier: 'gold' } });
    const updated = (await measure('customers.update (names a business)', 'PATCH', `/v1/customers/${customer.id}`, { businessId: business.id, notes: 'Pays on time' }, 200)).data;
    expect(updated).toEqual((await a.request('GET', `/v1/customers/${customer.id}`)).json.data);
    expect(updated.notes).toBe('Pays on time');

    // A record the organization does not have: refused in the same round trip with the field's error, nothing written.
    const unknown = '00000000-0000-4000-8000-000000000001';
    const noBusiness = await measure('customers.update (an unknown business)', 'PATCH', `/v1/customers/${customer.id}`, { businessId: unknown, notes: 'lost' }, 400);
    expect(JSON.stringify(noBusiness.error)).toContain('businessId');
    const noContact = await measure('customers.create (an unknown contact)', 'POST', '/v1/customers', { name: 'Nobody', contactId: unknown }, 400);
    expect(JSON.stringify(noContact.error)).toContain('contactId');
    // An unknown customer is a 404 whatever the body names.
    await measure('customers.update (an unknown customer)', 'PATCH', `/v1/customers/${unknown}`, { businessId: unknown }, 404);
    expect((await a.request('GET', `/v1/customers/${customer.id}`)).json.data.notes).toBe('Pays on time');

    // The delete takes the customer's transactions with it, in the same statement.
    const transaction = (await a.request('POST', `/v1/customers/${customer.id}/transactions`, { amount: '5', currency: 'EUR', status: 'completed', type: 'payment' })).json.data as { id: string };
    const deleted = (await measure('customers.delete (with its transactions)', 'DELETE', `/v1/customers/${customer.id}`, undefined, 200)).data;
    expect(deleted.deletedAt).toEqual(expect.any(String));
    const [left] = (await t.database.db.execute<{ deleted: boolean }>(sql`SELECT deleted_at IS NOT NULL AS deleted FROM customer_transactions WHERE id = ${transaction.id}`)).rows;
    expect(left!.deleted).toBe(true);
    await measure('businesses.delete', 'DELETE', `/v1/businesses/${business.id}`, undefined, 200);
    expect((await eventsOf(a.orgId, customer.id)).map((e) => e.type).sort()).toEqual(['customer.created', 'customer.deleted', 'customer.updated']);
    expect((await eventsOf(a.orgId, business.id)).map((e) => e.type).sort()).toEqual(['business.created', 'business.deleted', 'business.updated']);
  });

  it("a folder is one round trip to rename, and its move, delete or creation under a parent takes the tree's lock first: BEGIN, the lock, one statement, COMMIT", async () => {
    const warm = (await a.request('POST', '/v1/folders', { name: 'Warm' })).json.data as { id: string };
    await a.request('PATCH', `/v1/folders/${warm.id}`, { name: 'Warmer' });
    const measure = async (kind: string, method: 'POST' | 'PATCH' | 'DELETE', url: string, body: unknown, status: number, expected: number) => {
      const { value: res, trips, statements } = await roundTrips(() => a.request(method, url, body));
      expect(res.status, `${kind}: ${res.body}`).toBe(status);
      counts[kind] = trips;
      expect(trips, `${kind} took ${trips} round trips:\n${statements.join('\n')}`).toBe(expected);
      return res.json;
    };
    const top = (await measure('folders.create', 'POST', '/v1/folders', { name: 'Invoices', metadata: { color: 'blue' } }, 201, 1)).data;
    expect(top).toMatchObject({ name: 'Invoices', metadata: { color: 'blue' }, parentFolderId: null, fileCount: 0, subfolderCount: 0, deletedAt: null });
    const renamed = (await measure('folders.update (rename)', 'PATCH', `/v1/folders/${top.id}`, { name: 'Invoices 2026' }, 200, 1)).data;
    expect(renamed).toEqual((await a.request('GET', `/v1/folders/${top.id}`)).json.data);
    const child = (await measure('folders.create (under a parent)', 'POST', '/v1/folders', { name: 'Paid', parentFolderId: top.id }, 201, 4)).data;
    const other = (await a.request('POST', '/v1/folders', { name: 'Archive' })).json.data as { id: string };
    const moved = (await measure('folders.update (move)', 'PATCH', `/v1/folders/${child.id}`, { parentFolderId: other.id }, 200, 4)).data;
    expect(moved).toEqual((await a.request('GET', `/v1/folders/${child.id}`)).json.data);
    // A move into its own subtree is refused in the same statement: nothing written, no event.
    const cycle = await measure('folders.update (a move into its own subtree)', 'PATCH', `/v1/folders/${other.id}`, { parentFolderId: child.id }, 400, 4);
    expect(JSON.stringify(cycle.error)).toContain('itself or one of its subfolders');
    expect((await a.request('GET', `/v1/folders/${other.id}`)).json.data.parentFolderId).toBeNull();

    await t.database.db.insert(files).values([
      { organizationId: a.orgId, folderId: other.id, name: 'a.pdf', createdBy: a.keyId },
      { organizationId: a.orgId, folderId: child.id, name: 'b.pdf', createdBy: a.keyId },
    ]);
    const deleted = (await measure('folders.delete (with its subtree and their files)', 'DELETE', `/v1/folders/${other.id}`, undefined, 200, 4)).data;
    expect(deleted).toMatchObject({ id: other.id, fileCount: 1, subfolderCount: 1 });
    expect(deleted.deletedAt).toEqual(expect.any(String));
    expect((await a.request('GET', `/v1/folders/${child.id}`)).status).toBe(404);
    const left = (await t.database.db.execute<{ name: string; gone: boolean }>(sql`SELECT name, deleted_at IS NOT NULL AS gone FROM files WHERE organization_id = ${a.orgId} ORDER BY name`)).rows;
    expect(left).toEqual([
      { name: 'a.pdf', gone: true },
      { name: 'b.pdf', gone: true },
    ]);
    expect((await eventsOf(a.orgId, other.id)).map((e) => e.type).sort()).toEqual(['folder.created', 'folder.deleted']);
    expect((await eventsOf(a.orgId, child.id)).map((e) => e.type).sort()).toEqual(['folder.created', 'folder.updated']);
  });

  it('a write that fails leaves no event: a missing message is a 404 and nothing is recorded', async () => {
    const missing = '00000000-0000-4000-8000-000000000001';
    const { value: res, trips } = await roundTrips(() => a.request('PATCH', `/v1/messages/${missing}`, { readAt: null }));
    expect(res.status).toBe(404);
    expect(res.json.error.code).toBe('NOT_FOUND');
    expect(trips).toBe(1);
    expect(await eventsOf(a.orgId, missing)).toEqual([]);
  });

  // PostgreSQL only: the embedded database has one connection, so no other transaction can hold the row.
  it.skipIf(testDbKind !== 'postgres')("recording an event takes no lock on the organization's row (no foreign key check on events)", async () => {
    const message = (await a.request('POST', '/v1/messages', { direction: 'incoming', type: 'email', text: 'Lock' })).json.data as { id: string };
    const holder = new pg.Client({ connectionString: (t.database as { url?: string }).url });
    await holder.connect();
    try {
      // FOR UPDATE conflicts with the FOR KEY SHARE a foreign key check takes: with a key on events.organization_id, the PATCH would wait here.
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM organizations WHERE id = $1 FOR UPDATE', [a.orgId]);
      const patched = a.request('PATCH', `/v1/messages/${message.id}`, { importance: 'low' });
      const waited = await Promise.race([patched.then(() => false), new Promise<boolean>((resolve) => setTimeout(() => resolve(true), 5000))]);
      expect(waited, 'the PATCH waited for the lock on its organization').toBe(false);
      expect((await patched).status).toBe(200);
    } finally {
      await holder.query('ROLLBACK').catch(() => {});
      await holder.end();
    }
    expect((await eventsOf(a.orgId, message.id)).map((e) => e.type)).toContain('message.updated');
  });

  it('queues the webhook deliveries of the events in the same statement', async () => {
    const [endpoint] = await t.database.db
      .insert(webhookEndpoints)
      .values({ organizationId: a.orgId, url: 'https://hooks.example.com/in', eventTypes: ['contact.created'], secret: 'whsec_test' })
      .returning();
    const { value: res, trips } = await roundTrips(() => a.request('POST', '/v1/contacts', { name: 'Hooked' }));
    expect(trips).toBe(1);
    const [event] = await t.database.db.select().from(events).where(eq(events.resourceId, res.json.data.id));
    const deliveries = await t.database.db.select().from(webhookDeliveries).where(eq(webhookDeliveries.eventId, event!.id));
    expect(deliveries.map((d) => [d.endpointId, d.eventType])).toEqual([[endpoint!.id, 'contact.created']]);
    await t.database.db.update(webhookEndpoints).set({ enabled: false }).where(eq(webhookEndpoints.id, endpoint!.id));
  });
});

describe('the runner composes any Write with its events', () => {
  const caller = (): Caller => ({ orgId: a.orgId, actor: { type: 'api_key', id: a.keyId, depth: 0 }, permissions: ['*'], db: t.database.db });
  const contactsNamed = (name: string) => t.database.db.select().from(contacts).where(sql`${contacts.organizationId} = ${a.orgId} AND ${contacts.name} = ${name}`);

  /** An operation whose write stores another name than the input's, and whose event type depends on the stored name. */
  const renaming = defineOperation({
    id: 'contacts.create',
    method: 'POST',
    path: '/test/renaming',
    summary: 'Test: a write whose answer differs from its input',
    input: z.strictObject({ name: z.string() }),
    output: z.any(),
    event: (c) => [c.name === 'Stored' ? 'contact.updated' : 'contact.created'],
    handler: (_input, ctx) =>
      new Write(ctx.db, { statement: ctx.db.insert(contacts).values({ organizationId: ctx.orgId, name: 'Stored' }).returning().getSQL(), table: contacts, answer: jsonRow(contacts), label: 'Contact' }),
  });

  it('records the event types of the answer when they differ from the ones the input predicts (and writes once)', async () => {
    await t.database.db.delete(contacts).where(sql`${contacts.organizationId} = ${a.orgId} AND ${contacts.name} = 'Stored'`);
    const envelope = await runOperation(renaming, { name: 'Given' }, caller());
    const id = (envelope.data as { id: string }).id;
    expect(await contactsNamed('Stored')).toHaveLength(1);
    expect((await eventsOf(a.orgId, id)).map((e) => e.type)).toEqual(['contact.updated']);
  });

  const costly = defineOperation({
    id: 'contacts.create',
    method: 'POST',
    path: '/test/costly',
    summary: 'Test: a write that costs credits',
    input: z.strictObject({ name: z.string() }),
    output: z.any(),
    cost: 2,
    event: 'contact.created',
    handler: (input, ctx) =>
      new Write(ctx.db, { statement: ctx.db.insert(contacts).values({ organizationId: ctx.orgId, name: input.name }).returning().getSQL(), table: contacts, answer: jsonRow(contacts), label: 'Contact' }),
  });
  const credits = async () => (await t.database.db.select({ c: organizations.credits }).from(organizations).where(eq(organizations.id, a.orgId)))[0]!.c;

  it('debits the credits in the write statement, and writes nothing when they do not cover the cost', async () => {
    const before = await credits();
    expect(before).toBeGreaterThanOrEqual(4);
    const { trips } = await roundTrips(() => runOperation(costly, { name: 'Paid 1' }, caller()));
    expect(trips).toBe(1);
    await runOperation(costly, { name: 'Paid 2' }, caller());
    expect(await credits()).toBe(before - 4);
    await t.database.db.update(organizations).set({ credits: 1 }).where(eq(organizations.id, a.orgId));
    await expect(runOperation(costly, { name: 'Unpaid' }, caller())).rejects.toMatchObject({ code: 'INSUFFICIENT_CREDITS' });
    expect(await contactsNamed('Unpaid')).toEqual([]);
    expect(await credits()).toBe(1);
    const [paid] = await contactsNamed('Paid 1');
    expect((await eventsOf(a.orgId, paid!.id)).map((e) => e.type)).toEqual(['contact.created']);
  });

  /** A handler that sends statements of its own, and fails after the first when asked to. */
  const twoStep = defineOperation({
    id: 'contacts.create',
    method: 'POST',
    path: '/test/two-step',
    summary: 'Test: a write of two statements',
    input: z.strictObject({ name: z.string(), fail: z.boolean() }),
    output: z.any(),
    event: 'contact.created',
    handler: async (input, ctx) => {
      const [first] = await ctx.db.insert(contacts).values({ organizationId: ctx.orgId, name: input.name }).returning();
      if (input.fail) throw new Error('second step failed');
      const [second] = await ctx.db.update(contacts).set({ notes: 'second step' }).where(eq(contacts.id, first!.id)).returning();
      return second!;
    },
  });

  it('runs a handler with statements of its own in a transaction: all of it with its events, or nothing', async () => {
    await expect(runOperation(twoStep, { name: 'Half', fail: true }, caller())).rejects.toThrow('second step failed');
    expect(await contactsNamed('Half')).toEqual([]);
    const { value, trips } = await roundTrips(() => runOperation(twoStep, { name: 'Whole', fail: false }, caller()));
    const id = (value.data as { id: string }).id;
    expect(trips).toBe(5); // BEGIN, insert, update, events, COMMIT
    expect((await contactsNamed('Whole'))[0]?.notes).toBe('second step');
    expect((await eventsOf(a.orgId, id)).map((e) => e.type)).toEqual(['contact.created']);
  });

  /** A handler using Drizzle's relational queries and a nested transaction, as handlers written later may. */
  const nested = defineOperation({
    id: 'contacts.update',
    method: 'POST',
    path: '/test/nested',
    summary: 'Test: a relational read and a nested transaction',
    input: z.strictObject({ name: z.string(), fail: z.boolean() }),
    output: z.any(),
    event: 'contact.updated',
    handler: async (input, ctx) => {
      const [created] = await ctx.db.insert(contacts).values({ organizationId: ctx.orgId, name: input.name }).returning();
      const found = await ctx.db.query.contacts.findFirst({ where: eq(contacts.id, created!.id) });
      await ctx.db.transaction(async (tx) => {
        await tx.update(contacts).set({ notes: 'nested' }).where(eq(contacts.id, found!.id));
        if (input.fail) throw new Error('nested step failed');
      });
      return found!;
    },
  });

  it('runs relational reads and nested transactions of a handler inside its transaction', async () => {
    await expect(runOperation(nested, { name: 'Nested fails', fail: true }, caller())).rejects.toThrow('nested step failed');
    expect(await contactsNamed('Nested fails')).toEqual([]);
    const envelope = await runOperation(nested, { name: 'Nested', fail: false }, caller());
    const [row] = await contactsNamed('Nested');
    expect(row).toMatchObject({ id: (envelope.data as { id: string }).id, notes: 'nested' });
    expect((await eventsOf(a.orgId, row!.id)).map((e) => e.type)).toEqual(['contact.updated']);
  });

  it('a Write awaited outside the runner runs once, however often it is awaited', async () => {
    const write = new Write<{ id: string }>(t.database.db, {
      statement: t.database.db.insert(contacts).values({ organizationId: a.orgId, name: 'Awaited twice' }).returning().getSQL(),
      table: contacts,
      answer: jsonRow(contacts),
      label: 'Contact',
    });
    const [first, second] = [await write, await write];
    expect(first.id).toBe(second.id);
    expect(await contactsNamed('Awaited twice')).toHaveLength(1);
  });

  it('composes the write with its events inside a transaction it is given', async () => {
    await t.database.db.update(organizations).set({ credits: 10 }).where(eq(organizations.id, a.orgId));
    const envelope = await t.database.db.transaction((tx) => runOperation(costly, { name: 'In tx' }, caller(), tx));
    const id = (envelope.data as { id: string }).id;
    expect(await credits()).toBe(8);
    expect((await eventsOf(a.orgId, id)).map((e) => e.type)).toEqual(['contact.created']);
    await expect(t.database.db.transaction((tx) => runOperation(twoStep, { name: 'Rolled back', fail: true }, caller(), tx))).rejects.toThrow();
    expect(await contactsNamed('Rolled back')).toEqual([]);
  });
});
