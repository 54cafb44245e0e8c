import { sql } from 'drizzle-orm';
import { createApiKey, createOrganization, createUser } from '../src/accounts/accounts.js';
import { CATEGORY_IDS } from '../src/core/categories.js';
import { systemClock } from '../src/core/clock.js';
import type { Db } from '../src/db/client.js';
import { oauthClients } from '../src/db/schema.js';
import { createGrant, issueTokens } from '../src/oauth/grants.js';

/**
 * Bench data, written with set-based SQL (INSERT … SELECT generate_series) so that a million messages
 * take seconds, not the minutes a row-at-a-time seed through the API would.
 */

/** Words every search scenario looks for. `COMMON` is in most messages, `RARE` in one in 10,000, `ABSENT` in none. */
export const WORDS = { common: 'thanks', rare: 'zeppelin', absent: 'xylophone' } as const;
const RARE_EVERY = 10_000;

// Ordered by how often they occur: the picker below favours the start of the list (a rough Zipf curve).
const VOCABULARY = `thanks please meeting invoice order delivery tomorrow today call back update account payment
  question schedule confirm price quote shipment received sent team project report review contract office week
  monday friday morning afternoon available details attached document request support issue ticket resolved
  customer service refund return product sample catalog discount offer renewal subscription plan upgrade
  trial demo training onboarding feedback survey event webinar conference booking reservation table room
  hotel flight travel agenda minutes notes summary draft final version approval signature budget forecast
  quarter revenue sales marketing campaign launch release feature bug fix deploy server outage maintenance
  password login access permission security audit compliance policy insurance claim warranty repair
  technician visit appointment reminder confirmation cancellation reschedule delay tracking parcel courier
  warehouse stock inventory supplier vendor purchase receipt balance statement transfer bank card charge
  credit overdue late fee discount coupon loyalty member welcome hello regards best cheers kindly urgent
  asap soon later happy sorry great perfect sure noted understood agreed`
  .split(/\s+/)
  .filter(Boolean);

const FIRST_NAMES = ['Ana', 'Ben', 'Chloe', 'Daniel', 'Elena', 'Farid', 'Grace', 'Hiro', 'Ines', 'Jonas', 'Kemal', 'Lena', 'Marta', 'Nils', 'Olga', 'Pedro'];
const LAST_NAMES = ['Smith', 'Garcia', 'Muller', 'Rossi', 'Dubois', 'Nowak', 'Silva', 'Tanaka', 'Okafor', 'Jensen', 'Kowalski', 'Novak', 'Haddad', 'Larsen'];
const COMPANIES = ['Acme Ltd', 'Globex', 'Initech', 'Umbrella Foods', 'Stark Logistics', 'Wayne Retail', 'Hooli', 'Vandelay Imports'];

const textArray = (values: readonly string[]) => sql.raw(`(ARRAY[${values.map((v) => `'${v.replace(/'/g, "''")}'`).join(',')}]::text[])`);
/** `arr[k]` with k drawn so that early elements come up far more often than late ones. */
const skewedPick = (arr: string, n: number) => `${arr}[1 + floor(${n} * random() ^ 2)::int]`;
/** An integer literal (typed by PostgreSQL as int, unlike an untyped parameter). */
const int = (value: number) => sql.raw(String(Math.trunc(value)));
const uniformPick = (arr: string, n: number) => `${arr}[1 + floor(${n} * random())::int]`;

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

/** `count` contacts, each with two emails, one phone number and one address; returns some of their ids. */
export async function seedContacts(db: Db, orgId: string, count: number): Promise<string[]> {
  const first = textArray(FIRST_NAMES);
  const last = textArray(LAST_NAMES);
  const companies = textArray(COMPANIES);
  // Creation times one minute apart ending now, so "newest first" pages read the end of the index.
  await db.execute(sql`
    INSERT INTO contacts (organization_id, created_at, updated_at, first_name, last_name, name, company, job_title, title, notes, data)
    SELECT ${orgId}::uuid, t, t, f, l, f || ' ' || l, ${companies}[1 + i % ${int(COMPANIES.length)}], 'Account manager', CASE WHEN i % 3 = 0 THEN 'Dr' END,
           'Met at the ' || (2015 + i % 10) || ' trade fair', jsonb_build_object('source', 'bench', 'rank', i)
    FROM (
      SELECT i, now() - (${int(count)} - i) * interval '1 minute' AS t,
             ${first}[1 + i % ${int(FIRST_NAMES.length)}] AS f, ${last}[1 + (i / ${int(FIRST_NAMES.length)}) % ${int(LAST_NAMES.length)}] AS l
      FROM generate_series(1, ${int(count)}) AS i
    ) s`);
  const owned = sql`SELECT id, created_at, first_name, last_name FROM contacts WHERE organization_id = ${orgId}`;
  await db.execute(sql`
    INSERT INTO contact_emails (organization_id, contact_id, created_at, updated_at, email, label)
    SELECT ${orgId}::uuid, c.id, c.created_at + k * interval '1 second', c.created_at + k * interval '1 second',
           lower(c.first_name || '.' || c.last_name) || k || '@example.com', CASE k WHEN 1 THEN 'work' ELSE 'home' END
    FROM (${owned}) c CROSS JOIN generate_series(1, 2) AS k`);
  await db.execute(sql`
    INSERT INTO contact_phone_numbers (organization_id, contact_id, created_at, updated_at, phone_number, country_code, national_number, label)
    SELECT ${orgId}::uuid, c.id, c.created_at, c.created_at, '+1415555' || lpad((n % 10000)::text, 4, '0'), '1', '415555' || lpad((n % 10000)::text, 4, '0'), 'mobile'
    FROM (SELECT *, row_number() OVER () AS n FROM (${owned}) o) c`);
  await db.execute(sql`
    INSERT INTO contact_addresses (organization_id, contact_id, created_at, updated_at, country, label, address1, address2, city, state, postal_code)
    SELECT ${orgId}::uuid, c.id, c.created_at, c.created_at, 'US', 'office', (100 + n % 900) || ' Market Street', 'Suite ' || (n % 50), 'San Francisco', 'CA', '941' || lpad((n % 100)::text, 2, '0')
    FROM (SELECT *, row_number() OVER () AS n FROM (${owned}) o) c`);
  const rows = await db.execute<{ id: string }>(sql`SELECT id FROM contacts WHERE organization_id = ${orgId} ORDER BY random() LIMIT 500`);
  return rowsOf<{ id: string }>(rows).map((r) => r.id);
}

