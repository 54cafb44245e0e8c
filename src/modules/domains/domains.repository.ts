import { eq, sql } from 'drizzle-orm';
import { AppError, fieldError, notFound, pgErrorCode } from '../../core/errors.js';
import { canStoreSecrets, missingKeyError } from '../../core/encryption.js';
import type { Page, PageInput } from '../../core/pagination.js';
import type { DbOrTx } from '../../db/client.js';
import { domainRegistrations, domains } from '../../db/schema.js';
import { scopedRepository, softDeleteLive } from '../../db/scoped.js';
import { dkimColumns, dnsRecordsFor, generateDkimKey } from './dkim.js';
import { domainTaken, markVerified, tokenPublished, verificationRecordName, verifiedElsewhere } from './verification.js';

export const domainRows = scopedRepository(domains, 'Domain');
type DomainRow = typeof domains.$inferSelect;

/** A domain as the API answers it: the DKIM key's public part only. */
export function presentDomain(row: DomainRow) {
  const { dkimSelector, dkimPublicKey, dkimPrivateKey: _private, dkimCreatedAt, verificationToken, verifiedAt, ...rest } = row;
  return {
    ...rest,
    dkim: dkimSelector && dkimPublicKey && dkimCreatedAt ? { selector: dkimSelector, algorithm: 'rsa-sha256' as const, publicKey: dkimPublicKey, createdAt: dkimCreatedAt } : null,
    verification: {
      status: verifiedAt ? ('verified' as const) : ('pending' as const),
      token: verificationToken,
      record: { type: 'TXT' as const, name: verificationRecordName(row.name), value: verificationToken },
      verifiedAt,
    },
  };
}

/**
 * POST /domains/{id}/verify: looks up `_switchboard.<name>` and marks the domain verified when a TXT record
 * there holds its token. A verified domain answers as it is (no lookup); a domain another organization has
 * verified is a 409; a record not (yet) published is a 400 saying what to publish.
 */
export async function verifyDomain(db: DbOrTx, orgId: string, id: string, now: Date) {
  const row = await domainRows.get(db, orgId, id);
  if (row.verifiedAt) return presentDomain(row);
  if (await verifiedElsewhere(db, orgId, row.name)) throw domainTaken(row.name);
  if (!(await tokenPublished(row.name, row.verificationToken))) {
    throw new AppError(
      'BAD_REQUEST',
      `No TXT record at ${verificationRecordName(row.name)} holds this domain's token: publish "${row.verificationToken}" there and try again (a new record can take minutes to be seen)`,
    );
  }
  const updated = await markVerified(db, orgId, id, row.name, now);
  if (!updated) throw notFound('Domain');
  return presentDomain(updated);
}

/** The command line's `domain verify` without --force: the organization's domain `name` (created when missing), checked through DNS. */
export async function verifyDomainByName(db: DbOrTx, orgId: string, name: string, now: Date) {
  const [existing] = await db
    .select()
    .from(domains)
    .where(domainRows.live(orgId, eq(sql`lower(${domains.name})`, name)))
    .limit(1);
  const row = existing ?? (await domainRows.insert(db, { organizationId: orgId, name, createdBy: orgId }));
  return verifyDomain(db, orgId, row.id, now);
}

/**
 * The operator's `domain verify --force`: the organization's domain `name` (created when missing, with the
 * organization's id as `createdBy`) marked verified without DNS. 409 when another organization verified it.
 */
export async function forceVerifyDomain(db: DbOrTx, orgId: string, name: string, now: Date) {
  return db.transaction(async (tx) => {
    if (await verifiedElsewhere(tx, orgId, name)) throw domainTaken(name);
    const [existing] = await tx
      .select()
      .from(domains)
      .where(domainRows.live(orgId, eq(sql`lower(${domains.name})`, name)))
      .limit(1);
    const row = existing ?? (await domainRows.insert(tx, { organizationId: orgId, name, createdBy: orgId }));
    if (row.verifiedAt) return presentDomain(row);
    const updated = await markVerified(tx, orgId, row.id, name, now);
    return presentDomain(updated ?? row);
  });
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
