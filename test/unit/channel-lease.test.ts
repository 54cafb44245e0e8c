import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { LEASE_MS } from '../../src/workers/imap-sync.js';

/** `CHANNEL_LEASE_MS`: how long a process's claim on an IMAP or SMPP channel lasts (the tests of takeovers make it short). */
describe('CHANNEL_LEASE_MS', () => {
  it('defaults to the 20 s lease, takes a value from 1 s, and refuses less', () => {
    expect(loadConfig({}).channelLeaseMs).toBe(LEASE_MS);
    expect(LEASE_MS).toBe(20_000);
    expect(loadConfig({ CHANNEL_LEASE_MS: '3000' }).channelLeaseMs).toBe(3000);
    expect(() => loadConfig({ CHANNEL_LEASE_MS: '999' })).toThrow();
  });
});
