import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

/**
 * Which test file runs where (read by vitest.config.ts; test/README.md explains the choices).
 *
 * - A file is database-bound when it, or a test module it imports (transitively, inside test/), reads which
 *   database the suite runs on: `test/helpers/database.ts` and the environment it sets (SB_TEST_DB,
 *   SB_TEST_PG_*, TEST_DATABASE_URL). Those run on the embedded database and again on PostgreSQL; every
 *   other file behaves the same on both and runs once. The rule is worked out from the files themselves, so
 *   a new test that opens a test database runs on both without anyone listing it.
 * - The timing-sensitive files below (event-loop gaps, deadlines, slow senders, kills, rate-limit windows)
 *   run after all the others, one file at a time, so their thresholds measure the code and not the
 *   neighbours.
 */

export const TIMING_SENSITIVE = [
  'test/durability/no-freeze.test.ts',
  'test/durability/smpp-flood.test.ts',
  'test/durability/many-channels.test.ts',
  'test/durability/mail-fairness.test.ts',
  'test/durability/hostile-mail.test.ts',
  'test/durability/kill9.test.ts',
  'test/durability/sigterm.test.ts',
  'test/durability/mail-send.test.ts',
  'test/workers/inbound-safety.test.ts',
  'test/workers/mail-relays.test.ts',
  'test/workers/smtp-receiver.test.ts',
  'test/http/rate-limit.test.ts',
  'test/oauth/sign-in-limits.test.ts',
];

const DATABASE_MARKERS = /\bSB_TEST_DB\b|\bSB_TEST_PG_\w+|\bTEST_DATABASE_URL\b/;
const LOCAL_IMPORT = /(?:from\s+|import\s*\(\s*)['"](\.{1,2}\/[^'"]+)['"]/g;

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return e.name === 'fixtures' || e.name === 'node_modules' ? [] : testFiles(path);
    return e.name.endsWith('.test.ts') ? [path] : [];
  });
}

/** The test files of `root` split by the rules above, as paths relative to `root`. */
export function planTestFiles(root: string) {
  const testDir = join(root, 'test');
  const memo = new Map<string, boolean>();
  const readsDatabase = (file: string, seen: Set<string>): boolean => {
    const known = memo.get(file);
    if (known !== undefined) return known;
    if (seen.has(file)) return false;
    seen.add(file);
    const text = readFileSync(file, 'utf8');
    let bound = DATABASE_MARKERS.test(text);
    for (const [, spec] of bound ? [] : text.matchAll(LOCAL_IMPORT)) {
      const target = resolve(dirname(file), spec!).replace(/\.js$/, '.ts');
      // Only the test tree decides: the product's code is the same whichever database the suite runs on.
      if (!target.startsWith(testDir) || !existsSync(target)) continue;
      if (readsDatabase(target, seen)) {
        bound = true;
        break;
      }
    }
    memo.set(file, bound);
    return bound;
  };
  const plan = { once: [] as string[], databases: [] as string[], onceAlone: [] as string[], databasesAlone: [] as string[] };
  for (const file of testFiles(testDir).sort()) {
    const path = relative(root, file);
    const alone = TIMING_SENSITIVE.includes(path);
    const bound = readsDatabase(file, new Set());
    plan[bound ? (alone ? 'databasesAlone' : 'databases') : alone ? 'onceAlone' : 'once'].push(path);
  }
  return plan;
}
