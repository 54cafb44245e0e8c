#!/usr/bin/env node
// `npm test` (the pretest script): what the suite runs and about how long it takes, before it starts, and how
// to run less of it. It only reads: the test files, the environment that adds PostgreSQL, and the durations
// Vitest recorded of its earlier runs here (when it has any).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const files = (dir) => readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.test.ts') ? [join(dir, e.name)] : []));
const tests = files('test');
const postgres = Boolean(process.env.TEST_DATABASE_URL || process.env.DATABASE_URL);

/** The durations Vitest recorded per file and project (its cache), summed over the files that exist now. */
function recorded() {
  const dir = join('node_modules', '.vite', 'vitest');
  if (!existsSync(dir)) return undefined;
  let total = 0;
  let counted = 0;
  for (const sub of readdirSync(dir)) {
    try {
      const { results } = JSON.parse(readFileSync(join(dir, sub, 'results.json'), 'utf8'));
      for (const [key, { duration }] of results) {
        if (!tests.includes(key.slice(key.indexOf(':') + 1)) || (!postgres && key.startsWith('postgres'))) continue;
        total += duration;
        counted++;
      }
    } catch {
      // another version's cache, or none: no figure
    }
  }
  return counted ? { minutes: Math.round(total / 60_000), counted } : undefined;
}

const past = recorded();
const lines = [
  `npm test: ${tests.length} test files; the database-bound ones on the embedded database${postgres ? ' and again on PostgreSQL (TEST_DATABASE_URL)' : ' (set TEST_DATABASE_URL to run them on PostgreSQL too)'}, the others once (test/README.md).`,
  `Three files run side by side (the longest first), then the timing-sensitive ones alone${past ? `; the files' last recorded runs here add up to ${past.minutes} min (${past.counted} of them)` : ''}. Vitest prints each file as it finishes.`,
  'Less of it: one file, npx vitest run test/modules/contacts.test.ts; a folder, npx vitest run test/modules; by test name, npx vitest run -t "creates a contact";',
  "one database, --project 'pglite*' or --project 'postgres*' (with TEST_DATABASE_URL).",
];
process.stderr.write(`${lines.join('\n')}\n\n`);
