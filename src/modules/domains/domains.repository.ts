import { eq, sql } from 'drizzle-orm';
import { fieldError, pgErrorCode } from '../../core/errors.js';
import type { DbOrTx } from '../../db/client.js';
import { domainRegistrations, domains } from '../../db/schema.js';
import { scopedRepository, softDeleteLive } from '../../db/scoped.js';

export const domainRows = scopedRepository(domains, 'Domain');
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
