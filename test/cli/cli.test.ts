import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { and, count, eq, isNull, sql } from 'drizzle-orm';
import { isValidPhoneNumber } from 'libphonenumber-js/max';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { openDatabase, type Database } from '../../src/db/client.js';
import { DataDirBusyError } from '../../src/db/lock.js';
import * as schema from '../../src/db/schema.js';
import { openTestDatabase, testDbKind } from '../helpers/database.js';
import { cli, startServer } from '../helpers/cli.js';

/**
 * The real command line, spawned as a user runs it (from dist/, built once per run), against a
 * temporary DATA_DIR (embedded database) or a fresh PostgreSQL database.
 */

async function countRows(db: Database['db'], orgId: string) {
  const n = async (table: typeof schema.contacts | typeof schema.messages | typeof schema.customers | typeof schema.customerTransactions | typeof schema.businesses | typeof schema.folders | typeof schema.domains) => {
    const [row] = await db.select({ n: count() }).from(table).where(and(eq(table.organizationId, orgId), isNull(table.deletedAt)));
    return row!.n;
  };
  return {
    contacts: await n(schema.contacts),
    messages: await n(schema.messages),
    customers: await n(schema.customers),
    transactions: await n(schema.customerTransactions),
    businesses: await n(schema.businesses),
    folders: await n(schema.folders),
    domains: await n(schema.domains),
  };
}

// A fixed random seed: the data (e.g. whether a folder has a parent) is then the same on every run.
const SEED_ARGS = ['--random-seed', '7', '--contacts', '7', '--messages', '40', '--customers', '5', '--transactions', '11', '--businesses', '2', '--folders', '4', '--domains', '3'];
const SEED_COUNTS = { contacts: 7, messages: 40, customers: 5, transactions: 11, businesses: 2, folders: 4, domains: 3 };

/** What every seeded organization must look like, whichever database holds it. */
async function expectSeeded(db: Database['db'], orgId: string) {
  expect(await countRows(db, orgId)).toEqual(SEED_COUNTS);
  const phones = await db.select().from(schema.contactPhoneNumbers).where(eq(schema.contactPhoneNumbers.organizationId, orgId));
  expect(phones.length).toBeGreaterThanOrEqual(7);
  for (const p of phones) {
    expect(isValidPhoneNumber(p.phoneNumber), p.phoneNumber).toBe(true);
    expect(p.phoneNumber).toBe(`+${p.countryCode}${p.nationalNumber}`);
  }
  const emails = await db.select().from(schema.contactEmails).where(eq(schema.contactEmails.organizationId, orgId));
  expect(emails.length).toBeGreaterThanOrEqual(7);
  expect(emails.every((e) => /^[^@\s]+@[^@\s]+\.[a-z]+$/i.test(e.email))).toBe(true);
  const msgs = await db.select().from(schema.messages).where(eq(schema.messages.organizationId, orgId));
  expect(new Set(msgs.map((m) => m.direction))).toEqual(new Set(['incoming', 'outgoing']));
  for (const m of msgs) {
    expect(m.text!.length).toBeGreaterThan(10);
    expect(m.sender).toMatchObject({ name: expect.any(String) });
    expect(m.recipient).toMatchObject({ name: expect.any(String) });
  }
  // The stored search vector holds the words of the text, so seeded messages are searchable.
  const word = msgs[0]!.text!.split(/\W+/).find((w) => w.length > 4)!;
  const [hit] = await db
    .select({ n: count() })
    .from(schema.messages)
    .where(and(eq(schema.messages.organizationId, orgId), sql`${schema.messages.searchVector} @@ websearch_to_tsquery('simple', ${word})`));
  expect(hit!.n).toBeGreaterThan(0);
  const [child] = await db.select({ n: count() }).from(schema.folders).where(and(eq(schema.folders.organizationId, orgId), sql`${schema.folders.parentFolderId} IS NOT NULL`));
  expect(child!.n).toBeGreaterThan(0);
}

