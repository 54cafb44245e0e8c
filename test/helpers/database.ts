import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { openDatabase, type Database } from '../../src/db/client.js';
import { withDatabase } from './postgres-setup.js';

export const testDbKind = (process.env.SB_TEST_DB ?? 'pglite') as 'pglite' | 'postgres';

let template: Uint8Array | undefined;

/** The migrated embedded database that test/helpers/global-setup.ts dumped for this run (a `backup()` tarball). */
export function pgliteTemplate(): Uint8Array {
  const path = process.env.SB_TEST_PGLITE_TEMPLATE;
  if (!path) throw new Error('SB_TEST_PGLITE_TEMPLATE is not set: run the tests through vitest (vitest.config.ts sets it)');
  return (template ??= readFileSync(path));
}

/**
 * A fresh, migrated database for one test file: an in-memory PGlite loaded from the migrated template
 * (test/helpers/global-setup.ts; about a fifth of the time of a new database and its migrations), or a copy
 * of the migrated PostgreSQL template. `close()` drops it.
 */
export async function openTestDatabase(): Promise<Database & { url?: string }> {
  if (testDbKind === 'pglite') {
    const database = await openDatabase({ initialData: pgliteTemplate() });
    // Nothing to apply; it checks that the template holds every migration of this checkout.
    await database.migrate();
    return database;
  }
  const url = process.env.SB_TEST_PG_URL!;
  const template = process.env.SB_TEST_PG_TEMPLATE!;
  const name = `${template}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name} TEMPLATE ${template}`);
  } finally {
    await admin.end();
  }
  const dbUrl = withDatabase(url, name);
  const database = await openDatabase({ url: dbUrl, poolSize: 5 });
  return {
    ...database,
    url: dbUrl,
    async close() {
      await database.close();
      const a = new pg.Client({ connectionString: url });
      await a.connect();
      await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).finally(() => a.end());
    },
  };
}
