import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { and, count, eq, isNull } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { executeCommandLine } from '../../src/cli/execute.js';
import { channels, domains } from '../../src/db/schema.js';
import { createTestApp, type Tenant, type TestApp } from '../helpers/app.js';
import { entry } from '../helpers/cli.js';
import { testDbKind } from '../helpers/database.js';
import { skipWithoutDnsmasq, startDnsmasq, type DnsServer } from '../helpers/dnsmasq.js';
import { verifyDomainFor } from '../helpers/domains.js';

/**
 * CONTRACT §8 "Verified domains": a domain is proved by a TXT record `_switchboard.<domain>` holding its
 * token, looked up through DNS_SERVERS (a real dnsmasq here); receiving through the SMTP receiver needs it;
 * a domain verified by one organization cannot be verified or used by another (409, owner not named).
 */

const noDnsmasq = skipWithoutDnsmasq();
let dns: DnsServer;
let t: TestApp;
let a: Tenant;
let b: Tenant;

beforeAll(async () => {
  if (noDnsmasq) return;
  dns = await startDnsmasq();
  t = await createTestApp({ env: { DNS_SERVERS: dns.server, SECRETS_KEY: randomBytes(32).toString('base64') } });
  a = await t.tenant();
  b = await t.tenant();
}, 60_000);
afterAll(async () => {
  await t?.close();
  await dns?.close();
});

const unique = (label: string) => `${label}-${Math.random().toString(36).slice(2, 8)}.example`;
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

async function addDomain(who: Tenant, name: string): Promise<Json> {
  const res = await who.request('POST', '/v1/domains', { name });
  expect(res.status, res.body).toBe(201);
  return res.json.data as Json;
}

async function channelCount(orgId: string): Promise<number> {
  const [row] = await t.database.db.select({ n: count() }).from(channels).where(and(eq(channels.organizationId, orgId), isNull(channels.deletedAt)));
  return Number(row!.n);
}

const smtpChannel = (address: string, extra: Json = {}) => ({ type: 'email', name: 'In', address, inbound: { mode: 'smtp' }, ...extra });
const imapChannel = (address: string) => ({ type: 'email', name: 'Box', address, inbound: { mode: 'imap', host: 'imap.provider.example', username: 'u', password: 'p' } });

