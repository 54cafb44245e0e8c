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

/**
 * An email channel of the tenant that receives at `address` through the SMTP receiver (its domain verified
 * first) and sends through a relay on this machine without TLS (the tests' relays). Answers the channel.
 */
export async function relayChannel(
  db: DbOrTx,
  tenant: { orgId: string; request(method: 'POST', url: string, body: unknown): Promise<{ status: number; body: string; json: { data: Record<string, unknown> } }> },
  channel: { name: string; address: string; port: number; username?: string; password?: string },
) {
  await verifyDomainFor(db, tenant.orgId, channel.address);
  const res = await tenant.request('POST', '/v1/channels', {
    type: 'email',
    name: channel.name,
    address: channel.address,
    inbound: { mode: 'smtp' },
    outbound: { host: '127.0.0.1', port: channel.port, secure: false, tls: 'none', ...(channel.username ? { username: channel.username, password: channel.password } : {}) },
  });
  if (res.status !== 201) throw new Error(`the channel was not created: ${res.body}`);
  return res.json.data as { id: string; address: string } & Record<string, unknown>;
}
