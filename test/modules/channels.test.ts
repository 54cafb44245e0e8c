import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, useTestApp, type Tenant } from '../helpers/app.js';
import { testDbKind } from '../helpers/database.js';
import { loadChannelCredentials } from '../../src/modules/channels/channels.repository.js';
import { reencryptSecrets } from '../../src/db/encrypted-columns.js';
import { verifyDomainFor } from '../helpers/domains.js';
import { configureSecrets } from '../../src/core/encryption.js';
import { channels } from '../../src/db/schema.js';
import { eq } from 'drizzle-orm';

const SECRETS_KEY = randomBytes(32).toString('base64');
const { t, a, b } = useTestApp({ app: { env: { SECRETS_KEY, CHANNELS_ALLOW_PRIVATE: 'true' } } });

let n = 0;
const uniqueAddress = () => `support-${++n}-${Math.random().toString(36).slice(2, 8)}@acme.example`;

// Receiving through the SMTP receiver needs the domain verified: acme.example is organization a's.
beforeAll(async () => {
  await verifyDomainFor(t.database.db, a.orgId, 'acme.example');
  await verifyDomainFor(t.database.db, b.orgId, 'beta.example');
});
const uniqueAddressOfB = () => uniqueAddress().replace('@acme.example', '@beta.example');

const imapChannel = (extra: Record<string, unknown> = {}) => ({
  type: 'email',
  name: 'Support',
  address: uniqueAddress(),
  inbound: { mode: 'imap', host: 'imap.acme.example', username: 'support', password: 'imap-secret-1' },
  outbound: { host: 'smtp.acme.example', port: 587, username: 'support', password: 'smtp-secret-1' },
  ...extra,
});

const addChannel = async (who: Tenant, body: Record<string, unknown> = imapChannel()) => {
  const res = await who.request('POST', '/v1/channels', body);
  expect(res.status, res.body).toBe(201);
  return res.json.data as { id: string; [k: string]: unknown };
};

