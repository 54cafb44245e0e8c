import { readFileSync } from 'node:fs';
import { describe, expect, test } from 'vitest';
import { parseCommandLine } from '../../src/cli/args.js';
import { COMMANDS } from '../../src/cli/commands.js';
import { Env } from '../../src/config.js';
import { CATEGORY_IDS } from '../../src/core/categories.js';
import { packagePath } from '../../src/core/paths.js';

/** `--help` is drawn from the tables the server itself uses: the permission areas, the settings, the commands. */

const helpText = (argv: string[]) => {
  const r = parseCommandLine(argv);
  if (r.kind !== 'help') throw new Error('not help');
  return r.text;
};

describe('--help', () => {
  test('apikey create lists every permission area the server checks', () => {
    const text = helpText(['apikey', 'create', '--help']);
    for (const area of CATEGORY_IDS) expect(text).toContain(area);
    // The three areas the hand-written list had left out.
    expect(text).toMatch(/channels.*events.*webhooks|events.*webhooks/s);
  });

  test('the overview names the settings that choose the database, with the meaning the configuration page gives', () => {
    const text = helpText(['--help']);
    for (const name of ['DATA_DIR', 'DATABASE_URL'] as const) expect(text).toContain(`${name.padEnd(12)}  ${Env.shape[name].description}`);
    expect(text).toContain('docs/configuration.md');
  });

  test('docs/cli.md lists every command', () => {
    const page = readFileSync(packagePath('docs/cli.md'), 'utf8');
    const missing = COMMANDS.map((c) => c.name).filter((name) => !new RegExp(`\`${name}[ \`]`).test(page));
    expect(missing, 'add these commands to the table of docs/cli.md').toEqual([]);
  });
});
