import { and, eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { contacts, idempotencyKeys, organizations } from '../../src/db/schema.js';
import { onEventsCommitted, type Committed } from '../../src/modules/events/events.signal.js';
import { useTestApp } from '../helpers/app.js';

/** Idempotency-Key on REST POSTs, with Stripe's semantics. */

const { t, a, b } = useTestApp({ credits: 100 });

const post = (who: typeof a, path: string, body: unknown, key?: string) => who.request('POST', path, body, key === undefined ? {} : { 'idempotency-key': key });
const credits = async (orgId: string) => (await t.database.db.select().from(organizations).where(eq(organizations.id, orgId)))[0]!.credits;

describe('Idempotency-Key', () => {
  it('a retry with the same key and body gets the first answer again, without a second write or a second credit', async () => {
    const before = await credits(a.orgId);
    const body = { name: 'Weekly digest', instructions: 'Every Monday at 9, summarise new messages.' };
    const first = await post(a, '/v1/automations', body, 'create-digest-1');
    expect(first.status, first.body).toBe(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const again = await post(a, '/v1/automations', body, 'create-digest-1');
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json).toEqual(first.json);
    expect(await credits(a.orgId)).toBe(before - 1);
    const list = await a.request('GET', '/v1/automations?limit=100');
    expect(list.json.data.filter((x: { name: string }) => x.name === 'Weekly digest')).toHaveLength(1);
  });

  it('the same key with another body, or on another path, is a 400 IDEMPOTENCY_KEY_REUSED', async () => {
    expect((await post(a, '/v1/contacts', { name: 'One' }, 'reuse-me')).status).toBe(201);
    for (const [path, body] of [
      ['/v1/contacts', { name: 'Two' }],
      ['/v1/folders', { name: 'One' }],
    ] as const) {
      const res = await post(a, path, body, 'reuse-me');
      expect(res.status).toBe(400);
      expect(res.json.error.code).toBe('IDEMPOTENCY_KEY_REUSED');
    }
  });

  it('keys belong to their API key: another organization may use the same key', async () => {
    expect((await post(b, '/v1/contacts', { name: 'Two' }, 'reuse-me')).status).toBe(201);
  });

  it('a request still running with the key is a 409 with Retry-After', async () => {
    await t.database.db.insert(idempotencyKeys).values({ callerId: a.keyId, key: 'running', organizationId: a.orgId, requestHash: 'x' });
    const res = await post(a, '/v1/contacts', { name: 'Waits' }, 'running');
    // The hash differs from the stored one: reuse is reported first, as Stripe does.
    expect(res.json.error.code).toBe('IDEMPOTENCY_KEY_REUSED');
    await t.database.db.update(idempotencyKeys).set({ requestHash: (await import('../../src/idempotency.js')).requestHash('POST', '/v1/contacts', { name: 'Waits' }) }).where(and(eq(idempotencyKeys.callerId, a.keyId), eq(idempotencyKeys.key, 'running')));
    const busy = await post(a, '/v1/contacts', { name: 'Waits' }, 'running');
    expect(busy.status).toBe(409);
    expect(busy.json.error.code).toBe('IDEMPOTENCY_IN_PROGRESS');
    expect(busy.headers['retry-after']).toBe('1');
  });

  it('a request that fails stores nothing: the key can be used again', async () => {
    const bad = await post(a, '/v1/contacts', { name: 42 }, 'fails-first');
    expect(bad.status).toBe(400);
    const good = await post(a, '/v1/contacts', { name: 'Fixed' }, 'fails-first');
    expect(good.status).toBe(201);
    expect(good.headers['idempotent-replayed']).toBeUndefined();
  });

  it("announces what the write recorded after its commit, so that only the workers it concerns wake; a replay announces nothing", async () => {
    const heard: (Committed | 'everyone')[] = [];
    // `wants` sees what each announcement says; an announcement that says nothing wakes every worker.
    let said: Committed | undefined;
    const off = onEventsCommitted(
      () => {
        heard.push(said ?? 'everyone');
        said = undefined;
      },
      (what) => {
        said = what;
        return true;
      },
    );
    try {
      expect((await post(a, '/v1/contacts', { name: 'Announced' }, 'announce-1')).status).toBe(201);
      expect(heard).toEqual([expect.objectContaining({ events: 1, undispatched: 0, deliveries: 0, types: ['contact.created'], operation: 'contacts.create' })]);
      heard.length = 0;
      expect((await post(a, '/v1/contacts', { name: 'Announced' }, 'announce-1')).headers['idempotent-replayed']).toBe('true');
      expect(heard).toEqual([]);
    } finally {
      off();
    }
  });

  it('a malformed key is a 400', async () => {
    const res = await post(a, '/v1/contacts', { name: 'x' }, 'with space');
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe('BAD_REQUEST');
  });

  it('20 parallel identical requests write exactly one record', async () => {
    const name = `Parallel ${Math.random()}`;
    const answers = await Promise.all(Array.from({ length: 20 }, () => post(a, '/v1/contacts', { name }, 'parallel-1')));
    const ok = answers.filter((r) => r.status === 201);
    expect(ok.length).toBeGreaterThanOrEqual(1);
    expect(answers.every((r) => r.status === 201 || (r.status === 409 && r.json.error.code === 'IDEMPOTENCY_IN_PROGRESS'))).toBe(true);
    expect(new Set(ok.map((r) => r.json.data.id)).size).toBe(1);
    const rows = await t.database.db.select().from(contacts).where(and(eq(contacts.organizationId, a.orgId), eq(contacts.name, name)));
    expect(rows).toHaveLength(1);
  });
});
