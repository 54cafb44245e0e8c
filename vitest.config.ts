import { defineConfig } from 'vitest/config';

/**
 * The database suite runs on the embedded database always, and again on PostgreSQL when
 * TEST_DATABASE_URL (or DATABASE_URL) is set. Each test file gets a fresh database.
 */
const pgUrl = process.env.TEST_DATABASE_URL || process.env.DATABASE_URL;
if (!pgUrl && process.env.CI === 'true') throw new Error('PostgreSQL (TEST_DATABASE_URL) is required when CI=true');
if (pgUrl) {
  // Set here, in the main process, so both the global setup and the test workers see them.
  process.env.SB_TEST_PG_URL = pgUrl;
  process.env.SB_TEST_PG_TEMPLATE ??= `sb_test_tpl_${process.pid}`;
}

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 120_000,
    pool: 'forks',
    projects: [
      { extends: true, test: { name: 'pglite', include: ['test/**/*.test.ts'], env: { SB_TEST_DB: 'pglite' } } },
      ...(pgUrl
        ? [
            {
              extends: true as const,
              test: {
                name: 'postgres',
                include: ['test/**/*.test.ts'],
                exclude: ['test/unit/**', 'test/browser/**'],
                env: { SB_TEST_DB: 'postgres' },
                globalSetup: ['test/helpers/postgres-setup.ts'],
              },
            },
          ]
        : []),
    ],
  },
});
