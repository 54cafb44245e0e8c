import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { openDatabase } from '../../src/db/client.js';
import { root } from './cli.js';
import * as postgres from './postgres-setup.js';

/**
 * Once per `vitest run`, in the main process, before any file: the compiled server (`dist/`, what
 * `npm start` runs) when the sources are newer than it, the migrated embedded-database template every file
 * starts from, and the migrated PostgreSQL template when the suite runs on PostgreSQL. Every project lists
 * this file; it does its work the first time only.
 */

const newest = (dir: string): number =>
  readdirSync(dir, { withFileTypes: true }).reduce((max, e) => {
    const path = join(dir, e.name);
    return Math.max(max, e.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }, 0);

/** `npm run build` when a source file, the build configuration or the lockfile changed since the last build. */
export function buildServer() {
  const built = join(root, 'dist/src/main.js');
  const inputs = Math.max(newest(join(root, 'src')), ...['tsconfig.json', 'tsconfig.build.json', 'package-lock.json'].map((f) => statSync(join(root, f)).mtimeMs));
  if (existsSync(built) && statSync(built).mtimeMs >= inputs) return;
  const started = performance.now();
  try {
    execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    // tsc still writes its output on a type error; the tests say what breaks, `npm run typecheck` says why.
    const out = (err as { stdout?: Buffer }).stdout?.toString() ?? '';
    if (!existsSync(built) || statSync(built).mtimeMs < inputs) throw err;
    process.stderr.write(`dist/ built with type errors:\n${out.slice(0, 4000)}\n`);
  }
  process.stderr.write(`dist/ built for the server processes the tests start (${Math.round(performance.now() - started)} ms)\n`);
}

/** The migrated embedded database, dumped to SB_TEST_PGLITE_TEMPLATE (see openTestDatabase). */
async function pgliteTemplate(path: string) {
  const database = await openDatabase({});
  try {
    await database.migrate();
    const dump = await database.backup!();
    writeFileSync(`${path}.partial`, dump);
    renameSync(`${path}.partial`, path);
  } finally {
    await database.close();
  }
}

export async function setup() {
  // Vitest runs the global setup of each project; the work is the same for all.
  if (process.env.SB_TEST_SETUP_DONE) return;
  process.env.SB_TEST_SETUP_DONE = '1';
  buildServer();
  await Promise.all([pgliteTemplate(process.env.SB_TEST_PGLITE_TEMPLATE!), process.env.SB_TEST_PG_URL ? postgres.setup() : undefined]);
  return async () => {
    rmSync(process.env.SB_TEST_PGLITE_TEMPLATE!, { force: true });
    if (process.env.SB_TEST_PG_URL) await postgres.teardown();
  };
}
