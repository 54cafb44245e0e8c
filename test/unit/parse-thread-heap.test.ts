import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

describe('the mail reading threads’ heap', () => {
  it('keeps a thread’s young generation to its limit when the process runs with --max-semi-space-size, as npm start does', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--max-semi-space-size=8', '--import', 'tsx', 'test/fixtures/parse-thread-young.ts'], { cwd: process.cwd(), timeout: 60_000 });
    const { youngMb, limitMb } = JSON.parse(stdout.trim().split('\n').pop()!) as { youngMb: number; limitMb: number };
    // With the process's flag winning, the thread's young generation grew to the main thread's 16 MB.
    expect(youngMb).toBeLessThanOrEqual(limitMb);
  });
});
