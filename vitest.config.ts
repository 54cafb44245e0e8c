import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineConfig, type TestProjectInlineConfiguration } from 'vitest/config';
import { planTestFiles } from './test/helpers/projects.js';
import DurationSequencer from './test/helpers/sequencer.js';

/**
 * The suite as projects (test/README.md explains the choices):
 * - `once`: files whose behaviour does not depend on the database, run once;
 * - `pglite`, and `postgres` when TEST_DATABASE_URL (or DATABASE_URL) is set: the database-bound files, on each;
 * - `*-alone`: the timing-sensitive files (test/helpers/projects.ts), after all the others, one at a time.
 * The others run side by side, three workers on two cores, longest first (test/helpers/sequencer.ts). Each test
 * file gets a fresh database copied from a template migrated once per run (test/helpers/global-setup.ts).
 */
const pgUrl = process.env.TEST_DATABASE_URL || process.env.DATABASE_URL;
if (!pgUrl && process.env.CI === 'true') throw new Error('PostgreSQL (TEST_DATABASE_URL) is required when CI=true');
// Set here, in the main process, so both the global setup and the test workers see them.
process.env.SB_TEST_PGLITE_TEMPLATE ??= join(tmpdir(), `sb-test-pglite-${process.pid}.tar.gz`);
if (pgUrl) {
  process.env.SB_TEST_PG_URL = pgUrl;
  process.env.SB_TEST_PG_TEMPLATE ??= `sb_test_tpl_${process.pid}`;
}

const plan = planTestFiles(import.meta.dirname);
/** Browser pages: what they check is the page in a browser; their database work is tested on both by test/oauth. */
const browser = (files: string[]) => files.filter((f) => f.startsWith('test/browser/'));

function project(name: string, include: string[], db: 'pglite' | 'postgres', alone = false): TestProjectInlineConfiguration[] {
  if (include.length === 0) return [];
  return [
    {
      extends: true,
      test: {
        name,
        include,
        env: { SB_TEST_DB: db },
        // One worker and the default group order: Vitest runs these after every other project, one file at a time,
        // with the 30 s test timeout their failures are judged by. The others share the machine: their timeout
        // only guards against a hang, so it leaves room for a loaded machine.
        // The others also share their workers' modules between files (`isolate: false`): a file's import of the
        // service (Fastify, Drizzle, the MCP SDK, the mail libraries) cost about 2 s of CPU each time, over 200
        // times a run; test/README.md says what that relies on. The timing-sensitive files keep a process each.
        ...(alone ? { maxWorkers: 1 } : { testTimeout: 60_000, isolate: false }),
      },
    },
  ];
}

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // Three files at once on two cores (most of a file's time is waiting on a server); test/README.md has the runs.
    maxWorkers: 3,
    // SB_TEST_REPORT=file: also Vitest's JSON report there, with each file's project and timings
    // (scripts/test-timings.mjs makes test/README.md's table of it).
    reporters: process.env.SB_TEST_REPORT ? ['default', ['./test/helpers/json-report.ts', { outputFile: process.env.SB_TEST_REPORT }]] : ['default'],
    globalSetup: ['test/helpers/global-setup.ts'],
    // Inside each project the longest files first, by test/durations.json (a clean clone has no recorded order).
    sequence: { sequencer: DurationSequencer },
    projects: [
      ...project('once', [...plan.once, ...browser(plan.databases)], 'pglite'),
      ...project('once-alone', plan.onceAlone, 'pglite', true),
      ...project('pglite', plan.databases.filter((f) => !browser([f]).length), 'pglite'),
      ...project('pglite-alone', plan.databasesAlone, 'pglite', true),
      ...(pgUrl
        ? [
            ...project('postgres', plan.databases.filter((f) => !browser([f]).length), 'postgres'),
            ...project('postgres-alone', plan.databasesAlone, 'postgres', true),
          ]
        : []),
    ],
  },
});
