import { describe, expect, test } from 'vitest';
import { useDocWalk } from '../helpers/doc-walk.js';

/**
 * The walk at the top of docs/sms.md, run as written (test/helpers/doc-walk.ts): the server and the
 * provider as its terminals 1 and 2, the rest as terminal 3, the provider on a free port instead of 2527.
 */

const walk = useDocWalk({ page: 'docs/sms.md', from: '## From an empty server', until: 'An assistant connected over MCP', blocks: 5, ports: [2527] });

describe('docs/sms.md, the walk', () => {
  test('works as pasted: a text arrives, the automation answers, the receipt delivers it, STOP blocks the next', async () => {
    const { stdout, exact } = await walk.run();
    expect(exact.length).toBeGreaterThanOrEqual(6);
    // The channel's URLs are built from PUBLIC_URL.
    expect(stdout).toContain(`"webhookUrl":"${walk.origin()}/hooks/sms/`);
  }, 240_000);
});
