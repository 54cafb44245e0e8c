import { sql } from 'drizzle-orm';
import { createApiKey, createOrganization, createUser } from '../src/accounts/accounts.js';
import { CATEGORY_IDS } from '../src/core/categories.js';
import { systemClock } from '../src/core/clock.js';
import type { Db } from '../src/db/client.js';
import { oauthClients } from '../src/db/schema.js';
import { createGrant, issueTokens } from '../src/oauth/grants.js';
import type { SeedCounts } from '../src/seed/counts.js';
import { seedOrganization } from '../src/seed/seed.js';

/**
 * The benchmark's data: the organization is filled by the same seeder as `switchboard seed` (realistic
 * contacts and messages from its typed generators); this file adds what only a benchmark needs: tenants and
 * tokens, a word planted at a known rate for the search scenarios, and secondary indexes rebuilt around a
 * large insert.
 */

/**
 * Words every search scenario looks for: `common` closes every seeded email, `rare` is planted in one message
 * in 10,000 (and in at least a page of 10, so that at every size the scenario answers a full page and the
 * scaling row compares the same answer), `absent` in none.
 */
export const WORDS = { common: 'regards', rare: 'zeppelin', absent: 'xylophone' } as const;
const rareCount = (messages: number) => Math.max(10, Math.floor(messages / 10_000));

/** A seed that makes nothing but what it is asked for (typed, so a new kind of seeded record must be named here). */
const NOTHING: SeedCounts = { contacts: 0, messages: 0, businesses: 0, customers: 0, transactions: 0, folders: 0, domains: 0 };

/** An integer literal (typed by PostgreSQL as int, unlike an untyped parameter). */
const int = (value: number) => sql.raw(String(Math.trunc(value)));

export interface Tenant {
  orgId: string;
  apiKey: string;
}

export async function createTenant(db: Db, name: string): Promise<Tenant> {
  const org = await createOrganization(db, { name, credits: 1_000_000 });
  const key = await createApiKey(db, { orgId: org.id, name: 'bench' });
  return { orgId: org.id, apiKey: key.key };
}

/**
 * OAuth access tokens for the tenant's organization with every tool category, as the consent page would
 * grant them: one user, `count` clients, one grant each. The transport allows 100 requests a minute per
 * (user, client), so a load test spreads its requests over many pairs, as many real clients would.
 */
export async function createMcpTokens(db: Db, orgId: string, resource: string, count: number): Promise<string[]> {
  const user = await createUser(db, { orgId, email: `bench-${orgId.slice(0, 8)}@example.test`, password: 'bench password 123' });
  const clientIds = Array.from({ length: count }, (_, i) => `bench-${orgId.slice(0, 8)}-${i}`);
  await db.insert(oauthClients).values(
    clientIds.map((id) => ({
      id,
      tokenEndpointAuthMethod: 'none',
      redirectUris: ['http://127.0.0.1/callback'],
      grantTypes: ['authorization_code'],
      responseTypes: ['code'],
      clientName: 'bench',
    })),
  );
  const tokens: string[] = [];
  for (const clientId of clientIds) {
    const grant = await createGrant(db, { userId: user.id, organizationId: orgId, clientId, scopes: ['mcp'], categories: [...CATEGORY_IDS], resource });
    tokens.push((await issueTokens(db, grant, systemClock)).access_token);
  }
  return tokens;
}

/** `count` contacts with their emails, phone numbers and addresses; returns some of their ids. */
export async function seedContacts(db: Db, orgId: string, count: number): Promise<string[]> {
  await seedOrganization(db, { ...NOTHING, orgId, contacts: count, randomSeed: 1 });
  const rows = await db.execute<{ id: string }>(sql`SELECT id FROM contacts WHERE organization_id = ${orgId} ORDER BY random() LIMIT 500`);
  return rowsOf<{ id: string }>(rows).map((r) => r.id);
}

/**
 * Grows the organization's messages from `from` to `total`, then plants `WORDS.rare` so that one message in
 * 10,000 holds it (at least 10 do), and checks every word's rate. On PostgreSQL the secondary indexes are dropped and rebuilt
 * around the insert, which is several times faster than maintaining a GIN index row by row; their
 * definitions are read back from the catalog, so they are exactly the migrations' ones.
 */
