import { describe, expect, it } from 'vitest';
import { guardedLookup, isPublicAddress, urlProblem } from '../../src/core/outbound.js';
import { postWebhook } from '../../src/workers/webhook-delivery.js';

describe('webhook addresses', () => {
  it.each([
    '127.0.0.1',
    '10.1.2.3',
    '172.16.0.1',
    '192.168.1.1',
    '169.254.169.254', // cloud metadata
    '100.64.0.1',
    '0.0.0.0',
    '::1',
    'fe80::1',
    'fc00::1',
    '::ffff:10.0.0.1',
    '::ffff:127.0.0.1',
    '224.0.0.1',
    '255.255.255.255',
    // Special-purpose IPv4 blocks.
    '192.0.0.8',
    '192.0.2.1',
    '198.18.0.1',
    '198.51.100.7',
    '203.0.113.9',
    '240.0.0.1',
    // IPv6 forms that carry an IPv4 address, and the non-global IPv6 blocks.
    '::',
    '::7f00:1', // IPv4-compatible 127.0.0.1
    '::127.0.0.1',
    '::a00:1', // IPv4-compatible 10.0.0.1
    '::5db8:d822', // IPv4-compatible 93.184.216.34: deprecated form, not global unicast
    '::ffff:93.184.216.34', // IPv4-mapped: never a real destination on the wire
    '::ffff:0:7f00:1', // SIIT (RFC 6145)
    '64:ff9b::7f00:1', // NAT64 of 127.0.0.1
    '64:ff9b::5db8:d822', // NAT64 of a public address: the translator is internal
    '64:ff9b:1::a00:1', // local-use NAT64
    '2002:7f00:1::1', // 6to4 of 127.0.0.1
    '2002:a00:1::1', // 6to4 of 10.0.0.1
    '2001::1', // Teredo
    '2001:db8::1', // documentation
    '3fff::1', // documentation
    '100::1', // discard
    'fec0::1', // site-local
    '5f00::1', // segment routing
    'ff02::1',
  ])('%s is not public', (address) => expect(isPublicAddress(address)).toBe(false));

  it.each(['93.184.216.34', '1.1.1.1', '2606:4700:4700::1111', '2a00:1450:4001:80e::200e'])('%s is public', (address) => expect(isPublicAddress(address)).toBe(true));

  it('refuses URLs with a literal non-public IPv6 address', () => {
    for (const url of ['https://[::7f00:1]/hook', 'https://[::ffff:127.0.0.1]/hook', 'https://[64:ff9b::a00:1]/hook', 'https://[2002:a00:1::1]/hook']) {
      expect(urlProblem(url, false), url).toBeDefined();
    }
  });

  it('refuses private, loopback and plain-http URLs unless insecure endpoints are allowed', () => {
    expect(urlProblem('https://example.com/hook', false)).toBeUndefined();
    for (const url of ['http://example.com/hook', 'https://127.0.0.1/hook', 'https://[::1]/hook', 'https://169.254.169.254/latest', 'https://10.0.0.1/', 'https://localhost/hook']) {
      expect(urlProblem(url, false), url).toBeDefined();
    }
    expect(urlProblem('http://127.0.0.1:8080/hook', true)).toBeUndefined();
    expect(urlProblem('http://example.com/hook', true)).toBeDefined(); // http only for loopback
  });

  it('a host name that resolves to a loopback address is refused at send time, after DNS', async () => {
    const err = await new Promise<Error | null>((resolve) => guardedLookup(false)('localhost', {}, (e) => resolve(e)));
    expect(err?.message).toMatch(/private or reserved address/);
    const allowed = await new Promise<Error | null>((resolve) => guardedLookup(true)('localhost', {}, (e) => resolve(e)));
    expect(allowed).toBeNull();
  });

  it('a URL is checked again at send time, with the setting of now', async () => {
    for (const url of ['http://127.0.0.1:9/hook', 'https://127.0.0.1:9/hook', 'https://[::7f00:1]:9/hook', 'https://localhost:9/hook']) {
      const result = await postWebhook(url, '{}', {}, false);
      expect(result.statusCode, url).toBeNull();
      expect(result.error, url).toMatch(/may not be reached: Must (use https|not point to a private)/);
    }
  });
});
