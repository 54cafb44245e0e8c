import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, test } from 'vitest';
import { z } from 'zod';
import { Env, loadConfig } from '../../src/config.js';
import { configurationTable, envVariables, withConfigurationTable } from '../../src/config-docs.js';
import { packagePath } from '../../src/core/paths.js';

/**
 * docs/configuration.md is generated from the configuration schema: it cannot fall behind it, and the
 * schema cannot fall behind what the code reads.
 */

const page = () => readFileSync(packagePath('docs/configuration.md'), 'utf8');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : /\.(ts|js|mjs)$/.test(e.name) ? [join(dir, e.name)] : [],
  );
}

/** The environment variables a file reads: `process.env.X`, `process.env['X']`, `const { X } = process.env`. */
function variablesRead(source: string): string[] {
  const names = new Set<string>();
  for (const m of source.matchAll(/process\.env(?:\.([A-Za-z_]\w*)|\[\s*['"`]([^'"`]+)['"`]\s*\])/g)) names.add((m[1] ?? m[2])!);
  for (const m of source.matchAll(/\{([^{}]*)\}\s*=\s*process\.env\b/g)) {
    for (const part of m[1]!.split(',')) {
      const name = part.split(/[:=]/)[0]!.trim();
      if (name && !name.startsWith('...')) names.add(name);
    }
  }
  return [...names];
}

describe('docs/configuration.md', () => {
  test('its table is the one the schema generates (run `npm run docs:config` after changing src/config.ts)', () => {
    expect(page()).toBe(withConfigurationTable(page()));
  });

  test('every variable of the schema has a meaning (`.describe()`), a type and a default', () => {
    const missing = envVariables().filter((v) => !v.description?.trim()).map((v) => v.name);
    expect(missing, `add .describe('…') (the meaning shown in docs/configuration.md) to these in src/config.ts`).toEqual([]);
    for (const v of envVariables()) {
      expect(v.type, v.name).not.toBe('');
      expect(v.default, v.name).not.toBe('');
    }
  });

  test('every variable the code reads is declared in the schema', () => {
    const declared = new Set(Object.keys(Env.shape));
    const undeclared = sourceFiles(packagePath('src')).flatMap((file) =>
      variablesRead(readFileSync(file, 'utf8'))
        .filter((name) => !declared.has(name))
        .map((name) => `${name} (${relative(packagePath(), file)})`),
    );
    expect(undeclared, 'declare these in src/config.ts (with .describe()) and read them from the loaded config').toEqual([]);
  });

  test('the scan finds each way of reading a variable', () => {
    expect(variablesRead("const a = process.env.FOO_BAR; const b = process.env['BAZ']; const { QUX, ZIP: z = '1' } = process.env;").sort()).toEqual(['BAZ', 'FOO_BAR', 'QUX', 'ZIP']);
  });

  test('a variable added to the schema shows up in the table with its type, default and meaning', () => {
    const extended = Env.extend({ DNS_SERVERS: z.string().default('').describe('DNS servers to ask, comma-separated.'), SMS_MAX: z.coerce.number().int().min(1).max(10).default(3).describe('At most this many.') });
    const table = configurationTable(extended);
    expect(table).toContain('| `DNS_SERVERS` | text | unset | DNS servers to ask, comma-separated. |');
    expect(table).toContain('| `SMS_MAX` | integer 1–10 | `3` | At most this many. |');
    // A variable without a description is named in the table, so the page test fails loudly.
    expect(configurationTable(Env.extend({ NEW_ONE: z.string().optional() }))).toContain('| `NEW_ONE` | text | unset | **no description');
  });

  test('an invalid value is refused with what the setting wants, not a union\'s "Invalid input"', () => {
    expect(() => loadConfig({ DATABASE_URL: 'mysql://x/db', PUBLIC_URL: 'nope' })).toThrow(
      /DATABASE_URL: must be a postgres:\/\/ or postgresql:\/\/ URL: postgres:\/\/user:password@host:5432\/database\n {2}PUBLIC_URL: Invalid URL/,
    );
    expect(() => loadConfig({ DATABASE_URL: 'postgres://u:secret@db.internal:5432' })).toThrow(/DATABASE_URL: must name the database/);
    expect(loadConfig({ DATABASE_URL: 'postgres://u@db.internal/sb' }).databaseUrl).toBe('postgres://u@db.internal/sb');
  });

  test('AUTOMATIC_MAIL_PER_HOUR, the former name of AUTOMATIC_MESSAGES_PER_HOUR, is still read; the new name wins', () => {
    const perHour = (env: Record<string, string>) => loadConfig(env).automations.automaticMessagesPerHour;
    expect(perHour({})).toBe(300);
    expect(perHour({ AUTOMATIC_MAIL_PER_HOUR: '40' })).toBe(40);
    expect(perHour({ AUTOMATIC_MESSAGES_PER_HOUR: '25' })).toBe(25);
    expect(perHour({ AUTOMATIC_MESSAGES_PER_HOUR: '25', AUTOMATIC_MAIL_PER_HOUR: '40' })).toBe(25);
    expect(perHour({ AUTOMATIC_MESSAGES_PER_HOUR: '' })).toBe(300);
    expect(() => perHour({ AUTOMATIC_MAIL_PER_HOUR: '0' })).toThrow(/AUTOMATIC_MAIL_PER_HOUR/);
  });

  test('the hand-written prose around the table is kept', () => {
    const regenerated = withConfigurationTable(page());
    expect(regenerated.startsWith('# Configuration\n')).toBe(true);
    expect(regenerated).toContain('`{base_url}` is `$PUBLIC_URL/v1`');
  });
});
