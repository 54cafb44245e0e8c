import { spawn } from 'node:child_process';
import { lstatSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { getTableName, sql } from 'drizzle-orm';
import { PgTable } from 'drizzle-orm/pg-core';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/client.js';
import * as schema from '../../src/db/schema.js';
import { entry } from '../helpers/cli.js';
import { testDbKind } from '../helpers/database.js';
import { send, startServer, useStore } from './server-process.js';

/**
 * Backup and restore of the embedded database: a backup taken through the CLI while the server runs
 * (the server dumps its own database), restored by the CLI into an empty directory, holds every record.
 */

const ROOT = resolve(import.meta.dirname, '../..');
const store = useStore(testDbKind === 'pglite');

function cli(args: string[], env: Record<string, string>) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((done, fail) => {
    const child = spawn(process.execPath, [entry.cli, ...args], { cwd: ROOT, env: { ...process.env, LOG_LEVEL: 'warn', DATABASE_URL: '', ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', fail);
    child.on('close', (code) => done({ code, stdout, stderr }));
  });
}

/** Every row of every table, ordered, as JSON text per table. */
async function snapshot(dataDir: string) {
  const database = await openDatabase({ dataDir });
  try {
    const out: Record<string, string> = {};
    const tables = (Object.values(schema) as unknown[]).filter((v): v is PgTable => v instanceof PgTable);
    for (const table of tables) {
      const name = getTableName(table);
      const rows = await database.db.execute(sql.raw(`SELECT * FROM "${name}" ORDER BY 1, 2`));
      out[name] = JSON.stringify((rows as unknown as { rows: unknown[] }).rows);
    }
    return out;
  } finally {
    await database.close();
  }
}

describe.runIf(testDbKind === 'pglite')('backup and restore (embedded database)', () => {
  it('a backup taken while the server runs restores every record into an empty directory', async () => {
    const work = mkdtempSync(join(tmpdir(), 'sb-backup-'));
    try {
      const server = await startServer(store.env);
      for (let i = 0; i < 20; i++) expect((await send(server.url, 'POST', '/v1/contacts', store.key, { name: `Backed up ${i}` })).status).toBe(201);
      expect((await send(server.url, 'POST', '/v1/messages', store.key, { direction: 'incoming', type: 'email', text: 'keep me' })).status).toBe(201);

      // A file another user could read, linked where a predictable partial file would be written: never written through.
      const victim = join(work, 'victim');
      writeFileSync(victim, 'untouched', { mode: 0o644 });
      symlinkSync(victim, join(work, `switchboard.backup.partial-${server.pid}`));

      const backup = await cli(['backup', '--out', join(work, 'switchboard.backup'), '--without-secrets'], store.env);
      expect(backup.code, backup.stderr).toBe(0);
      expect(backup.stderr).toMatch(/handled by the running server/);
      expect(lstatSync(join(work, 'switchboard.backup')).isFile()).toBe(true);
      expect(statSync(join(work, 'switchboard.backup')).mode & 0o777).toBe(0o600);
      expect(readFileSync(victim, 'utf8')).toBe('untouched');
      server.proc.kill('SIGTERM');
      await server.exited;

      const target = join(work, 'restored');
      const restored = await cli(['restore', '--in', join(work, 'switchboard.backup')], { DATA_DIR: target });
      expect(restored.code, restored.stderr + restored.stdout).toBe(0);
      // Restoring over a database is refused.
      expect((await cli(['restore', '--in', join(work, 'switchboard.backup')], { DATA_DIR: target })).code).not.toBe(0);

      const [before, after] = [await snapshot(store.dataDir), await snapshot(target)];
      expect(Object.keys(after).sort()).toEqual(Object.keys(before).sort());
      for (const table of Object.keys(before)) expect(after[table], table).toBe(before[table]);
      expect(before.contacts).toContain('Backed up 19');
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }, 120_000);
});
