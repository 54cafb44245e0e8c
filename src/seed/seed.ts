import { randomUUID } from 'node:crypto';
import { and, asc, eq, isNull } from 'drizzle-orm';
import { getOrganization } from '../accounts/accounts.js';
import type { DbOrTx } from '../db/client.js';
import {
  businesses,
  contactAddresses,
  contactEmails,
  contactPhoneNumbers,
  contacts,
  customers,
  customerTransactions,
  domainRegistrations,
  domains,
  files,
  folders,
  messages,
  users,
} from '../db/schema.js';
import { BATCH, PipelinedWriter } from './bulk-insert.js';
import { SEED_DEFAULTS, type SeedCounts, type SeedProgress } from './counts.js';
import { DemoData, type CustomerRef, type Person, type Scope } from './demo-data.js';

/**
 * Realistic demo data for one organization: `switchboard seed`, and the benchmark's data set. Rows come
 * from the typed generators of `DemoData` and are written in batches of multi-row INSERTs (see
 * `PipelinedWriter`): straight to the tables, so no events are recorded and no credits are spent.
 */

export interface SeedInput extends Partial<SeedCounts> {
  orgId: string;
  randomSeed?: number | undefined;
}

/** The tables a seed writes, under the names its report uses. */
const TABLES = {
  contacts,
  contactEmails,
  contactPhoneNumbers,
  contactAddresses,
  businesses,
  customers,
  transactions: customerTransactions,
  messages,
  folders,
  files,
  domains,
  domainRegistrations,
};

/** At most this many seeded contacts are kept in memory as counterparts of messages and customers. */
const PEOPLE_POOL = 5000;

export async function seedOrganization(db: DbOrTx, input: SeedInput, onProgress?: (p: SeedProgress) => void) {
  const started = Date.now();
  const org = await getOrganization(db, input.orgId);
  const counts: SeedCounts = { ...SEED_DEFAULTS };
  for (const key of Object.keys(SEED_DEFAULTS) as (keyof SeedCounts)[]) if (input[key] !== undefined) counts[key] = input[key];
  if (counts.customers === 0) counts.transactions = 0;

  const demo = new DemoData(input.randomSeed);
  const scope: Scope = { orgId: org.id, createdBy: await firstUser(db, org.id) };
  const out = new PipelinedWriter(db, TABLES);
  /** Runs `step(n, done)` for consecutive batches of `counts[phase]` items, reporting progress after each. */
  const inBatches = async (phase: keyof SeedCounts, step: (n: number, done: number) => Promise<void>) => {
    onProgress?.({ phase, done: 0, total: counts[phase] });
    for (let done = 0; done < counts[phase]; ) {
      const n = Math.min(BATCH, counts[phase] - done);
      await step(n, done);
      done += n;
      onProgress?.({ phase, done, total: counts[phase] });
    }
  };
  const times = <T>(n: number, make: () => T) => Array.from({ length: n }, make);

  // Domains first: the organization's own addresses use one. Names it already has (live) are skipped by
  // the partial unique index, so this one INSERT reads back which rows it made.
  const names = demo.domainNames(counts.domains);
  await inBatches('domains', async (n, done) => {
    const chunk = names.slice(done, done + n).map((name) => demo.domain(scope, name));
    await out.flush(); // statements stay one after another, this one outside the writer included
    const made = await db.insert(domains).values(chunk).onConflictDoNothing().returning({ id: domains.id, createdAt: domains.createdAt });
    out.written.domains += made.length;
    await out.write('domainRegistrations', made.map((d) => demo.registration(scope, d)));
  });
  const us = demo.identity(org.name, names[0]);

  const people: Person[] = [];
  await inBatches('contacts', async (n) => {
    const made = times(n, () => demo.contact(scope));
    for (const m of made) if (people.length < PEOPLE_POOL) people.push(m.person);
    await out.write('contacts', made.map((m) => m.contact));
    await out.write('contactEmails', made.flatMap((m) => m.emails));
    await out.write('contactPhoneNumbers', made.flatMap((m) => m.phoneNumbers));
    await out.write('contactAddresses', made.flatMap((m) => m.addresses));
  });
  // Messages and customers need counterparts even when no contacts were asked for.
  if (people.length === 0 && (counts.messages > 0 || counts.customers > 0)) people.push(...times(200, () => demo.stranger()));

  const businessRows = times(counts.businesses, () => demo.business(scope));
  await inBatches('businesses', (n, done) => out.write('businesses', businessRows.slice(done, done + n)));
  const customerRefs: CustomerRef[] = [];
  await inBatches('customers', async (n) => {
    const made = times(n, () => demo.customer(scope, people, businessRows));
    customerRefs.push(...made.map((m) => m.ref));
    await out.write('customers', made.map((m) => m.row));
  });
  await inBatches('transactions', (n) => out.write('transactions', times(n, () => demo.transaction(scope, customerRefs))));

  const folderIds: string[] = [];
  await inBatches('folders', async (n) => {
    // Parents precede children within a batch, so one multi-row INSERT satisfies the foreign key.
    const made = times(n, () => {
      const m = demo.folder(scope, folderIds);
      folderIds.push(m.folder.id);
      return m;
    });
    await out.write('folders', made.map((m) => m.folder));
    await out.write('files', made.flatMap((m) => m.files));
  });

  const templates = demo.messageTemplates(Math.min(counts.messages, 1000));
  const now = Date.now();
  await inBatches('messages', (n) => out.write('messages', times(n, () => demo.message(scope, people, us, templates, now))));

  await out.flush();
  return { organizationId: org.id, created: out.written, durationMs: Date.now() - started };
}

/** Records made by the seed are attributed to the organization's first user when it has one. */
async function firstUser(db: DbOrTx, orgId: string): Promise<string> {
  const [user] = await db
    .select({ id: users.id })
    .from(users)
    .where(and(eq(users.organizationId, orgId), isNull(users.deletedAt)))
    .orderBy(asc(users.createdAt))
    .limit(1);
  return user?.id ?? randomUUID();
}
