import type { DbOrTx } from '../../src/db/client.js';
import { forceVerifyDomain } from '../../src/modules/domains/domains.repository.js';
import { canonicalDomain } from '../../src/modules/domains/domains.schemas.js';

/**
 * Marks the domain of `addressOrDomain` verified for the organization, as the operator's
 * `domain verify --force` does (creating the domain when missing): receiving at an address through the
 * SMTP receiver needs it. Answers the domain.
 */
export async function verifyDomainFor(db: DbOrTx, orgId: string, addressOrDomain: string) {
  const name = canonicalDomain(addressOrDomain.slice(addressOrDomain.lastIndexOf('@') + 1));
  if (!name) throw new Error(`not a domain: ${addressOrDomain}`);
  return forceVerifyDomain(db, orgId, name, new Date());
}