describe('channels', () => {
  it('creates, reads, lists, updates and soft-deletes a channel; passwords are never answered', async () => {
    const c = await addChannel(a, imapChannel({ address: 'Support@Acme.Example' }));
    expect(c).toMatchObject({
      type: 'email',
      name: 'Support',
      address: 'support@acme.example',
      inbound: { mode: 'imap', host: 'imap.acme.example', port: 993, secure: true, username: 'support', mailbox: 'INBOX', passwordSet: true },
      outbound: { host: 'smtp.acme.example', port: 587, secure: false, username: 'support', from: null, passwordSet: true },
      status: 'active',
      lastError: null,
      lastSyncAt: null,
      organizationId: a.orgId,
    });
    expect(JSON.stringify(c)).not.toContain('secret-1');
    expect((await a.request('GET', `/v1/channels/${c.id}`)).json.data).toEqual(c);
    const list = await a.request('GET', '/v1/channels?limit=100');
    expect(list.json.data.map((x: { id: string }) => x.id)).toContain(c.id);

    // Stored encrypted; the workers' loader decrypts.
    const [row] = await t.database.db.select().from(channels).where(eq(channels.id, c.id));
    expect(row!.inboundSecret).toMatch(/^v1\./);
    expect(row!.inboundSecret).not.toContain('imap-secret-1');
    const creds = await loadChannelCredentials(t.database.db, c.id);
    expect(creds.inbound.password).toBe('imap-secret-1');
    expect(creds.outbound?.password).toBe('smtp-secret-1');

    // PATCH: a password left out is kept; a new one replaces it.
    const upd = await a.request('PATCH', `/v1/channels/${c.id}`, {
      name: 'Help desk',
      inbound: { mode: 'imap', host: 'imap2.acme.example', username: 'help' },
      outbound: { host: 'smtp.acme.example', password: 'smtp-secret-2' },
      status: 'disabled',
    });
    expect(upd.status, upd.body).toBe(200);
    expect(upd.json.data).toMatchObject({ name: 'Help desk', status: 'disabled', inbound: { host: 'imap2.acme.example', username: 'help', passwordSet: true } });
    const creds2 = await loadChannelCredentials(t.database.db, c.id);
    expect(creds2.inbound.password).toBe('imap-secret-1');
    expect(creds2.outbound?.password).toBe('smtp-secret-2');

    // outbound null removes the relay and its password.
    const noRelay = await a.request('PATCH', `/v1/channels/${c.id}`, { outbound: null });
    expect(noRelay.json.data.outbound).toBeNull();

    // Events carry no password.
    const events = await a.request('GET', `/v1/events?limit=100`);
    const mine = events.json.data.filter((e: { resourceId: string }) => e.resourceId === c.id);
    expect(mine.map((e: { type: string }) => e.type).sort()).toEqual(['channel.created', 'channel.updated', 'channel.updated']);
    expect(JSON.stringify(mine)).not.toMatch(/secret-[12]|v1\./);

    const del = await a.request('DELETE', `/v1/channels/${c.id}`);
    expect(del.status).toBe(200);
    expect(del.json.data.deletedAt).not.toBeNull();
    expect((await a.request('GET', `/v1/channels/${c.id}`)).status).toBe(404);
    await expect(loadChannelCredentials(t.database.db, c.id)).rejects.toThrow(/not found/);
    // The address may be used again once deleted.
    await addChannel(a, imapChannel({ address: 'support@acme.example' }));
  });

  it('validates the body and refuses a duplicate address in the organization, not across organizations', async () => {
    const address = uniqueAddress();
    await addChannel(a, { type: 'email', name: 'In', address, inbound: { mode: 'smtp' } });
    const dup = await a.request('POST', '/v1/channels', { type: 'email', name: 'In', address: address.toUpperCase(), inbound: { mode: 'smtp' } });
    expect(dup.status).toBe(400);
    expect(dup.json.error.details.properties.address.errors[0]).toMatch(/already exists/);
    // Another organization can neither receive at an address of a domain the first verified (SMTP or IMAP)
    // nor rename a channel to it: 409, without naming whose it is.
    const claimed = await b.request('POST', '/v1/channels', { type: 'email', name: 'In', address: address.toUpperCase(), inbound: { mode: 'smtp' } });
    expect(claimed.status).toBe(409);
    expect(claimed.json.error.code).toBe('CONFLICT');
    expect(claimed.body).not.toContain(a.orgId);
    const other = await addChannel(b, { type: 'email', name: 'In', address: uniqueAddressOfB(), inbound: { mode: 'smtp' } });
    const renamed = await b.request('PATCH', `/v1/channels/${other.id}`, { address });
    expect(renamed.status).toBe(409);
    const imapOfB = await b.request('POST', '/v1/channels', { type: 'email', name: 'In', address, inbound: { mode: 'imap', host: 'imap.acme.example', username: 'u', password: 'p' } });
    expect(imapOfB.status).toBe(409);

    const bad = [
      { type: 'sms', name: 'x', address: uniqueAddress(), inbound: { mode: 'smtp' } },
      { type: 'email', name: 'x', address: 'not-an-address', inbound: { mode: 'smtp' } },
      { type: 'email', name: 'x', address: uniqueAddress(), inbound: { mode: 'pop3' } },
      { type: 'email', name: 'x', address: uniqueAddress(), inbound: { mode: 'imap', host: 'imap.acme.example', username: 'u' } },
      { type: 'email', name: 'x', address: uniqueAddress(), inbound: { mode: 'imap', host: 'bad host', username: 'u', password: 'p' } },
      { type: 'email', name: 'x', address: uniqueAddress(), inbound: { mode: 'smtp' }, outbound: { host: 'smtp.acme.example', port: 70000 } },
      { type: 'email', name: 'x', address: uniqueAddress(), inbound: { mode: 'smtp', password: 'p' } },
    ];
    for (const body of bad) {
      const res = await a.request('POST', '/v1/channels', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json.error.code).toBe('VALIDATION_ERROR');
    }
  });

  it("answers 404 for another organization's channel", async () => {
    const c = await addChannel(a);
    for (const [method, url, body] of [
      ['GET', `/v1/channels/${c.id}`],
      ['PATCH', `/v1/channels/${c.id}`, { name: 'x' }],
      ['DELETE', `/v1/channels/${c.id}`],
      ['POST', `/v1/channels/${c.id}/test`, {}],
    ] as const) {
      expect((await b.request(method, url, body)).status).toBe(404);
    }
    expect((await a.request('GET', `/v1/channels/${c.id}`)).json.data.name).toBe('Support');
  });

  it('needs the channels permission', async () => {
    const reader = await a.keyWith(['channels:read']);
    expect((await reader.request('GET', '/v1/channels')).status).toBe(200);
    expect((await reader.request('POST', '/v1/channels', imapChannel())).status).toBe(403);
    const other = await a.keyWith(['messages:read']);
    expect((await other.request('GET', '/v1/channels')).status).toBe(403);
  });

  describe('POST /channels/{id}/test', () => {
    let relay: SMTPServer;
    let port = 0;
    beforeAll(async () => {
      relay = new SMTPServer({
        authOptional: false,
        disabledCommands: ['STARTTLS'],
        onAuth(auth, _session, callback) {
          if (auth.username === 'relay-user' && auth.password === 'relay-pass') return callback(null, { user: auth.username });
          callback(new Error('Invalid username or password'));
        },
      });
      await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
      port = (relay.server.address() as AddressInfo).port;
    });
    afterAll(() => new Promise<void>((resolve) => relay.close(() => resolve())));

    it('connects to the relay, reads the greeting and logs in; answers what failed', async () => {
      const good = await addChannel(a, { type: 'email', name: 'Out', address: uniqueAddress(), inbound: { mode: 'smtp' }, outbound: { host: '127.0.0.1', port, username: 'relay-user', password: 'relay-pass', tls: 'none' } });
      const ok = await a.request('POST', `/v1/channels/${good.id}/test`, {});
      expect(ok.status, ok.body).toBe(200);
      expect(ok.json.data).toMatchObject({ ok: true, inbound: { mode: 'smtp', ok: true }, outbound: { ok: true, error: null } });
      expect(ok.json.data.outbound.steps.map((s: { step: string }) => s.step)).toEqual(['sign', 'resolve', 'login']);

      const wrong = await addChannel(a, { type: 'email', name: 'Out', address: uniqueAddress(), inbound: { mode: 'smtp' }, outbound: { host: '127.0.0.1', port, username: 'relay-user', password: 'nope', tls: 'none' } });
      const failed = (await a.request('POST', `/v1/channels/${wrong.id}/test`, {})).json.data;
      expect(failed.ok).toBe(false);
      expect(failed.outbound.steps).toMatchObject([{ step: 'sign', ok: true }, { step: 'resolve', ok: true }, { step: 'login', ok: false }]);
      expect(failed.outbound.error).toMatch(/login: .*(Invalid|auth)/i);
      expect(JSON.stringify(failed)).not.toContain('nope');
    });

    it('reports an IMAP server that cannot be reached', async () => {
      // A port nothing listens on: the relay's, once closed, is not predictable; take the relay's port + a listener closed at once.
      const closed = new SMTPServer({});
      await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
      const closedPort = (closed.server.address() as AddressInfo).port;
      await new Promise<void>((resolve) => closed.close(() => resolve()));
      const c = await addChannel(a, { type: 'email', name: 'Imap', address: uniqueAddress(), inbound: { mode: 'imap', host: '127.0.0.1', port: closedPort, secure: false, username: 'u', password: 'p', tls: 'none' } });
      const res = (await a.request('POST', `/v1/channels/${c.id}/test`, {})).json.data;
      expect(res).toMatchObject({ ok: false, outbound: null, inbound: { mode: 'imap', ok: false } });
      expect(res.inbound.steps).toMatchObject([{ step: 'resolve', ok: true }, { step: 'login', ok: false }]);
      expect(res.inbound.error).toMatch(/ECONNREFUSED|refused/i);
    });
  });
});