/**
 * Grows the organization's messages to `total` (rows `from + 1 … total`), one message per 30 seconds of
 * history. On PostgreSQL the secondary indexes are dropped and rebuilt around the insert, which is several
 * times faster than maintaining a GIN index row by row; their definitions are read back from the catalog,
 * so they are exactly the migrations' ones.
 */
export async function seedMessages(db: Db, orgId: string, from: number, total: number, opts: { rebuildIndexes: boolean }) {
  if (total <= from) return;
  const vocabulary = textArray(VOCABULARY);
  const first = textArray(FIRST_NAMES);
  const last = textArray(LAST_NAMES);
  const n = VOCABULARY.length;
  const pickWords = Array.from({ length: 12 }, () => skewedPick('v', n)).join(', ');
  let indexes: string[] = [];
  if (opts.rebuildIndexes) {
    const found = await db.execute<{ indexname: string; indexdef: string }>(
      sql`SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'messages' AND schemaname = current_schema() AND indexname NOT LIKE '%pkey'`,
    );
    const defs = rowsOf<{ indexname: string; indexdef: string }>(found);
    indexes = defs.map((r) => r.indexdef);
    for (const r of defs) await db.execute(sql.raw(`DROP INDEX "${r.indexname}"`));
  }
  // Batches keep each statement's memory small; on PostgreSQL two run at once (one per core).
  const batch = opts.rebuildIndexes ? 100_000 : 20_000;
  const ranges: [number, number][] = [];
  for (let start = from + 1; start <= total; start += batch) ranges.push([start, Math.min(total, start + batch - 1)]);
  const insertRange = ([start, end]: [number, number]) =>
    db.execute(sql`
      INSERT INTO messages (organization_id, created_at, updated_at, timestamp, type, direction, provider_name, provider_message_id, thread_id,
                            text, summary, status, importance, urgency, sender, recipient, category, metadata, read_at)
      SELECT ${orgId}::uuid, t, t, t,
             CASE WHEN i % 4 = 0 THEN 'sms' ELSE 'email' END,
             CASE WHEN i % 2 = 0 THEN 'incoming' ELSE 'outgoing' END,
             CASE WHEN i % 4 = 0 THEN 'twilio' ELSE 'postmark' END, 'pm-' || i, 'thread-' || (i / 5),
             upper(left(body, 1)) || substr(body, 2) || '.' || CASE WHEN i % ${int(RARE_EVERY)} = 7 THEN ' ' || ${WORDS.rare} ELSE '' END,
             concat_ws(' ', ${sql.raw(uniformPick('v', n))}, ${sql.raw(uniformPick('v', n))}, ${sql.raw(uniformPick('v', n))}),
             CASE WHEN i % 3 = 0 THEN 'read' ELSE 'delivered' END, 'normal', 'low',
             jsonb_build_object('name', f || ' ' || l, 'email', lower(f || '.' || l) || '@example.com'),
             '{"name": "Support", "email": "support@switchboard.example"}'::jsonb,
             '{"label": "general"}'::jsonb, jsonb_build_object('seq', i),
             CASE WHEN i % 3 = 0 THEN t + interval '1 hour' END
      FROM (
        SELECT i, t, v, f, l, concat_ws(' ', ${sql.raw(pickWords)}) AS body
        FROM (
          SELECT i, now() - (${int(total)} - i) * interval '30 seconds' AS t, ${vocabulary} AS v,
                 ${first}[1 + i % ${int(FIRST_NAMES.length)}] AS f, ${last}[1 + (i / 7) % ${int(LAST_NAMES.length)}] AS l
          FROM generate_series(${int(start)}, ${int(end)}) AS i
        ) g
      ) s`);
  const workers = opts.rebuildIndexes ? 2 : 1;
  await Promise.all(
    Array.from({ length: workers }, async () => {
      for (let r = ranges.shift(); r; r = ranges.shift()) await insertRange(r);
    }),
  );
  for (const def of indexes) {
    await db.transaction(async (tx) => {
      await tx.execute(sql`SET LOCAL maintenance_work_mem = '256MB'`);
      await tx.execute(sql.raw(def));
    });
  }
  // VACUUM sets the visibility map as a long-lived table has it, and keeps autovacuum from starting in the
  // middle of a measurement; ANALYZE gives the planner the statistics it would have in production.
  await db.execute(sql`VACUUM (ANALYZE) messages`);
}

export async function vacuumAnalyze(db: Db) {
  await db.execute(sql`VACUUM (ANALYZE)`);
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
