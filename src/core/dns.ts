import { promises as dns } from 'node:dns';
import { isIP, isIPv4, isIPv6 } from 'node:net';

/**
 * The one place the service's DNS resolver is made: domain verification (`_switchboard.<domain>` TXT) and
 * the authentication of received mail (SPF, DKIM, DMARC) both ask it. `DNS_SERVERS` (comma-separated
 * `host:port`, IPv6 as `[::1]:53`) names the servers; unset, the system's (`/etc/resolv.conf`).
 *
 * The servers are set at start-up (`setDnsServers`); a module loaded where that did not run (a worker
 * thread) falls back to `process.env.DNS_SERVERS`, so pass the setting on when starting one.
 */

/** Each query: 2.5 s per try, two tries. */
const QUERY_TIMEOUT_MS = 2500;
const TRIES = 2;

/** Domain verification runs inside a write's transaction (which, embedded, holds the only connection): one short try. */
const VERIFY_TIMEOUT_MS = 1500;

let configured: string[] | undefined;
let resolver: dns.Resolver | undefined;
let quickResolver: dns.Resolver | undefined;

/** `host:port` entries of a `DNS_SERVERS` value; throws with a readable message on a bad entry. */
export function parseDnsServers(text: string | undefined): string[] {
  const entries = (text ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const entry of entries) {
    // 1.2.3.4, 1.2.3.4:53, [::1], [::1]:53, or a bare IPv6 address.
    const bracketed = /^\[([^\]]+)\](?::(\d{1,5}))?$/.exec(entry);
    const colon = entry.lastIndexOf(':');
    const ok = bracketed
      ? isIPv6(bracketed[1]!)
      : isIP(entry) !== 0 || (colon > 0 && isIPv4(entry.slice(0, colon)) && /^\d{1,5}$/.test(entry.slice(colon + 1)));
    if (!ok) throw new Error(`"${entry}" is not a DNS server: write an IP address with an optional port, e.g. 127.0.0.1:53 or [::1]:53`);
  }
  return entries;
}

/** Sets the servers (an empty list: the system's). Called at start-up and by tests. */
export function setDnsServers(servers: string[]): void {
  configured = servers;
  resolver = undefined;
  quickResolver = undefined;
}

function makeResolver(timeout: number, tries: number): dns.Resolver {
  const servers = configured ?? parseDnsServers(process.env.DNS_SERVERS);
  const next = new dns.Resolver({ timeout, tries });
  if (servers.length > 0) next.setServers(servers);
  return next;
}

/** The resolver every DNS question of the service goes through. */
export const dnsResolver = (): dns.Resolver => (resolver ??= makeResolver(QUERY_TIMEOUT_MS, TRIES));

/** `dns.promises.resolve` through the service's resolver (the shape mailauth's `resolver` option takes). */
export const resolveDns = (name: string, rrtype: string): Promise<unknown> => dnsResolver().resolve(name, rrtype);

/**
 * The TXT records at `name`, each joined from its strings; [] when the name or the record does not exist.
 * One try of at most 1.5 s: the lookup of domain verification.
 */
export async function resolveTxt(name: string): Promise<string[]> {
  try {
    return (await (quickResolver ??= makeResolver(VERIFY_TIMEOUT_MS, 1)).resolveTxt(name)).map((chunks) => chunks.join(''));
  } catch (err) {
    if (['ENOTFOUND', 'ENODATA'].includes((err as { code?: string }).code ?? '')) return [];
    throw err;
  }
}
