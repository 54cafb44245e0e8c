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

/** IPv6 global unicast (RFC 4291 §2.4): everything else is special (loopback, mapped, NAT64, ULA, link-local…). */
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');

/**
 * Whether an IP address is on the public internet: global unicast outside every special-purpose range
 * (ipaddr.js names them after IANA's registries: private, loopback, link-local, carrier-grade NAT,
 * documentation, benchmarking, 6to4, Teredo, ORCHID, …). IPv6 must also lie in 2000::/3, so the forms
 * that carry an IPv4 address (IPv4-compatible `::7f00:1`, IPv4-mapped `::ffff:a.b.c.d`, NAT64
 * `64:ff9b::/96`) and the other non-global blocks are never public, whatever address they carry.
 */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  const parsed = ipaddr.parse(address);
  if (parsed.range() !== 'unicast') return false;
  return parsed.kind() === 'ipv4' || (parsed as ipaddr.IPv6).match(GLOBAL_UNICAST_V6);
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

/** Seconds or an HTTP date, as milliseconds; undefined when absent or unreadable. */
export function retryAfterMs(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (!v) return undefined;
  if (/^\d+$/.test(v.trim())) return Number(v.trim()) * 1000;
  const at = Date.parse(v);
  return Number.isFinite(at) ? Math.max(0, at - now) : undefined;
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

export interface OutboundAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  /** The body as read: whole, or its first `maxBytes` when `overflow` is 'truncate'. */
  body: string;
  /** The same bytes, undecoded (media). */
  bytes: Buffer;
  /** Whether the whole body arrived (false: the connection ended early, or the body was cut at `maxBytes`). */
  complete: boolean;
}

/** Why a request brought no answer: `ForbiddenAddressError`'s message, a timeout, a network error or a body over the limit. */
export class OutboundProblem extends Error {
  constructor(
    message: string,
    readonly kind: 'forbidden' | 'timeout' | 'network' | 'too-large',
  ) {
    super(message);
  }
}

export interface OutboundOptions {
  method: 'GET' | 'POST';
  headers: Record<string, string | number>;
  body?: string;
  allowInsecure: boolean;
  /** The setting that allows insecure targets, named in the refusal (default `WEBHOOK_ALLOW_INSECURE`). */
  insecureSetting?: string;
  timeoutMs: number;
  /** The most of the answer's body read: past it the answer is cut ('truncate') or refused ('fail'). */
  maxBytes: number;
  overflow: 'truncate' | 'fail';
}

/**
 * One request to an address a user chose (a webhook endpoint, a client metadata document): the URL checked
 * again now (`urlProblem`, with today's setting: a URL stored while insecure targets were allowed is refused
 * once they are not), the address checked after DNS on the connection itself (a literal IP address is the
 * connected address and `urlProblem` judged it), no redirects followed, an answer within `timeoutMs`, at most
 * `maxBytes` of body. Written on node:http(s) rather than fetch because the guarded DNS lookup must sit on
 * the very connection, which fetch does not expose without a second HTTP stack.
 */
export function outboundRequest(url: string, opts: OutboundOptions): Promise<OutboundAnswer> {
  return new Promise((resolve, reject) => {
    const problem = urlProblem(url, opts.allowInsecure, opts.insecureSetting);
    if (problem) return reject(new OutboundProblem(`${url} may not be reached: ${problem}`, 'forbidden'));
    const target = new URL(url);
    const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
    const timedOut = () => new OutboundProblem(`No answer within ${opts.timeoutMs / 1000} s`, 'timeout');
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      fn();
    };
    const req = send(
      target,
      {
        method: opts.method,
        headers: { ...opts.headers, ...(opts.body !== undefined ? { 'content-length': Buffer.byteLength(opts.body) } : {}) },
        lookup: guardedLookup(opts.allowInsecure),
        timeout: opts.timeoutMs,
      },
      (res) => {
        const tooLarge = () => new OutboundProblem(`The answer is larger than ${opts.maxBytes} bytes`, 'too-large');
        if (opts.overflow === 'fail' && Number(res.headers['content-length']) > opts.maxBytes) {
          res.destroy();
          return settle(() => reject(tooLarge()));
        }
        const chunks: Buffer[] = [];
        let read = 0;
        const finish = () =>
          settle(() => {
            const bytes = Buffer.concat(chunks);
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body: bytes.toString('utf8'), bytes, complete: res.complete && read <= opts.maxBytes });
          });
        res.on('data', (chunk: Buffer) => {
          read += chunk.length;
          if (read <= opts.maxBytes) return void chunks.push(chunk);
          res.destroy();
          if (opts.overflow === 'fail') settle(() => reject(tooLarge()));
          else finish();
        });
        res.on('end', finish);
        res.on('close', finish);
        res.on('error', finish);
      },
    );
    const deadline = setTimeout(() => req.destroy(timedOut()), opts.timeoutMs);
    req.on('timeout', () => req.destroy(timedOut()));
    req.on('error', (err) =>
      settle(() => reject(err instanceof OutboundProblem ? err : err instanceof ForbiddenAddressError ? new OutboundProblem(err.message, 'forbidden') : new OutboundProblem(err.message, 'network'))),
    );
    req.end(opts.body);
  });
}
