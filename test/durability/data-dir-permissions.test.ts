import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openDatabase, restorePglite } from '../../src/db/client.js';
import { DataDirPermissionError } from '../../src/db/lock.js';
import { testDbKind } from '../helpers/database.js';
import { spawnServer, killAll } from './server-process.js';

/**
 * The embedded database's DATA_DIR holds every secret the service keeps (webhook secrets reach the
 * write-ahead log): it is created 0700 with private files, and a directory others can read is refused at
 * start-up with a message that says how to fix it, as PostgreSQL does.
 */

const work = mkdtempSync(join(tmpdir(), 'sb-perm-'));
chmodSync(work, 0o755); // the parent is readable by others, like a typical installation directory
afterAll(async () => {
  await killAll();
  rmSync(work, { recursive: true, force: true });
});

/** Every path under `dir` whose mode lets group or others in. */
function openToOthers(dir: string): string[] {
  const out: string[] = [];
  const walk = (p: string) => {
    const s = statSync(p);
    if (s.mode & 0o077) out.push(`${p} ${(s.mode & 0o777).toString(8)}`);
    if (s.isDirectory()) for (const e of readdirSync(p)) walk(join(p, e));
  };
  walk(dir);
  return out;
}

describe.runIf(testDbKind === 'pglite')('DATA_DIR permissions (embedded database)', () => {
  it('creates a new DATA_DIR 0700, with nothing in it readable by others', async () => {
    const dataDir = join(work, 'fresh', 'data');
    mkdirSync(join(work, 'fresh'), { mode: 0o755 });
    const database = await openDatabase({ dataDir });
    try {
      await database.migrate();
      await database.db.execute('CREATE TABLE secret_probe (v text)');
      await database.db.execute("INSERT INTO secret_probe VALUES ('whsec_probe')");
    } finally {
      await database.close();
    }
    expect(statSync(dataDir).mode & 0o777).toBe(0o700);
    expect(openToOthers(dataDir)).toEqual([]);
    // The mask is put back for the rest of the process.
    mkdirSync(join(work, 'after'));
    expect(statSync(join(work, 'after')).mode & 0o077).not.toBe(0);
  }, 120_000);

  it('refuses a DATA_DIR that group or others can read, saying how to fix it', async () => {
    const dataDir = join(work, 'open');
    mkdirSync(dataDir, { mode: 0o755 });
    chmodSync(dataDir, 0o755);
    const refused = openDatabase({ dataDir });
    await expect(refused).rejects.toBeInstanceOf(DataDirPermissionError);
    await expect(refused).rejects.toThrow(`chmod -R go-rwx ${dataDir}`);
    chmodSync(dataDir, 0o750);
    await expect(openDatabase({ dataDir })).rejects.toThrow(/mode 0750/);

    // The server itself refuses to start, with the message on stderr.
    const server = await spawnServer({ DATA_DIR: dataDir, DATABASE_URL: '' });
    const exited = await Promise.race([server.exited, new Promise<'running'>((r) => setTimeout(() => r('running'), 60_000))]);
    expect(exited, server.output()).toMatchObject({ code: 1 });
    expect(server.output()).toContain('It must be accessible by its owner only (mode 0700)');
    expect(server.output()).toContain(`chmod -R go-rwx ${dataDir}`);

    // Fixed as told, it starts.
    chmodSync(dataDir, 0o700);
    const database = await openDatabase({ dataDir });
    await database.close();
  }, 120_000);

  it('restores a backup into a private DATA_DIR', async () => {
    const source = join(work, 'source');
    const database = await openDatabase({ dataDir: source });
    let backup: Uint8Array;
    try {
      backup = await database.backup!();
    } finally {
      await database.close();
    }
    const target = join(work, 'restored');
    await restorePglite(target, backup);
    expect(statSync(target).mode & 0o777).toBe(0o700);
    expect(openToOthers(target)).toEqual([]);
  }, 120_000);
});
