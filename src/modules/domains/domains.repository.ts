import { eq, sql } from 'drizzle-orm';
import { fieldError, notFound, pgErrorCode } from '../../core/errors.js';
import { canStoreSecrets, missingKeyError } from '../../core/encryption.js';
import type { Page, PageInput } from '../../core/pagination.js';
import type { DbOrTx } from '../../db/client.js';
import { domainRegistrations, domains } from '../../db/schema.js';
import { scopedRepository, softDeleteLive } from '../../db/scoped.js';
import { dkimColumns, dnsRecordsFor, generateDkimKey } from './dkim.js';

export const domainRows = scopedRepository(domains, 'Domain');
type DomainRow = typeof domains.$inferSelect;

/** A domain as the API answers it: the DKIM key's public part only. */
export function presentDomain(row: DomainRow) {
  const { dkimSelector, dkimPublicKey, dkimPrivateKey: _private, dkimCreatedAt, ...rest } = row;
  return {
    ...rest,
    dkim: dkimSelector && dkimPublicKey && dkimCreatedAt ? { selector: dkimSelector, algorithm: 'rsa-sha256' as const, publicKey: dkimPublicKey, createdAt: dkimCreatedAt } : null,
  };
}

export const getDomain = async (db: DbOrTx, orgId: string, id: string) => presentDomain(await domainRows.get(db, orgId, id));

export async function listDomains(db: DbOrTx, orgId: string, page: PageInput): Promise<Page<ReturnType<typeof presentDomain>>> {
  const { items } = await domainRows.list(db, orgId, page);
  return { items: items.map(presentDomain) };
}

/**
 * Generates a new DKIM key for the domain (replacing the one it had: mail is signed with the new key at
 * once, so publish its record first, or keep the old record until mail signed with it has been delivered).
 */
export async function rotateDkimKey(db: DbOrTx, orgId: string, id: string, now: Date) {
  await domainRows.get(db, orgId, id);
  if (!canStoreSecrets()) throw missingKeyError([]);
  const key = await generateDkimKey(now);
  const [row] = await db
    .update(domains)
    .set({ ...dkimColumns(key, now), updatedAt: now })
    .where(domainRows.live(orgId, eq(domains.id, id)))
    .returning();
  if (!row) throw notFound('Domain');
  return presentDomain(row);
}

/** The DNS records to publish for the domain. */
export async function domainDnsRecords(db: DbOrTx, orgId: string, id: string) {
  const row = await domainRows.get(db, orgId, id);
  return dnsRecordsFor(db, orgId, row);
}
export const registrationRows = scopedRepository(domainRegistrations, 'Domain registration');


const duplicate = () => fieldError('name', 'This domain already exists in the organization');

/** `name` is already canonical (lowercase ASCII); a live duplicate in the organization is a 400 at `name`. */
export async function createDomain(db: DbOrTx, orgId: string, actorId: string, name: string) {
  const taken = await db
    .select({ one: sql`1` })
    .from(domains)
    .where(domainRows.live(orgId, eq(sql`lower(${domains.name})`, name)))
    .limit(1);
  if (taken.length > 0) throw duplicate();
  try {
    return presentDomain(await domainRows.insert(db, { organizationId: orgId, name, createdBy: actorId }));
  } catch (err) {
    // Two concurrent creates of the same name: the partial unique index decides.
    if (pgErrorCode(err) === '23505') throw duplicate();
    throw err;
  }
}

/** Soft-deletes the domain and its registrations together; the name can then be added again. */
export async function deleteDomain(db: DbOrTx, orgId: string, id: string) {
  return db.transaction(async (tx) => {
    const deleted = await domainRows.softDelete(tx, orgId, id);
    await softDeleteLive(tx, domainRegistrations, orgId, eq(domainRegistrations.domainId, id));
    return presentDomain(deleted);
  });
}
