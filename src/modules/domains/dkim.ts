import { generateKeyPair, randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import { promisify } from 'node:util';
import { and, eq, isNotNull, isNull, sql } from 'drizzle-orm';
import { decryptSecret, encryptSecret } from '../../core/encryption.js';
import type { DbOrTx } from '../../db/client.js';
import { channels, domains } from '../../db/schema.js';
import { verificationRecordName } from './verification.js';

/**
 * DKIM signing keys of the organization's domains, and the DNS records a domain publishes to send mail
 * that receivers trust (MX, SPF, DKIM, DMARC). The private key is stored encrypted like every secret
 * (`src/core/encryption.ts`) and never leaves the service; the public key is what DNS publishes.
 */

const generate = promisify(generateKeyPair);

/** RSA 2048: what every receiver verifies (Ed25519 signatures, RFC 8463, are not checked by all of them yet). */
const MODULUS_BITS = 2048;

export interface NewDkimKey {
  selector: string;
  /** Base64 DER (SubjectPublicKeyInfo): the `p=` of the DNS record. */
  publicKey: string;
  /** PEM (PKCS#8), encrypted before it is stored. */
  privateKey: string;
}

/** A selector unique to the key: `sb` + the day + 4 random hex digits, so a rotated key never reuses a published name. */
export function newSelector(at: Date): string {
  return `sb${at.toISOString().slice(0, 10).replace(/-/g, '')}${randomBytes(2).toString('hex')}`;
}

export async function generateDkimKey(at: Date): Promise<NewDkimKey> {
  const { publicKey, privateKey } = await generate('rsa', {
    modulusLength: MODULUS_BITS,
    publicKeyEncoding: { type: 'spki', format: 'der' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  return { selector: newSelector(at), publicKey: Buffer.from(publicKey).toString('base64'), privateKey };
}

/** The columns that store a new key (the private part encrypted). */
export const dkimColumns = (key: NewDkimKey, at: Date) => ({
  dkimSelector: key.selector,
  dkimPublicKey: key.publicKey,
  dkimPrivateKey: encryptSecret(key.privateKey),
  dkimCreatedAt: at,
});

/** A key the sender signs with. */
export interface SigningKey {
  domainName: string;
  keySelector: string;
  privateKey: string;
}

/**
 * The signing key of the organization's live domain `name` (lower-case), or undefined when the domain is
 * unknown or has no key: mail from an address at it is then sent unsigned.
 */
export async function signingKeyFor(db: DbOrTx, orgId: string, name: string): Promise<SigningKey | undefined> {
  const [row] = await db
    .select({ name: domains.name, selector: domains.dkimSelector, privateKey: domains.dkimPrivateKey })
    .from(domains)
    .where(and(eq(domains.organizationId, orgId), isNull(domains.deletedAt), eq(sql`lower(${domains.name})`, name.toLowerCase()), isNotNull(domains.dkimPrivateKey)))
    .limit(1);
  if (!row?.selector || !row.privateKey) return undefined;
  return { domainName: row.name, keySelector: row.selector, privateKey: decryptSecret(row.privateKey) };
}

export interface DnsRecord {
  type: 'MX' | 'TXT';
  /** The fully qualified name the record is published at. */
  name: string;
  value: string;
  /** TXT only: the value as character-strings of at most 255 bytes (RFC 1035 §3.3.14), as DNS providers take long values. */
  strings?: string[];
  /** MX only: the preference. */
  priority?: number;
  /** What the record does, for the person publishing it. */
  purpose: string;
}

/** Where the domain's mail is received: the built-in SMTP receiver's public host name (the host of PUBLIC_URL). */
const settings = { mxHost: 'localhost' };
export const setMailHostname = (host: string) => void (settings.mxHost = host);
export const mailHostname = () => settings.mxHost;

/** The relays the organization's channels at this domain send through: SPF must allow them. */
async function relayHostsOf(db: DbOrTx, orgId: string, domain: string): Promise<string[]> {
  const rows = await db
    .select({ outbound: channels.outbound })
    .from(channels)
    .where(and(eq(channels.organizationId, orgId), isNull(channels.deletedAt), sql`${channels.address} LIKE ${`%@${domain}`}`));
  return [...new Set(rows.flatMap((r) => (r.outbound?.host ? [r.outbound.host.toLowerCase()] : [])))].sort();
}

/**
 * The records to publish for `domain`: MX to the SMTP receiver, SPF allowing the channels' relays, the DKIM
 * public key (when the domain has one) and a DMARC policy that starts by only reporting.
 */
export async function dnsRecordsFor(
  db: DbOrTx,
  orgId: string,
  domain: { name: string; dkimSelector: string | null; dkimPublicKey: string | null; verificationToken?: string },
): Promise<DnsRecord[]> {
  const relays = await relayHostsOf(db, orgId, domain.name);
  const records: DnsRecord[] = [
    { type: 'MX', name: domain.name, value: mailHostname(), priority: 10, purpose: 'Mail for the domain is delivered to the service\'s SMTP receiver' },
    {
      type: 'TXT',
      name: domain.name,
      value: ['v=spf1', ...relays.map(spfMechanism), '~all'].join(' '),
      purpose:
        'SPF: the hosts allowed to send as the domain, the relays of its channels (where a relay provider documents an `include:`, use theirs instead of its `a:`)',
    },
  ];
  if (domain.verificationToken) {
    records.push({
      type: 'TXT',
      name: verificationRecordName(domain.name),
      value: domain.verificationToken,
      purpose: 'Ownership: proves the organization owns the domain (then POST /domains/{id}/verify); needed to receive mail at the domain through the SMTP receiver',
    });
  }
  if (domain.dkimSelector && domain.dkimPublicKey) {
    records.push({
      type: 'TXT',
      name: `${domain.dkimSelector}._domainkey.${domain.name}`,
      value: `v=DKIM1; k=rsa; p=${domain.dkimPublicKey}`,
      purpose: 'DKIM: the public key receivers verify the signature of sent mail with',
    });
  }
  records.push({
    type: 'TXT',
    name: `_dmarc.${domain.name}`,
    value: `v=DMARC1; p=none; adkim=r; aspf=r; rua=mailto:postmaster@${domain.name}`,
    purpose: 'DMARC: starts by reporting only (p=none, reports to postmaster@); raise to p=quarantine, then p=reject, once the reports show your mail passing',
  });
  return records.map((r) => (r.type === 'TXT' ? { ...r, strings: txtStrings(r.value) } : r));
}

/** SPF names a relay given by IP address with `ip4:`/`ip6:` (`a:` takes a host name only, RFC 7208 §5.3). */
export function spfMechanism(host: string): string {
  const bare = host.replace(/^\[|\]$/g, '');
  const version = isIP(bare);
  return version === 4 ? `ip4:${bare}` : version === 6 ? `ip6:${bare}` : `a:${bare}`;
}

/** A TXT value as character-strings of at most 255 bytes each (the values here are ASCII). */
export function txtStrings(value: string): string[] {
  const bytes = Buffer.from(value, 'utf8');
  const out: string[] = [];
  for (let i = 0; i < bytes.length; i += 255) out.push(bytes.subarray(i, i + 255).toString('utf8'));
  return out.length ? out : [''];
}
