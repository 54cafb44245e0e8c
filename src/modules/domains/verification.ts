import { and, eq, isNotNull, isNull, ne, sql } from 'drizzle-orm';
import addressparser from 'nodemailer/lib/addressparser';
import { resolveTxt } from '../../core/dns.js';
import { AppError, fieldError, pgErrorCode } from '../../core/errors.js';
import type { DbOrTx } from '../../db/client.js';
import { channels, domains } from '../../db/schema.js';
import { recordEvents } from '../events/events.recorder.js';
import { asciiEmail, canonicalDomain } from './domains.schemas.js';
import { toEmailChannel } from '../channels/email/email.view.js';

/**
 * Who may receive mail at a domain. An organization proves a domain by publishing the token of its domain
 * record as a TXT record at `_switchboard.<domain>` (as hosted inbound mail services do: Postmark, Mailgun,
 * SES); `POST /domains/{id}/verify` looks it up through the service's resolver (`DNS_SERVERS`). A verified
 * domain belongs to one organization: the partial unique index `domains_verified_name` refuses a second,
 * and every refusal is a 409 that never says which organization holds it.
 */

export const verificationRecordName = (domain: string) => `_switchboard.${domain}`;

/** The 409 of a domain another organization has verified (its owner is never named). */
export const domainTaken = (domain: string) =>
  new AppError('CONFLICT', `The domain ${domain} is verified by another organization: a domain receives mail for one organization only`);

/** The domain part of an address, canonical (lowercase, punycode), or undefined. */
export const domainOfAddress = (address: string) => canonicalDomain(address.slice(address.lastIndexOf('@') + 1));

/** Whether an organization other than `orgId` has verified `domain` (canonical). */
export async function verifiedElsewhere(db: DbOrTx, orgId: string, domain: string): Promise<boolean> {
  const rows = await db
    .select({ one: sql`1` })
    .from(domains)
    .where(and(eq(sql`lower(${domains.name})`, domain), isNull(domains.deletedAt), isNotNull(domains.verifiedAt), ne(domains.organizationId, orgId)))
    .limit(1);
  return rows.length > 0;
}

/** Whether `orgId` has verified `domain` (canonical). */
export async function verifiedHere(db: DbOrTx, orgId: string, domain: string): Promise<boolean> {
  const rows = await db
    .select({ one: sql`1` })
    .from(domains)
    .where(and(eq(sql`lower(${domains.name})`, domain), isNull(domains.deletedAt), isNotNull(domains.verifiedAt), eq(domains.organizationId, orgId)))
    .limit(1);
  return rows.length > 0;
}

/**
 * Receiving at `address` (an inbound channel's address). Through the SMTP receiver the organization must
 * have verified the address's domain: the receiver routes mail by address across organizations. Through IMAP
 * the login to the mailbox proves the right to read it, so the domain need not be verified (a mailbox at a
 * provider's domain, e.g. gmail.com, works), but a domain another organization verified is still refused.
 */
export async function assertMayReceiveAt(db: DbOrTx, orgId: string, address: string, mode: 'smtp' | 'imap'): Promise<void> {
  const domain = domainOfAddress(address);
  if (!domain) throw fieldError('address', 'The address must be at a domain name');
  if (await verifiedElsewhere(db, orgId, domain)) throw domainTaken(domain);
  if (mode === 'smtp' && !(await verifiedHere(db, orgId, domain))) {
    throw fieldError(
      'address',
      `Receiving at ${address} through the SMTP receiver needs the domain ${domain} verified by the organization: add it (POST /domains), publish its TXT record ${verificationRecordName(domain)} and verify it (POST /domains/{id}/verify)`,
    );
  }
}

/**
 * `outbound.from`: the channel's own address, or an address at a domain the organization has verified;
 * nothing else may be named as the sender.
 */
export async function assertMaySendAs(db: DbOrTx, orgId: string, channelAddress: string, from: string | null | undefined): Promise<void> {
  if (!from) return;
  const parsed = addressparser(from, { flatten: true });
  const address = parsed.length === 1 ? parsed[0]!.address?.toLowerCase() : undefined;
  const problem = (text: string) => new AppError('VALIDATION_ERROR', 'The request is invalid', { errors: [], properties: { outbound: { errors: [], properties: { from: { errors: [text] } } } } });
  if (!address || !address.includes('@')) throw problem('Must name one address, e.g. "Acme <support@acme.example>"');
  // The channel's address is stored with its domain in A-labels; `from` may give it in Unicode.
  if ((asciiEmail(address) ?? address) === channelAddress.toLowerCase()) return;
  const domain = domainOfAddress(address);
  if (!domain || !(await verifiedHere(db, orgId, domain))) {
    throw problem(`Must be the channel's address or an address at a domain the organization has verified; ${domain ?? address} is not verified by the organization`);
  }
}

/** Whether the TXT records at `_switchboard.<domain>` hold `token`; a DNS failure is a 400 saying so. */
export async function tokenPublished(domain: string, token: string): Promise<boolean> {
  let records: string[];
  try {
    records = await resolveTxt(verificationRecordName(domain));
  } catch (err) {
    const code = (err as { code?: string }).code ?? 'error';
    throw new AppError('BAD_REQUEST', `The DNS lookup of ${verificationRecordName(domain)} failed (${code}); try again later`);
  }
  return records.some((r) => r.trim() === token);
}

/** Marks the organization's live domain `id` verified at `now`; 409 when another organization got there first. */
export async function markVerified(db: DbOrTx, orgId: string, id: string, name: string, now: Date) {
  let row;
  try {
    [row] = await db
      .update(domains)
      .set({ verifiedAt: now, updatedAt: now })
      .where(and(eq(domains.id, id), eq(domains.organizationId, orgId), isNull(domains.deletedAt)))
      .returning();
  } catch (err) {
    // Two organizations verifying the same name at once: the partial unique index decides.
    if (pgErrorCode(err) === '23505') throw domainTaken(name);
    throw err;
  }
  if (row) await releaseSquattedAddresses(db, orgId, name, now);
  return row;
}

/**
 * Inbound-SMTP channels of other organizations at the domain, made before receiving needed a verified
 * domain, receive mail that is the owner's and hold addresses the owner cannot then create: once the owner
 * proves the domain they are deleted (soft: their messages stay), each with a `channel.deleted` event in its
 * own organization recorded by the system (nothing names the owner).
 */
async function releaseSquattedAddresses(db: DbOrTx, orgId: string, name: string, now: Date) {
  const released = await db
    .update(channels)
    .set({ deletedAt: now, updatedAt: now, lastError: 'Deleted: another organization verified the domain of this address' })
    .where(and(ne(channels.organizationId, orgId), isNull(channels.deletedAt), sql`${channels.inbound}->>'mode' = 'smtp'`, sql`split_part(${channels.address}, '@', 2) = ${name}`))
    .returning();
  if (released.length === 0) return;
  await recordEvents(
    db,
    { type: 'system', id: null, depth: 0 },
    released.map((c) => ({ type: 'channel.deleted' as const, organizationId: c.organizationId, resourceId: c.id, data: toEmailChannel(c) })),
  );
}
