import { describe, expect, test } from 'vitest';
import { useDocWalk } from '../helpers/doc-walk.js';

/**
 * The walk of docs/conversations.md, run as written (test/helpers/doc-walk.ts): the server and the provider
 * as its terminals 1 and 2, the rest as terminal 3, the provider on a free port instead of 2528.
 */

const walk = useDocWalk({ page: 'docs/conversations.md', from: '## A text conversation, step by step', until: '## Decisions', blocks: 5, ports: [2528] });

describe('docs/conversations.md, the walk', () => {
  test('works as pasted: a customer texts, the thread is assigned, noted, snoozed, reopened by the reply, closed', async () => {
    const { stdout, exact } = await walk.run();
    expect(exact.length).toBeGreaterThanOrEqual(10);
    expect(stdout).toContain('snoozed Lea 1 until tomorrow');
  }, 240_000);
});
