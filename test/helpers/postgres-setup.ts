import pg from 'pg';
import { openDatabase } from '../../src/db/client.js';

/** Once per run (from global-setup.ts): a migrated template database that each test file copies (CREATE DATABASE … TEMPLATE). */
export async function setup() {
  const url = process.env.SB_TEST_PG_URL!;
  const template = process.env.SB_TEST_PG_TEMPLATE!;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${template} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${template}`);
  await admin.end();
  // No 15 s client-side limit on a statement: on a busy machine a migration may take longer. The first
  // connection to a database just created can also take longer than the service's 2 s on a busy machine, and
  // every file of the run needs this template.
  const db = await openDatabase({ url: withDatabase(url, template), poolSize: 1, statementTimeoutMs: 600_000, connectTimeoutMs: 30_000 });
  try {
    await db.migrate();
  } finally {
    await db.close();
  }
}

export async function teardown() {
  const url = process.env.SB_TEST_PG_URL!;
  const template = process.env.SB_TEST_PG_TEMPLATE!;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  const { rows } = await admin.query<{ datname: string }>(`SELECT datname FROM pg_database WHERE datname LIKE $1`, [`${template}%`]);
  for (const { datname } of rows) await admin.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
  await admin.end();
}

export function withDatabase(url: string, name: string) {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}
