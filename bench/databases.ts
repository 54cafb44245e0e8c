import pg from 'pg';

import { drizzle } from 'drizzle-orm/node-postgres';
import type { Db } from '../src/db/client.js';
import * as schema from '../src/db/schema.js';

/** Throw-away PostgreSQL databases for one bench run, created and dropped through the admin URL. */

export function withDatabase(url: string, name: string) {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

async function admin<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** Creates `name` (dropping a leftover of the same name) and returns its URL. */
export async function createDatabase(adminUrl: string, name: string): Promise<string> {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`Unsafe database name ${name}`);
  await admin(adminUrl, async (c) => {
    await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await c.query(`CREATE DATABASE ${name}`);
  });
  return withDatabase(adminUrl, name);
}

export async function dropDatabase(adminUrl: string, name: string) {
  await admin(adminUrl, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
}

/**
 * A Drizzle database on its own small pool for seeding: unlike the service's pool it has no query
 * timeout, because building a million rows or analysing them takes longer than any request should.
 */
export function openSeedConnection(url: string): { db: Db; close: () => Promise<void> } {
  const pool = new pg.Pool({ connectionString: url, max: 3, application_name: 'switchboard-bench-seed' });
  pool.on('error', () => {});
  return { db: drizzle(pool, { schema }), close: () => pool.end() };
}
