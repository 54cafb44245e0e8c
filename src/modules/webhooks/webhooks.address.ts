import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import type { LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import { isLoopbackHost } from '../../core/secrets.js';

/** Address ranges a webhook may reach: the public internet only (ipaddr.js names the reserved ranges). */
const PUBLIC_RANGES = new Set(['unicast']);

/** Whether an IP address is on the public internet (not private, loopback, link-local, metadata, reserved…). */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  let parsed = ipaddr.parse(address);
  // An IPv4-mapped IPv6 address (::ffff:10.0.0.1) is judged as the IPv4 address it carries.
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  return PUBLIC_RANGES.has(parsed.range());
}

/**
 * Why an endpoint URL is refused, or undefined when it may be stored. https only, except http on a
 * loopback host when insecure endpoints are allowed (development and tests); no credentials in the URL;
 * a literal IP address must be public unless insecure endpoints are allowed. Host names are checked
 * again at every send, after DNS (see `guardedLookup`).
 */
export function urlProblem(raw: string, allowInsecure: boolean): string | undefined {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'Must be an absolute URL';
  }
  if (url.username || url.password) return 'Must not contain credentials';
  if (url.hash) return 'Must not contain a fragment';
  if (url.protocol === 'http:') {
    if (!allowInsecure || !isLoopbackHost(url.hostname)) return 'Must use https (http only for a loopback host when WEBHOOK_ALLOW_INSECURE=true)';
  } else if (url.protocol !== 'https:') {
    return 'Must use https';
  }
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (!allowInsecure && (isLoopbackHost(url.hostname) || (ipaddr.isValid(host) && !isPublicAddress(host)))) {
    return 'Must not point to a private, loopback, link-local or reserved address';
  }
  return undefined;
}

/** Thrown (as the connection's error) when a host name resolves to an address a webhook may not reach. */
export class ForbiddenAddressError extends Error {}

/**
 * A DNS lookup for the HTTP client that refuses non-public addresses: the check happens on the very
 * address the connection then uses, so a name cannot resolve to a public address when stored and to an
 * internal one when sent (DNS rebinding).
 */
export function guardedLookup(allowInsecure: boolean): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
      if (err) return callback(err, '', 0);
      const allowed = allowInsecure ? addresses : addresses.filter((a) => isPublicAddress(a.address));
      if (allowed.length === 0) return callback(new ForbiddenAddressError(`${hostname} resolves to a private or reserved address`), '', 0);
      if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, allowed);
      callback(null, allowed[0]!.address, allowed[0]!.family);
    });
  };
}