describe.skipIf(noDnsmasq)('domain verification', () => {
  it('stays pending until the TXT record _switchboard.<domain> holds the token, then is verified', async () => {
    const name = unique('owned');
    const domain = await addDomain(a, name);
    expect(domain.verification).toMatchObject({ status: 'pending', verifiedAt: null, record: { type: 'TXT', name: `_switchboard.${name}` } });
    expect(domain.verification.token).toMatch(/^switchboard-verification=[0-9a-f]{32}$/);
    expect(domain.verification.record.value).toBe(domain.verification.token);

    // No record, then a record with another value: 400 saying what to publish, and still pending.
    const missing = await a.request('POST', `/v1/domains/${domain.id}/verify`, {});
    expect(missing.status).toBe(400);
    expect(missing.json.error.message).toContain(`_switchboard.${name}`);
    expect(missing.json.error.message).toContain(domain.verification.token);
    await dns.setTxt({ [`_switchboard.${name}`]: 'switchboard-verification=0123456789abcdef0123456789abcdef' });
    expect((await a.request('POST', `/v1/domains/${domain.id}/verify`, {})).status).toBe(400);
    expect((await a.request('GET', `/v1/domains/${domain.id}`)).json.data.verification.status).toBe('pending');

    // Another organization cannot verify (or even see) this domain record.
    expect((await b.request('POST', `/v1/domains/${domain.id}/verify`, {})).status).toBe(404);

    await dns.setTxt({ [`_switchboard.${name}`]: ['v=spf1 -all', domain.verification.token] });
    const verified = await a.request('POST', `/v1/domains/${domain.id}/verify`, {});
    expect(verified.status, verified.body).toBe(200);
    expect(verified.json.data.verification).toMatchObject({ status: 'verified', token: domain.verification.token });
    expect(verified.json.data.verification.verifiedAt).not.toBeNull();
    const events = (await a.request('GET', '/v1/events?type=domain.updated&limit=100')).json.data as Json[];
    expect(events.some((e) => e.resourceId === domain.id)).toBe(true);
    // Again: answers it as it is.
    expect((await a.request('POST', `/v1/domains/${domain.id}/verify`, {})).json.data.verification.status).toBe('verified');
    // Now the organization receives at it.
    expect((await a.request('POST', '/v1/channels', smtpChannel(`billing@${name}`))).status).toBe(201);
  });

  it("refuses another organization's domain with 409 CONFLICT, never naming the owner, and writes nothing", async () => {
    const name = unique('a1');
    const owned = await addDomain(a, name);
    await dns.setTxt({ [`_switchboard.${name}`]: owned.verification.token });
    expect((await a.request('POST', `/v1/domains/${owned.id}/verify`, {})).status).toBe(200);
    await a.request('POST', '/v1/channels', smtpChannel(`billing@${name}`));

    // b may add the name (pending), but not verify it, even when its own token is published too.
    const squat = await addDomain(b, name);
    await dns.setTxt({ [`_switchboard.${name}`]: [owned.verification.token, squat.verification.token] });
    const before = await channelCount(b.orgId);
    const refused = await b.request('POST', `/v1/domains/${squat.id}/verify`, {});
    expect(refused.status).toBe(409);
    expect(refused.json.error.code).toBe('CONFLICT');
    for (const res of [refused]) {
      expect(res.body).not.toContain(a.orgId);
      expect(res.body).not.toContain('Test org');
    }
    expect((await b.request('GET', `/v1/domains/${squat.id}`)).json.data.verification.status).toBe('pending');

    // Nor receive at it, through SMTP or IMAP, nor rename a channel to it, nor name it as the sender.
    for (const body of [smtpChannel(`billing@${name}`), smtpChannel(`other@${name}`), imapChannel(`billing@${name}`)]) {
      const res = await b.request('POST', '/v1/channels', body);
      expect(res.status, JSON.stringify(body)).toBe(409);
      expect(res.json.error.code).toBe('CONFLICT');
      expect(res.body).not.toContain(a.orgId);
    }
    const box = await b.request('POST', '/v1/channels', imapChannel(`box@${unique('mine')}`));
    expect(box.status, box.body).toBe(201);
    expect((await b.request('PATCH', `/v1/channels/${box.json.data.id}`, { address: `billing@${name}` })).status).toBe(409);
    expect(await channelCount(b.orgId)).toBe(before + 1);

    // The operator's forced verification refuses it too.
    const forced = await executeCommandLine(['domain', 'verify', '--org', b.orgId, '--domain', name, '--force'], { db: t.database.db, migrate: async () => {}, databaseKind: testDbKind });
    expect(forced.exitCode).toBe(1);
    expect(forced.body).toMatchObject({ error: { code: 'CONFLICT' } });
    const [row] = await t.database.db.select().from(domains).where(eq(domains.id, squat.id));
    expect(row!.verifiedAt).toBeNull();
  });

  it("the owner's verification releases addresses another organization took before domains were verified", async () => {
    const name = unique('legacy');
    // A channel made before receiving needed a verified domain (written directly: the API refuses it now).
    const [squatted] = await t.database.db
      .insert(channels)
      .values({ organizationId: b.orgId, type: 'email', name: 'Squat', address: `billing@${name}`, inbound: { mode: 'smtp' } })
      .returning();
    const blocked = await a.request('POST', '/v1/channels', smtpChannel(`billing@${name}`));
    expect(blocked.status).toBe(400);
    const owned = await addDomain(a, name);
    await dns.setTxt({ [`_switchboard.${name}`]: owned.verification.token });
    expect((await a.request('POST', `/v1/domains/${owned.id}/verify`, {})).status).toBe(200);
    expect((await b.request('GET', `/v1/channels/${squatted!.id}`)).status).toBe(404);
    const deleted = (await b.request('GET', '/v1/events?type=channel.deleted&limit=100')).json.data as Json[];
    const event = deleted.find((e) => e.resourceId === squatted!.id);
    expect(event).toBeDefined();
    expect(JSON.stringify(event)).not.toContain(a.orgId);
    expect((await a.request('POST', '/v1/channels', smtpChannel(`billing@${name}`))).status).toBe(201);
  });

  it('receiving through the SMTP receiver needs the domain verified by the organization; an IMAP mailbox does not', async () => {
    const name = unique('unverified');
    await addDomain(a, name);
    const before = await channelCount(a.orgId);
    const refused = await a.request('POST', '/v1/channels', smtpChannel(`help@${name}`));
    expect(refused.status).toBe(400);
    expect(refused.json.error.details.properties.address.errors[0]).toMatch(/verified/);
    expect(await channelCount(a.orgId)).toBe(before);
    // An IMAP mailbox at a provider's domain: the login proves the mailbox is the organization's.
    const imap = await a.request('POST', '/v1/channels', imapChannel(`help@${name}`));
    expect(imap.status, imap.body).toBe(201);
    // Switching it to the SMTP receiver needs the domain.
    const switched = await a.request('PATCH', `/v1/channels/${imap.json.data.id}`, { inbound: { mode: 'smtp' } });
    expect(switched.status).toBe(400);
    expect((await a.request('GET', `/v1/channels/${imap.json.data.id}`)).json.data.inbound.mode).toBe('imap');
  });

  it("outbound.from is the channel's address or an address at a domain the organization verified", async () => {
    const mine = unique('mine');
    await verifyDomainFor(t.database.db, a.orgId, mine);
    const theirs = unique('theirs');
    await verifyDomainFor(t.database.db, b.orgId, theirs);
    const relay = { host: 'smtp.provider.example', port: 587 };
    const ok = [`support@${mine}`, `Acme <SUPPORT@${mine}>`, `Billing <billing@${mine}>`];
    for (const from of ok) {
      const res = await a.request('POST', '/v1/channels', smtpChannel(`s${Math.random().toString(36).slice(2, 6)}@${mine}`, { outbound: { ...relay, from } }));
      expect(res.status, `${from}: ${res.body}`).toBe(201);
    }
    // An IMAP channel at an unverified domain sends as its own address.
    const box = `me@${unique('box')}`;
    expect((await a.request('POST', '/v1/channels', { ...imapChannel(box), outbound: { ...relay, from: `Me <${box}>` } })).status).toBe(201);

    const before = await channelCount(a.orgId);
    for (const from of [`ceo@${theirs}`, 'ceo@bank.example', `Acme <support@${mine}>, x@bank.example`, 'Acme']) {
      const res = await a.request('POST', '/v1/channels', smtpChannel(`x@${mine}`, { outbound: { ...relay, from } }));
      expect(res.status, from).toBe(400);
      expect(res.json.error.details.properties.outbound.properties.from.errors[0]).toBeTruthy();
      expect(res.body).not.toContain(b.orgId);
    }
    expect(await channelCount(a.orgId)).toBe(before);
    const c = await a.request('POST', '/v1/channels', smtpChannel(`y@${mine}`, { outbound: relay }));
    const patched = await a.request('PATCH', `/v1/channels/${c.json.data.id}`, { outbound: { ...relay, from: `ceo@${theirs}` } });
    expect(patched.status).toBe(400);
    expect((await a.request('GET', `/v1/channels/${c.json.data.id}`)).json.data.outbound.from).toBeNull();
  });

  it('domain verify --force through a running server (its command socket runs this) creates the domain when missing and prints it', async () => {
    const name = unique('forced');
    const out = await executeCommandLine(['domain', 'verify', '--org', a.orgId, '--domain', name.toUpperCase(), '--force'], { db: t.database.db, migrate: async () => {}, databaseKind: testDbKind });
    expect(out.exitCode, JSON.stringify(out.body)).toBe(0);
    expect(out.body).toMatchObject({ name, organizationId: a.orgId, verification: { status: 'verified' } });
    // Again: the same domain, still verified.
    const again = await executeCommandLine(['domain', 'verify', '--org', a.orgId, '--domain', name, '--force'], { db: t.database.db, migrate: async () => {}, databaseKind: testDbKind });
    expect(again.body.id).toBe(out.body.id);
    // Without --force, through DNS: the record is not there, so it stays pending and says what to publish.
    const viaDns = await executeCommandLine(['domain', 'verify', '--org', a.orgId, '--domain', unique('dns')], { db: t.database.db, migrate: async () => {}, databaseKind: testDbKind });
    expect(viaDns.exitCode).toBe(2);
    expect(viaDns.message).toMatch(/_switchboard\..*switchboard-verification=/);
    const unknownOrg = await executeCommandLine(['domain', 'verify', '--org', '0b6f8a52-3c1d-4e8f-9a2b-7c4d5e6f7a8b', '--domain', name, '--force'], { db: t.database.db, migrate: async () => {}, databaseKind: testDbKind });
    expect(unknownOrg.exitCode).toBe(1);
    expect((await a.request('POST', '/v1/channels', smtpChannel(`hi@${name}`))).status).toBe(201);
  });
});

describe.runIf(testDbKind === 'pglite')('domain verify on the command line, without a server', () => {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
  let dataDir: string;
  beforeAll(() => void (dataDir = mkdtempSync(join(tmpdir(), 'sb-domain-'))));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  const cli = (args: string[]) =>
    new Promise<{ code: number | null; json: Json; stderr: string }>((done, fail) => {
      const env: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: 'warn', DATA_DIR: dataDir };
      delete env.DATABASE_URL;
      const child = spawn(process.execPath, [entry.cli, ...args], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      child.on('error', fail);
      child.on('close', (code) => done({ code, json: JSON.parse(stdout || 'null') as Json, stderr }));
    });

  it('prints the verified domain as JSON', async () => {
    const org = await cli(['org', 'create', '--name', 'Solo', '--create-database']);
    expect(org.code, org.stderr).toBe(0);
    const res = await cli(['domain', 'verify', '--org', org.json.id, '--domain', 'solo.example', '--force']);
    expect(res.code, res.stderr).toBe(0);
    expect(res.json).toMatchObject({ name: 'solo.example', organizationId: org.json.id, verification: { status: 'verified' } });
    expect(res.stderr).toMatch(/solo\.example is verified/);
  }, 60_000);
});
