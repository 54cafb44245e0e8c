import { eq, inArray } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { automaticMessages, events, idempotencyKeys, oauthClients, oauthCodes, oauthGrants, oauthSessions, oauthTokens } from '../../src/db/schema.js';
import { createCleanup, REVOKED_GRANT_DAYS, UNUSED_CLIENT_HOURS } from '../../src/workers/cleanup.js';
import { useTestApp } from '../helpers/app.js';

const DAY = 24 * 60 * 60 * 1000;
const now = new Date('2026-06-01T12:00:00Z');
const ago = (days: number) => new Date(now.getTime() - days * DAY);
const silent = { error: () => {}, info: () => {} };

const { t, a } = useTestApp();

const client = (id: string, createdAt: Date) => ({
  id,
  createdAt,
  tokenEndpointAuthMethod: 'none',
  redirectUris: ['http://127.0.0.1/cb'],
  grantTypes: ['authorization_code'],
  responseTypes: ['code'],
});

describe('cleanup', () => {
  it('removes events past retention once dispatched, expired codes, tokens and sessions, and unapproved old clients; keeps the rest', async () => {
    const db = t.database.db;
    const user = await a.user();
    const ev = (occurredAt: Date, dispatched: boolean) => ({
      organizationId: a.orgId,
      type: 'contact.created',
      actorType: 'system',
      occurredAt,
      dispatchedAt: dispatched ? occurredAt : null,
    });
    const [oldEvent, undispatchedOld, recentEvent] = await db
      .insert(events)
      .values([ev(ago(31), true), ev(ago(31), false), ev(ago(29), true)])
      .returning({ id: events.id });

    await db
      .insert(oauthClients)
      .values([client('old-unused', ago(UNUSED_CLIENT_HOURS / 24 + 0.1)), client('old-used', ago(40)), client('new-unused', ago(UNUSED_CLIENT_HOURS / 24 - 0.1))]);
    const [grant] = await db
      .insert(oauthGrants)
      .values({ userId: user.id, organizationId: a.orgId, clientId: 'old-used', scopes: ['mcp'], categories: ['contacts'], resource: 'http://x/mcp' })
      .returning();
    const code = (hash: string, expiresAt: Date) => ({ codeHash: hash, expiresAt, grantId: grant!.id, clientId: 'old-used', redirectUri: 'http://127.0.0.1/cb', codeChallenge: 'x' });
    await db.insert(oauthCodes).values([code('code-expired', ago(2)), code('code-just-expired', ago(0.5))]);
    const token = (hash: string, expiresAt: Date) => ({ tokenHash: hash, kind: 'refresh' as const, expiresAt, grantId: grant!.id });
    await db.insert(oauthTokens).values([token('token-expired', ago(2)), token('token-live', new Date(now.getTime() + DAY))]);
    await db.insert(oauthSessions).values([
      { idHash: 'session-expired', expiresAt: ago(0.1), userId: user.id },
      { idHash: 'session-live', expiresAt: new Date(now.getTime() + DAY), userId: user.id },
    ]);

    const idem = (key: string, createdAt: Date) => ({ callerId: a.keyId, key, organizationId: a.orgId, requestHash: 'h', createdAt });
    await db.insert(idempotencyKeys).values([idem('day-old', ago(1.01)), idem('fresh', ago(0.9))]);

    // What automatic messages counted: kept two days (the daily cap and the hourly rate read only the latest).
    const automation = await a.request('POST', '/v1/automations', {
      name: 'Note',
      instructions: 'Write a note',
      triggerEvent: 'contact.created',
      actions: [{ operation: 'contacts.update', input: { id: '{{event.resourceId}}', notes: 'x' } }],
    });
    expect(automation.status, automation.body).toBe(201);
    const mailed = (recipient: string, createdAt: Date) => ({ organizationId: a.orgId, automationId: automation.json.data.id as string, recipient, day: createdAt.toISOString().slice(0, 10), createdAt });
    await db.insert(automaticMessages).values([mailed('old@example.com', ago(2.1)), mailed('recent@example.com', ago(1.9))]);

    const cleanup = createCleanup({ db, clock: () => now, log: silent, eventRetentionDays: 30 });
    const counts = await cleanup.runOnce();
    expect((await db.select({ r: automaticMessages.recipient }).from(automaticMessages)).map((r) => r.r)).toEqual(['recent@example.com']);
    expect(counts).toEqual({ 'revoked oauth grants': 0, 'automatic message records': 1, events: 1, 'oauth codes': 1, 'oauth tokens': 1, 'oauth sessions': 1, 'idempotency keys': 1, 'unused oauth clients': 1 });
    expect((await db.select({ k: idempotencyKeys.key }).from(idempotencyKeys)).map((r) => r.k)).toEqual(['fresh']);

    const eventIds = (await db.select({ id: events.id }).from(events).where(inArray(events.id, [oldEvent!.id, undispatchedOld!.id, recentEvent!.id]))).map((r) => r.id);
    expect(eventIds.sort()).toEqual([undispatchedOld!.id, recentEvent!.id].sort());
    expect((await db.select({ id: oauthClients.id }).from(oauthClients)).map((r) => r.id).sort()).toEqual(expect.arrayContaining(['new-unused', 'old-used']));
    expect(await db.select().from(oauthClients).where(eq(oauthClients.id, 'old-unused'))).toEqual([]);
    expect((await db.select({ h: oauthCodes.codeHash }).from(oauthCodes)).map((r) => r.h)).toEqual(['code-just-expired']);
    expect((await db.select({ h: oauthTokens.tokenHash }).from(oauthTokens)).map((r) => r.h)).toEqual(['token-live']);
    expect((await db.select({ h: oauthSessions.idHash }).from(oauthSessions)).map((r) => r.h)).toEqual(['session-live']);

    // A second pass finds nothing left to do.
    expect(Object.values(await cleanup.runOnce()).every((n) => n === 0)).toBe(true);
  });

  it('removes grants revoked more than 30 days ago, with their tokens and codes; keeps recently revoked ones', async () => {
    const db = t.database.db;
    const user = await a.user();
    await db.insert(oauthClients).values(client('revoking', ago(100)));
    const grant = (revokedAt: Date) => ({ userId: user.id, organizationId: a.orgId, clientId: 'revoking', scopes: ['mcp'], categories: ['contacts'], resource: 'http://x/mcp', revokedAt });
    const [old, recent] = await db.insert(oauthGrants).values([grant(ago(REVOKED_GRANT_DAYS + 1)), grant(ago(REVOKED_GRANT_DAYS - 1))]).returning();
    await db.insert(oauthTokens).values([
      { tokenHash: 'old-grant-token', kind: 'refresh', expiresAt: new Date(now.getTime() + DAY), grantId: old!.id },
      { tokenHash: 'recent-grant-token', kind: 'refresh', expiresAt: new Date(now.getTime() + DAY), grantId: recent!.id },
    ]);
    const counts = await createCleanup({ db, clock: () => now, log: silent, eventRetentionDays: 30 }).runOnce();
    expect(counts['revoked oauth grants']).toBe(1);
    expect((await db.select({ id: oauthGrants.id }).from(oauthGrants).where(eq(oauthGrants.clientId, 'revoking'))).map((g) => g.id)).toEqual([recent!.id]);
    expect((await db.select({ h: oauthTokens.tokenHash }).from(oauthTokens).where(inArray(oauthTokens.tokenHash, ['old-grant-token', 'recent-grant-token']))).map((r) => r.h)).toEqual(['recent-grant-token']);
  });

  it('honours the configured retention', async () => {
    const db = t.database.db;
    const [row] = await db.insert(events).values({ organizationId: a.orgId, type: 'contact.created', actorType: 'system', occurredAt: ago(8), dispatchedAt: ago(8) }).returning();
    await createCleanup({ db, clock: () => now, log: silent, eventRetentionDays: 10 }).runOnce();
    expect(await db.select().from(events).where(eq(events.id, row!.id))).toHaveLength(1);
    await createCleanup({ db, clock: () => now, log: silent, eventRetentionDays: 7 }).runOnce();
    expect(await db.select().from(events).where(eq(events.id, row!.id))).toHaveLength(0);
  });
});
