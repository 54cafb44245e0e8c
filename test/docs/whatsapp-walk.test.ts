import { describe, expect, test } from 'vitest';
import { useDocWalk } from '../helpers/doc-walk.js';

/**
 * The walk at the top of docs/whatsapp.md, run as written (test/helpers/doc-walk.ts): the server and Meta's
 * Graph API as its terminals 1 and 2, the rest as terminal 3, the Graph API on a free port instead of 2530.
 */

const walk = useDocWalk({ page: 'docs/whatsapp.md', from: '## From an empty server', until: 'An assistant connected over MCP', blocks: 6, ports: [2530] });

describe('docs/whatsapp.md, the walk', () => {
  test('works as pasted: the handshake, a signed message in, the reply out through Meta, read; text outside the window refused', async () => {
    const { stdout, exact } = await walk.run();
    expect(exact.length).toBeGreaterThanOrEqual(7);
    expect(stdout).toContain('whatsapp $BASE/hooks/whatsapp/');
  }, 240_000);
});
