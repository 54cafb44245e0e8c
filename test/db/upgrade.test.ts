import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { btree_gin } from '@electric-sql/pglite/contrib/btree_gin';
import { sql } from 'drizzle-orm';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { migrate as migratePg } from 'drizzle-orm/node-postgres/migrator';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../src/db/client.js';
import { testDbKind } from '../helpers/database.js';
import { withDatabase } from '../helpers/postgres-setup.js';

/**
 * A database that 0.1.0 migrated takes the migrations that came after it (CHANGELOG.md: a release's
 * migrations apply on the one before). The migrator applies every migration stamped later than the last one
 * the database ran, so a migration renumbered or restamped after a release runs again there.
 */

const CURRENT = join(import.meta.dirname, '../../drizzle');
interface JournalEntry {
  idx: number;
  version: string;
  when: number;
  tag: string;
  breakpoints: boolean;
}

/** 0.1.0's migrations: 0000 to 0019 as today, then `secret_keys` as 0020 with the stamp it was released with. */
function releaseMigrations(): string {
  const dir = mkdtempSync(join(tmpdir(), 'sb-migrations-0.1.0-'));
  mkdirSync(join(dir, 'meta'));
  const journal = JSON.parse(readFileSync(join(CURRENT, 'meta/_journal.json'), 'utf8')) as { entries: JournalEntry[] };
  const entries = journal.entries.filter((e) => e.idx < 20);
  for (const e of entries) copyFileSync(join(CURRENT, `${e.tag}.sql`), join(dir, `${e.tag}.sql`));
  copyFileSync(join(CURRENT, '0021_secret_keys.sql'), join(dir, '0020_secret_keys.sql'));
  entries.push({ idx: 20, version: '7', when: 1795852940050, tag: '0020_secret_keys', breakpoints: true });
  writeFileSync(join(dir, 'meta/_journal.json'), JSON.stringify({ ...journal, entries }));
  return dir;
}

const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

/** A database as 0.1.0 left it, opened by this checkout. */
async function releasedDatabase(): Promise<Database> {
  const folder = releaseMigrations();
  cleanups.push(() => rmSync(folder, { recursive: true, force: true }));
  if (testDbKind === 'pglite') {
    const client = new PGlite({ extensions: { btree_gin } });
    await migratePglite(drizzlePglite(client), { migrationsFolder: folder });
    const tarball = await client.dumpDataDir('none');
    await client.close();
    const database = await openDatabase({ initialData: new Uint8Array(await tarball.arrayBuffer()) });
    cleanups.push(() => database.close());
    return database;
  }
  const admin = process.env.SB_TEST_PG_URL!;
  const name = `sb_upgrade_${randomBytes(4).toString('hex')}`;
  const run = async (statement: string) => {
    const c = new pg.Client({ connectionString: admin });
    await c.connect();
    await c.query(statement).finally(() => c.end());
  };
  await run(`CREATE DATABASE ${name}`);
  cleanups.push(() => run(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
  const client = new pg.Client({ connectionString: withDatabase(admin, name) });
  await client.connect();
  await migratePg(drizzlePg(client), { migrationsFolder: folder }).finally(() => client.end());
  const database = await openDatabase({ url: withDatabase(admin, name), poolSize: 2 });
  cleanups.push(() => database.close());
  return database;
}

describe('upgrading from 0.1.0', () => {
  it("applies this checkout's migrations to a database 0.1.0 migrated", async () => {
    const database = await releasedDatabase();
    await database.migrate();
    const tables = await database.db.execute<{ name: string }>(sql`SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public'`);
    const names = tables.rows.map((r) => r.name);
    expect(names).toEqual(expect.arrayContaining(['secret_keys', 'automatic_messages', 'threads', 'whatsapp_outbox']));
    expect(names).not.toContain('automatic_mails');
  });
});