describe.runIf(testDbKind === 'pglite')('command line on the embedded database', () => {
  let dataDir: string;
  let env: Record<string, string>;
  beforeAll(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'sb-cli-'));
    env = { DATA_DIR: dataDir };
  });
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  test('bad command lines exit 2 with a JSON error on stdout and the message on stderr', async () => {
    const cases: [string[], RegExp][] = [
      [['frob'], /Unknown command "frob"/],
      [['org', 'create', '--name', 'X', '--bogus', '1'], /Unknown option '--bogus'/],
      [['org', 'credits', '--org', 'not-a-uuid', '--add', '1.5'], /--org must be a UUID.*--add must be an integer/],
      [['org', 'credits', '--org', '0b6f8a52-3c1d-4e8f-9a2b-7c4d5e6f7a8b'], /--add is required/],
    ];
    const results = await Promise.all(cases.map(([args]) => cli(args, env)));
    results.forEach((r, i) => {
      const [args, message] = cases[i]!;
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.json?.error?.code, args.join(' ')).toBe('VALIDATION_ERROR');
      expect(r.json.error.message).toMatch(message);
      expect(r.stderr).toMatch(message);
    });
    // A flag's problem is also in the spec's details tree.
    expect(results[3]!.json.error.details.properties.add.errors).toEqual(['is required']);
  });

  test('--help prints the usage on stderr and a JSON description on stdout', async () => {
    const [all, seed] = await Promise.all([cli(['--help'], env), cli(['seed', '--help'], env)]);
    expect(all.code).toBe(0);
    expect(all.json.commands.map((c: { command: string }) => c.command)).toEqual(['serve', 'migrate', 'org create', 'org credits', 'user create', 'user grants', 'user revoke-grant', 'user disable', 'user enable', 'user password', 'apikey create', 'apikey revoke', 'backup', 'restore', 'domain verify', 'seed']);
    expect(all.stderr).toMatch(/Usage: npm run -s cli -- <command>/);
    expect(seed.code).toBe(0);
    expect(seed.json.usage).toMatch(/^npm run -s cli -- seed --org ID \[--contacts N\]/);
    expect(seed.stderr).toMatch(/--messages N/);
  });

  test('without a server the CLI opens DATA_DIR itself, then releases it; seed creates what was asked', async () => {
    // An empty DATA_DIR: a new database only with --create-database.
    const refused = await cli(['org', 'create', '--name', 'Direct Org'], env);
    expect(refused.code).toBe(1);
    expect(refused.json.error.code).toBe('NOT_FOUND');
    expect(refused.stderr).toMatch(/holds no database, so the command did nothing.*--create-database/s);
    expect(existsSync(join(dataDir, 'pgdata'))).toBe(false);
    const org = await cli(['org', 'create', '--name', 'Direct Org', '--create-database'], env);
    expect(org.code, org.stderr).toBe(0);
    expect(org.json).toEqual({ id: expect.any(String), name: 'Direct Org', credits: 100 });
    expect(org.stderr).not.toMatch(/running server/);

    const unknown = await cli(['org', 'credits', '--org', '0b6f8a52-3c1d-4e8f-9a2b-7c4d5e6f7a8b', '--add', '1'], env);
    expect(unknown.code).toBe(1);
    expect(unknown.json.error).toEqual({ code: 'NOT_FOUND', message: 'Organization not found' });
    expect(unknown.stderr).toMatch(/Organization not found/);

    const seeded = await cli(['seed', '--org', org.json.id, ...SEED_ARGS, '--random-seed', '42'], env);
    expect(seeded.code, seeded.stderr).toBe(0);
    expect(seeded.json.created).toMatchObject(SEED_COUNTS);
    // stderr is not a terminal here: no progress bar, only the summary line.
    expect(seeded.stderr).toMatch(/^Seeded in [\d.]+ s: 7 contacts/);

    // The lock is released and no socket was left behind.
    expect(existsSync(join(dataDir, 'switchboard.pid'))).toBe(false);
    expect(existsSync(join(dataDir, 'switchboard.sock'))).toBe(false);
    const database = await openDatabase({ dataDir });
    try {
      await expectSeeded(database.db, org.json.id);
    } finally {
      await database.close();
    }
  }, 180_000);

  test('with a server running, commands go over its socket and take effect at once', async () => {
    // What a killed server leaves behind: the new one replaces both.
    writeFileSync(join(dataDir, 'switchboard.sock'), '');
    writeFileSync(join(dataDir, 'switchboard.pid'), '999999999');
    const server = await startServer({ DATA_DIR: dataDir });
    try {
      // The server holds the directory: its pid is in the lock and nobody else may open the files.
      expect(readFileSync(join(dataDir, 'switchboard.pid'), 'utf8')).toBe(String(server.child.pid));
      await expect(openDatabase({ dataDir })).rejects.toBeInstanceOf(DataDirBusyError);
      expect(statSync(join(dataDir, 'switchboard.sock')).mode & 0o777).toBe(0o600);

      const org = await cli(['org', 'create', '--name', 'Through the server'], env);
      expect(org.code, org.stderr).toBe(0);
      expect(org.json).toEqual({ id: expect.any(String), name: 'Through the server', credits: 100 });
      expect(org.stderr).toContain(`database: the embedded database in ${dataDir}, handled by the running server (pid ${server.child.pid})`);

      const [credits, tooMuch, user, some, badPermission] = await Promise.all([
        cli(['org', 'credits', '--org', org.json.id, '--add', '-30'], env),
        cli(['org', 'credits', '--org', org.json.id, '--add', '-1000'], env),
        cli(['user', 'create', '--org', org.json.id, '--email', 'ada@example.test', '--password', 'correct horse', '--name', 'Ada'], env),
        cli(['apikey', 'create', '--org', org.json.id, '--name', 'reader', '--permissions', 'contacts:read, messages:write'], env),
        cli(['apikey', 'create', '--org', org.json.id, '--permissions', 'contacts:read,everything'], env),
      ]);
      expect(credits.json).toEqual({ id: org.json.id, name: 'Through the server', credits: 70 });
      expect(tooMuch.code).toBe(1);
      expect(tooMuch.json.error.code).toBe('INSUFFICIENT_CREDITS');
      expect(user.json).toEqual({ id: expect.any(String), organizationId: org.json.id, email: 'ada@example.test', name: 'Ada' });
      expect(some.json.permissions).toEqual(['contacts:read', 'messages:write']);
      expect(badPermission.code).toBe(2);
      expect(badPermission.json.error.message).toMatch(/everything/);
      // Rules the server's answer carries exactly as a direct run would.
      const duplicate = await cli(['user', 'create', '--org', org.json.id, '--email', 'ADA@example.test', '--password', 'correct horse'], env);
      expect(duplicate.code).toBe(2);
      expect(duplicate.json.error.details.properties.email.errors).toEqual(['Already in use']);
      const badFlag = await cli(['apikey', 'revoke', '--id', 'nope'], env);
      expect(badFlag.code).toBe(2);

      const key = await cli(['apikey', 'create', '--org', org.json.id], env);
      expect(key.json).toMatchObject({ id: expect.any(String), key: expect.stringMatching(/^sb_/), permissions: ['*'] });
      // The key works, and is now in the server's few-second cache.
      expect((await server.rest('/contacts', key.json.key)).status).toBe(200);

      const seeded = await cli(['seed', '--org', org.json.id, '--contacts', '12', '--messages', '5', '--customers', '0', '--businesses', '0', '--folders', '0', '--domains', '0'], env);
      expect(seeded.code, seeded.stderr).toBe(0);
      const page = await server.rest('/contacts?limit=100', key.json.key);
      expect(((await page.json()) as { data: unknown[] }).data).toHaveLength(12);

      const revoked = await cli(['apikey', 'revoke', '--id', key.json.id], env);
      expect(revoked.json).toMatchObject({ id: key.json.id, revoked: true });
      expect(revoked.json).not.toHaveProperty('keyHash');
      expect((await server.rest('/contacts', key.json.key)).status).toBe(401);
      const twice = await cli(['apikey', 'revoke', '--id', key.json.id], env);
      expect(twice.code).toBe(1);
      expect(twice.json.error.code).toBe('NOT_FOUND');

      const migrated = await cli(['migrate'], env);
      expect(migrated.json).toEqual({ migrated: true, database: 'embedded' });
    } finally {
      expect(await server.stop()).toBe(0);
    }
    // A clean stop removes the socket and the lock; the CLI then opens the directory itself again.
    expect(existsSync(join(dataDir, 'switchboard.sock'))).toBe(false);
    expect(existsSync(join(dataDir, 'switchboard.pid'))).toBe(false);
    const database = await openDatabase({ dataDir });
    try {
      const [row] = await database.db.select().from(schema.organizations).where(eq(schema.organizations.name, 'Through the server'));
      expect(row?.credits).toBe(70);
    } finally {
      await database.close();
    }
  }, 240_000);
});

