import { describe, expect, it } from 'vitest';
import { isPublicAddress, urlProblem } from '../../src/core/outbound.js';
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
  ])('%s is not public', (address) => expect(isPublicAddress(address)).toBe(false));

  it.each(['93.184.216.34', '1.1.1.1', '2606:4700:4700::1111'])('%s is public', (address) => expect(isPublicAddress(address)).toBe(true));

  it('refuses private, loopback and plain-http URLs unless insecure endpoints are allowed', () => {
    expect(urlProblem('https://example.com/hook', false)).toBeUndefined();
    for (const url of ['http://example.com/hook', 'https://127.0.0.1/hook', 'https://[::1]/hook', 'https://169.254.169.254/latest', 'https://10.0.0.1/', 'https://localhost/hook']) {
      expect(urlProblem(url, false), url).toBeDefined();
    }
    expect(urlProblem('http://127.0.0.1:8080/hook', true)).toBeUndefined();
    expect(urlProblem('http://example.com/hook', true)).toBeDefined(); // http only for loopback
  });

  it('a host name that resolves to a loopback address is refused at send time, after DNS', async () => {
    const result = await postWebhook('http://localhost:9/hook', '{}', {}, false);
    expect(result.statusCode).toBeNull();
    expect(result.error).toMatch(/private or reserved address/);
  });
});