export async function seedMessages(db: Db, orgId: string, from: number, total: number, opts: { rebuildIndexes: boolean }) {
  if (total <= from) return;
  let indexes: string[] = [];
  if (opts.rebuildIndexes) {
    const found = await db.execute<{ indexname: string; indexdef: string }>(
      sql`SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'messages' AND schemaname = current_schema() AND indexname NOT LIKE '%pkey'`,
    );
    const defs = rowsOf<{ indexname: string; indexdef: string }>(found);
    indexes = defs.map((r) => r.indexdef);
    for (const r of defs) await db.execute(sql.raw(`DROP INDEX "${r.indexname}"`));
  }
  await seedOrganization(db, { ...NOTHING, orgId, messages: total - from, randomSeed: from + 1 });
  const plant = rareCount(total) - (from > 0 ? rareCount(from) : 0);
  await db.execute(sql`
    UPDATE messages SET text = text || ' ' || ${WORDS.rare}
    WHERE id IN (SELECT id FROM messages WHERE organization_id = ${orgId} AND text NOT LIKE ${`%${WORDS.rare}`} ORDER BY id LIMIT ${int(plant)})`);
  for (const def of indexes) {
    await db.transaction(async (tx) => {
      await tx.execute(sql`SET LOCAL maintenance_work_mem = '256MB'`);
      await tx.execute(sql.raw(def));
    });
  }
  // VACUUM sets the visibility map as a long-lived table has it, and keeps autovacuum from starting in the
  // middle of a measurement; ANALYZE gives the planner the statistics it would have in production.
  await db.execute(sql`VACUUM (ANALYZE) messages`);
  await checkWords(db, orgId, total);
}

/** The search scenarios mean what they say only if the words occur at their rates: a seeder change that broke them stops the run. */
async function checkWords(db: Db, orgId: string, total: number) {
  const hits = async (word: string) => {
    const rows = await db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM messages WHERE organization_id = ${orgId} AND search_vector @@ websearch_to_tsquery('simple', ${word})`);
    return rowsOf<{ n: number }>(rows)[0]!.n;
  };
  const [common, rare, absent] = [await hits(WORDS.common), await hits(WORDS.rare), await hits(WORDS.absent)];
  if (common < total / 2 || rare !== rareCount(total) || absent !== 0) {
    throw new Error(`bench words off their rates in ${total} messages: "${WORDS.common}" ${common} (want > half), "${WORDS.rare}" ${rare} (want ${rareCount(total)}), "${WORDS.absent}" ${absent} (want 0)`);
  }
}

export async function vacuumAnalyze(db: Db) {
  await db.execute(sql`VACUUM (ANALYZE)`);
}

/**
 * Before each measured write row: the tables the write rows write are vacuumed and analyzed and a
 * checkpoint is taken, so every row starts from the same state and none pays for the rows before it (the
 * autovacuum and analyze that their inserts call for, dirty pages still to be written, full-page images
 * of pages first touched after a checkpoint falling to whichever row comes first).
 */
export async function settleWrites(db: Db) {
  await db.execute(sql`VACUUM (ANALYZE) contacts, messages, threads, events, webhook_deliveries`);
  await db.execute(sql`CHECKPOINT`);
}

/** node-postgres answers `{ rows }`, PGlite's Drizzle driver too; both are normalised here. */
export function rowsOf<T>(result: unknown): T[] {
  return Array.isArray(result) ? (result as T[]) : (((result as { rows?: T[] }).rows ?? []) as T[]);
}

/** A few message ids of the organization, for the get-one scenarios. */
export async function sampleMessageIds(db: Db, orgId: string, count: number): Promise<string[]> {
  const rows = await db.execute<{ id: string }>(sql`SELECT id FROM messages WHERE organization_id = ${orgId} ORDER BY random() LIMIT ${int(count)}`);
  return rowsOf<{ id: string }>(rows).map((r) => r.id);
}