describe.runIf(testDbKind === 'postgres')('command line on PostgreSQL', () => {
  let database: Awaited<ReturnType<typeof openTestDatabase>>;
  let env: Record<string, string>;
  let dataDir: string;
  beforeAll(async () => {
    database = await openTestDatabase();
    dataDir = mkdtempSync(join(tmpdir(), 'sb-cli-pg-'));
    // A live pid in DATA_DIR's lock: with DATABASE_URL the CLI must ignore it and open PostgreSQL directly.
    writeFileSync(join(dataDir, 'switchboard.pid'), String(process.pid));
    env = { DATABASE_URL: database.url!, DATA_DIR: dataDir };
  });
  afterAll(async () => {
    await database?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('every command runs directly against the database', async () => {
    const org = await cli(['org', 'create', '--name', 'PG Org', '--credits', '7'], env);
    expect(org.code, org.stderr).toBe(0);
    expect(org.json).toEqual({ id: expect.any(String), name: 'PG Org', credits: 7 });
    expect(org.stderr).not.toMatch(/running server/);
    expect((await cli(['org', 'credits', '--org', org.json.id, '--add', '3'], env)).json.credits).toBe(10);
    const unknown = await cli(['user', 'create', '--org', '0b6f8a52-3c1d-4e8f-9a2b-7c4d5e6f7a8b', '--email', 'x@example.test', '--password', 'long enough'], env);
    expect(unknown.code).toBe(1);
    expect(unknown.json.error.code).toBe('NOT_FOUND');

    const seeded = await cli(['seed', '--org', org.json.id, ...SEED_ARGS], env);
    expect(seeded.code, seeded.stderr).toBe(0);
    await expectSeeded(database.db, org.json.id);

    const migrated = await cli(['migrate'], env);
    expect(migrated.json).toEqual({ migrated: true, database: 'postgres' });
  }, 180_000);

  test('with a server on the same database, a revoked key stops working within the cache time', async () => {
    const server = await startServer({ DATABASE_URL: database.url!, DATA_DIR: dataDir, API_KEY_CACHE_MS: '500' });
    try {
      const org = await cli(['org', 'create', '--name', 'Live'], env);
      const key = await cli(['apikey', 'create', '--org', org.json.id, '--permissions', 'contacts:read'], env);
      expect((await server.rest('/contacts', key.json.key)).status).toBe(200);
      const revoked = await cli(['apikey', 'revoke', '--id', key.json.id], env);
      expect(revoked.code).toBe(0);
      await new Promise((r) => setTimeout(r, 600));
      expect((await server.rest('/contacts', key.json.key)).status).toBe(401);
    } finally {
      await server.stop();
    }
  }, 180_000);

  test('an unreachable database is a clear error, not a hang', async () => {
    const r = await cli(['org', 'create', '--name', 'Nowhere'], { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none', DATA_DIR: dataDir });
    expect(r.code).toBe(1);
    expect(r.json.error.code).toBe('SERVICE_UNAVAILABLE');
    // One line naming DATABASE_URL and what failed.
    expect(r.stderr).toContain('switchboard: error: Cannot reach the database of DATABASE_URL (postgres://postgres@127.0.0.1:1/none): nothing accepts connections on 127.0.0.1:1');
  }, 60_000);
});
