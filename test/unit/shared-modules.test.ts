import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The test files of a worker share their modules (vitest.config.ts, `isolate: false`; test/README.md): what
 * one file changes in the process would reach the next. These are the ways a file could, none of which a
 * shared-module run can undo for it.
 */
const root = join(import.meta.dirname, '..', '..');
const files = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? (e.name === 'fixtures' ? [] : files(join(dir, e.name))) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []));

describe('test files that share their modules', () => {
  it('mock no module or global, set no environment variable, and undo fake timers', () => {
    const problems: string[] = [];
    for (const file of files(join(root, 'test'))) {
      const path = relative(root, file);
      if (path === 'test/helpers/global-setup.ts' || path === 'test/unit/shared-modules.test.ts') continue;
      const text = readFileSync(file, 'utf8');
      for (const [pattern, why] of [
        [/\bvi\.(mock|doMock|stubEnv|stubGlobal|resetModules)\(/, 'mocks a module or a global'],
        [/\bprocess\.env(\.\w+|\[[^\]]+\])\s*(=[^=]|\?\?=|\|\|=)|delete\s+process\.env/, 'changes process.env'],
      ] as const) {
        if (pattern.test(text)) problems.push(`${path}: ${why}`);
      }
      if (/\bvi\.useFakeTimers\(/.test(text) && !/\bvi\.useRealTimers\(/.test(text)) problems.push(`${path}: fakes timers and never restores them`);
    }
    expect(problems).toEqual([]);
  });
});
