import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import { isLoopbackHost } from './secrets.js';

/**
 * Requests this server makes to addresses its users choose (webhook endpoints, client metadata
 * documents): public https only, checked on the address actually connected to, with bounded time and size.
 */

/** Address ranges such a request may reach: the public internet only (ipaddr.js names the reserved ranges). */
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
 * Why a URL is refused, or undefined when it may be used. https only, except http on a loopback host
 * when insecure targets are allowed (development and tests, by the setting named `setting`); no
 * credentials in the URL; a literal IP address must be public unless insecure targets are allowed. Host
 * names are checked again at every request, after DNS (see `guardedLookup`).
 */
export function urlProblem(raw: string, allowInsecure: boolean, setting = 'WEBHOOK_ALLOW_INSECURE'): string | undefined {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'Must be an absolute URL';
  }
  if (url.username || url.password) return 'Must not contain credentials';
  if (url.hash) return 'Must not contain a fragment';
  if (url.protocol === 'http:') {
    if (!allowInsecure || !isLoopbackHost(url.hostname)) return `Must use https (http only for a loopback host when ${setting}=true)`;
  } else if (url.protocol !== 'https:') {
    return 'Must use https';
  }
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (!allowInsecure && (isLoopbackHost(url.hostname) || (ipaddr.isValid(host) && !isPublicAddress(host)))) {
    return 'Must not point to a private, loopback, link-local or reserved address';
  }
  return undefined;
}

/** Thrown (as the connection's error) when a host name resolves to an address that may not be reached. */
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

export interface FetchedDocument {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** Thrown by `fetchDocument` with a sentence saying why nothing usable came back. */
export class FetchProblem extends Error {}

/**
 * GETs a small document: never follows redirects, gives up after `timeoutMs` and refuses a body over
 * `maxBytes` (announced or read). Written on node:http(s) rather than fetch because the guarded DNS
 * lookup must sit on the very connection, which fetch does not expose without a second HTTP stack.
 */
export function fetchDocument(url: string, opts: { allowInsecure: boolean; timeoutMs: number; maxBytes: number; accept: string }): Promise<FetchedDocument> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const get = target.protocol === 'https:' ? httpsRequest : httpRequest;
    const fail = (message: string) => reject(new FetchProblem(message));
    const req = get(target, { method: 'GET', headers: { accept: opts.accept, 'user-agent': 'Switchboard/1' }, lookup: guardedLookup(opts.allowInsecure), timeout: opts.timeoutMs }, (res) => {
      const announced = Number(res.headers['content-length']);
      if (announced > opts.maxBytes) {
        res.destroy();
        return fail(`The document is larger than ${opts.maxBytes} bytes`);
      }
      const chunks: Buffer[] = [];
      let read = 0;
      res.on('data', (chunk: Buffer) => {
        read += chunk.length;
        if (read > opts.maxBytes) {
          res.destroy();
          fail(`The document is larger than ${opts.maxBytes} bytes`);
        } else chunks.push(chunk);
      });
      res.on('end', () => {
        clearTimeout(deadline);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') });
      });
      res.on('error', (err) => fail(`Could not read the document: ${err.message}`));
    });
    const deadline = setTimeout(() => req.destroy(new FetchProblem(`No answer within ${opts.timeoutMs / 1000} s`)), opts.timeoutMs);
    req.on('timeout', () => req.destroy(new FetchProblem(`No answer within ${opts.timeoutMs / 1000} s`)));
    req.on('error', (err) => {
      clearTimeout(deadline);
      fail(err instanceof FetchProblem || err instanceof ForbiddenAddressError ? err.message : `Could not fetch the document: ${err.message}`);
    });
    req.end();
  });
}
