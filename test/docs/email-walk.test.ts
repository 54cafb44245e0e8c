import { describe, expect, test } from 'vitest';
import { useDocWalk } from '../helpers/doc-walk.js';

/**
 * The walk at the top of docs/email.md, run as written (test/helpers/doc-walk.ts): the server and the relay
 * as its terminals 1 and 2, the rest as terminal 3, on free ports instead of 2525 and 2526.
 */

const walk = useDocWalk({ page: 'docs/email.md', until: 'An assistant connected over MCP', blocks: 5, ports: [2525, 2526] });

describe('docs/email.md, the walk', () => {
  test('works as pasted: the answer waits for the reply to leave, and the thread reads as the page says', async () => {
    const { stdout, exact } = await walk.run();
    expect(exact.length).toBeGreaterThanOrEqual(4);
    // The thread is the last thing printed, in the page's order.
    expect(stdout.trim().split('\n').slice(-3)).toEqual(exact.slice(-3));
  }, 240_000);
});
