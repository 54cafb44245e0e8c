import { describe, expect, test } from 'vitest';
import { useDocWalk } from '../helpers/doc-walk.js';

/**
 * The SMPP walk of docs/sms.md, run as written (test/helpers/doc-walk.ts): the server and the SMSC as its
 * terminals 1 and 2, the rest as terminal 3, the SMSC on a free port instead of 2775.
 */

const walk = useDocWalk({ page: 'docs/sms.md', from: '### SMPP, step by step', until: '## Opt-outs', blocks: 3, ports: [2775] });

describe('docs/sms.md, the SMPP walk', () => {
  test('works as pasted: the bind, a text arriving, the reply submitted over the bind, its receipt delivering it', async () => {
    const { exact } = await walk.run();
    expect(exact).toEqual(['smpp shop passwordSet=true webhookUrl=null', 'smpp +12122003006: Are you open today?', 'delivered (1f01): Yes, until 6 pm']);
  }, 240_000);
});
