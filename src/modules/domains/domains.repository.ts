import { eq, sql } from 'drizzle-orm';
import { fieldError, notFound, pgErrorCode } from '../../core/errors.js';
import type { Page, PageInput } from '../../core/pagination.js';
import type { DbOrTx } from '../../db/client.js';
import { domainRegistrations, domains } from '../../db/schema.js';
import { scopedRepository, softDeleteLive } from '../../db/scoped.js';

export const domainRows = scopedRepository(domains, 'Domain');
export const registrationRows = scopedRepository(domainRegistrations, 'Domain registration');

type RegistrationInsert = typeof domainRegistrations.$inferInsert;
type RegistrationRow = typeof domainRegistrations.$inferSelect;

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
    return await domainRows.insert(db, { organizationId: orgId, name, createdBy: actorId });
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
    return deleted;
  });
}

async function assertDomain(db: DbOrTx, orgId: string, id: string) {
  if (!(await domainRows.exists(db, orgId, id))) throw notFound('Domain');
}

const ofDomain = (domainId: string) => eq(domainRegistrations.domainId, domainId);

export async function listRegistrations(db: DbOrTx, orgId: string, domainId: string, page: PageInput): Promise<Page<RegistrationRow>> {
  await assertDomain(db, orgId, domainId);
  return registrationRows.list(db, orgId, page, { where: ofDomain(domainId), withTotal: true });
}

export async function createRegistration(
  db: DbOrTx,
  orgId: string,
  actorId: string,
  domainId: string,
  values: Omit<RegistrationInsert, 'organizationId' | 'domainId' | 'createdBy'>,
) {
  await assertDomain(db, orgId, domainId);
  return registrationRows.insert(db, { ...values, organizationId: orgId, domainId, createdBy: actorId });
}

export const getRegistration = (db: DbOrTx, orgId: string, domainId: string, id: string) => registrationRows.get(db, orgId, id, ofDomain(domainId));

export const updateRegistration = (db: DbOrTx, orgId: string, domainId: string, id: string, patch: Partial<RegistrationInsert>) =>
  registrationRows.update(db, orgId, id, patch, ofDomain(domainId));

export const deleteRegistration = (db: DbOrTx, orgId: string, domainId: string, id: string) =>
  registrationRows.softDelete(db, orgId, id, ofDomain(domainId));