describe('rotating the secrets key', () => {
  it('re-encrypts every stored password under the new key; the old values still decrypt meanwhile', async () => {
    const c = await addChannel(a);
    const [before] = await t.database.db.select().from(channels).where(eq(channels.id, c.id));
    const newKey = randomBytes(32).toString('base64');
    configureSecrets({ key: newKey, previousKeys: [SECRETS_KEY], dataDir: t.config.dataDir, requireConfiguredKey: true });
    expect((await loadChannelCredentials(t.database.db, c.id)).inbound.password).toBe('imap-secret-1');
    expect(await reencryptSecrets(t.database.db)).toBeGreaterThanOrEqual(1);
    const [after] = await t.database.db.select().from(channels).where(eq(channels.id, c.id));
    expect(after!.inboundSecret!.split('.')[1]).not.toBe(before!.inboundSecret!.split('.')[1]);
    expect(await reencryptSecrets(t.database.db)).toBe(0);
    // Without the previous key, the new values decrypt.
    configureSecrets({ key: newKey, dataDir: t.config.dataDir, requireConfiguredKey: true });
    const creds = await loadChannelCredentials(t.database.db, c.id);
    expect([creds.inbound.password, creds.outbound?.password]).toEqual(['imap-secret-1', 'smtp-secret-1']);
  });
});

describe('channels without CHANNELS_ALLOW_PRIVATE', () => {
  const { t: app, a: tenant } = useTestApp({ app: { env: { SECRETS_KEY } } });
  it('refuses to connect to a loopback or private mail server', async () => {
    await verifyDomainFor(app.database.db, tenant.orgId, 'acme.example');
    const c = await addChannel(tenant, { type: 'email', name: 'Out', address: uniqueAddress(), inbound: { mode: 'smtp' }, outbound: { host: '127.0.0.1', port: 25 } });
    const res = (await tenant.request('POST', `/v1/channels/${c.id}/test`, {})).json.data;
    expect(res.outbound).toMatchObject({ ok: false, steps: [{ step: 'sign', ok: true }, { step: 'resolve', ok: false }] });
    expect(res.outbound.error).toMatch(/private, loopback or reserved.*CHANNELS_ALLOW_PRIVATE/);
  });
});

describe.runIf(testDbKind === 'postgres')('channels on PostgreSQL without SECRETS_KEY', () => {
  it('refuses a password with a 400 that names SECRETS_KEY, and accepts a channel without one', async () => {
    const app = await createTestApp({ env: { SECRETS_KEY: '' } });
    try {
      const tenant = await app.tenant();
      const res = await tenant.request('POST', '/v1/channels', imapChannel());
      expect(res.status).toBe(400);
      expect(res.json.error.details.properties.inbound.properties.password.errors[0]).toMatch(/SECRETS_KEY/);
      await verifyDomainFor(app.database.db, tenant.orgId, 'acme.example');
      expect((await tenant.request('POST', '/v1/channels', { type: 'email', name: 'In', address: uniqueAddress(), inbound: { mode: 'smtp' } })).status).toBe(201);
    } finally {
      await app.close();
    }
  });
});
