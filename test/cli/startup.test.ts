import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { dataDirHolder } from '../../src/db/lock.js';
import { baseEnv, cli, entry, root, spawnServer } from '../helpers/cli.js';
import { openTestDatabase, testDbKind } from '../helpers/database.js';
import { freePort } from '../helpers/listen.js';

/**
 * The command line and start-up say what to do: which database a command used, a new empty database
 * created by mistake, a port in use, a database that cannot be reached or refuses the login, a
 * DATABASE_URL without a database, Ctrl-C during start. Each failure is one line naming the setting.
 */

const lines = (text: string) => text.trim().split('\n').filter(Boolean);

/** A password that must never appear in what is printed. */
const PASSWORD = 'n0t-to-be-printed';

/** The same URL with a password (trust authentication ignores it) and another user or database. */
function variant(url: string, change: { user?: string; database?: string }) {
  const u = new URL(url);
  u.password = PASSWORD;
  if (change.user) u.username = change.user;
  if (change.database !== undefined) u.pathname = `/${change.database}`;
  return u.toString();
}

let database: Awaited<ReturnType<typeof openTestDatabase>> | undefined;
let dataDir: string;
/** The environment that selects this run's database: a DATA_DIR, or a fresh PostgreSQL database. */
let dbEnv: () => Record<string, string>;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'sb-startup-'));
  if (testDbKind === 'postgres') {
    database = await openTestDatabase();
    dbEnv = () => ({ DATABASE_URL: variant(database!.url!, {}), DATA_DIR: dataDir });
  } else dbEnv = () => ({ DATA_DIR: join(dataDir, 'data') });
});
afterAll(async () => {
  await database?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('every command says which database it used', () => {
  test.runIf(testDbKind === 'pglite')('a directory without a database: the command does nothing unless told to create one, and says where the server\'s data is', async () => {
    const dir = join(dataDir, 'fresh');
    const refused = await cli(['org', 'create', '--name', 'Acme'], { DATA_DIR: dir });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`${dir} holds no database, so the command did nothing`);
    expect(refused.stderr).toMatch(/DATA_DIR=\/path\/to\/data npm run -s cli -- .*DATABASE_URL.*--create-database/s);
    expect(existsSync(join(dir, 'pgdata'))).toBe(false);

    const first = await cli(['org', 'create', '--name', 'Acme', '--create-database'], { DATA_DIR: dir });
    expect(first.code, first.stderr).toBe(0);
    expect(first.stderr).toContain(`switchboard: database: the embedded database in ${dir}, opened by this command (no server holds it)`);
    expect(first.stderr).toMatch(/held no database: created a new, empty one there \(--create-database\)/);

    const second = await cli(['org', 'create', '--name', 'Acme 2'], { DATA_DIR: dir });
    expect(second.code, second.stderr).toBe(0);
    expect(second.stderr).toContain(`database: the embedded database in ${dir}, opened by this command`);
    expect(second.stderr).not.toMatch(/created a new/);
  }, 180_000);

  test.runIf(testDbKind === 'pglite')('outside the repository, without DATA_DIR: it says to run it in the repository, and names it', async () => {
    const elsewhere = join(dataDir, 'elsewhere');
    mkdirSync(elsewhere);
    const env = baseEnv({});
    delete env.DATA_DIR;
    // The CLI as bin/switchboard.js runs it, in a directory outside the repository.
    const r = spawnSync(process.execPath, [entry.cli, 'org', 'create', '--name', 'Acme'], { cwd: elsewhere, env, encoding: 'utf8' });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`It was run in ${elsewhere}, outside the repository`);
    expect(r.stderr).toContain(`cd ${root} && npm run -s cli -- …`);
    expect(existsSync(join(elsewhere, 'data', 'pgdata'))).toBe(false);
  }, 60_000);

  test.runIf(testDbKind === 'postgres')('PostgreSQL: host and database name, never the password', async () => {
    const r = await cli(['org', 'create', '--name', 'Acme'], dbEnv());
    expect(r.code, r.stderr).toBe(0);
    const name = new URL(database!.url!).pathname.slice(1);
    expect(r.stderr).toMatch(new RegExp(`switchboard: database: PostgreSQL database "${name}" on [^ ]+:\\d+ \\(DATABASE_URL\\)`));
    expect(r.stderr + r.stdout).not.toContain(PASSWORD);
  }, 180_000);
});

describe('start-up', () => {
  let held: Server;
  let heldPort: number;
  beforeAll(async () => {
    held = createServer();
    await new Promise<void>((r) => held.listen(0, '127.0.0.1', r));
    heldPort = (held.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((r) => held.close(() => r())));

  test('a port in use: one line naming the port and PORT, and nothing left held', async () => {
    const server = spawnServer({ ...dbEnv(), PORT: String(heldPort), HOST: '127.0.0.1' });
    expect(await server.exited).toBe(1);
    const said = lines(server.log()).filter((l) => !l.startsWith('Starting Switchboard'));
    expect(said, server.log()).toHaveLength(1);
    expect(said[0]).toMatch(new RegExp(`^Port ${heldPort} on 127\\.0\\.0\\.1 is already in use.*PORT=`));
    expect(server.log()).not.toMatch(/EADDRINUSE|\n\s+at /);
    // The database was closed on the way out: the data directory is free again.
    if (testDbKind === 'pglite') expect(dataDirHolder(dbEnv().DATA_DIR!)).toBeUndefined();
  }, 180_000);

  test('a database nobody listens on: one line naming DATABASE_URL without its password', async () => {
    const port = await freePort();
    const url = `postgres://switchboard:${PASSWORD}@127.0.0.1:${port}/switchboard`;
    const server = spawnServer({ DATABASE_URL: url, PORT: '0', HOST: '127.0.0.1' });
    expect(await server.exited).toBe(1);
    const said = lines(server.log()).filter((l) => !l.startsWith('Starting Switchboard'));
    expect(said, server.log()).toEqual([
      `Cannot reach the database of DATABASE_URL (postgres://switchboard@127.0.0.1:${port}/switchboard): nothing accepts connections on 127.0.0.1:${port} (is PostgreSQL running there?).`,
    ]);
    expect(server.log()).not.toContain(PASSWORD);
  }, 120_000);

  test.runIf(testDbKind === 'postgres')('a login the database refuses, and a database that does not exist: one line each', async () => {
    const refused = spawnServer({ DATABASE_URL: variant(database!.url!, { user: 'no_such_role_sb' }), PORT: '0', HOST: '127.0.0.1' });
    expect(await refused.exited).toBe(1);
    const refusedLines = lines(refused.log()).filter((l) => !l.startsWith('Starting Switchboard'));
    expect(refusedLines).toHaveLength(1);
    expect(refusedLines[0]).toMatch(/^The database of DATABASE_URL \(postgres:\/\/no_such_role_sb@[^)]+\) refused the login: .*no_such_role_sb/);

    const missing = spawnServer({ DATABASE_URL: variant(database!.url!, { database: 'sb_no_such_database' }), PORT: '0', HOST: '127.0.0.1' });
    expect(await missing.exited).toBe(1);
    expect(lines(missing.log()).filter((l) => !l.startsWith('Starting Switchboard'))).toEqual([
      expect.stringMatching(/^The database of DATABASE_URL \(postgres:\/\/postgres@[^)]+\/sb_no_such_database\) does not exist/),
    ]);
    expect(refused.log() + missing.log()).not.toContain(PASSWORD);
  }, 120_000);

  test('a DATABASE_URL without a database name is refused with the form to use, by the server and the command line', async () => {
    const url = `postgres://postgres:${PASSWORD}@127.0.0.1:5432`;
    const server = spawnServer({ DATABASE_URL: url, PORT: '0', HOST: '127.0.0.1' });
    expect(await server.exited).toBe(1);
    expect(server.log()).toMatch(/DATABASE_URL: must name the database .*postgres:\/\/user:password@host:5432\/database/);
    const r = await cli(['migrate'], { DATABASE_URL: `${url}/` });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/DATABASE_URL: must name the database .*postgres:\/\/user:password@host:5432\/database/);
    expect(server.log() + r.stderr).not.toContain(PASSWORD);
  }, 120_000);

  test('Ctrl-C during start: start-up says it was interrupted, and the next start finds everything whole', async () => {
    const env = testDbKind === 'pglite' ? { DATA_DIR: join(dataDir, 'interrupted') } : dbEnv();
    const server = spawnServer({ ...env, PORT: '0', HOST: '127.0.0.1' });
    // Interrupted once it has begun (its first line), long before it listens.
    for (let i = 0; i < 600 && !server.log().includes('Starting Switchboard'); i++) await new Promise((r) => setTimeout(r, 50));
    expect(server.log()).toContain('Starting Switchboard');
    server.child.kill('SIGINT');
    expect(await server.exited).toBe(130);
    expect(server.log()).toMatch(/Start-up interrupted \(SIGINT\): nothing was left half-done/);
    expect(server.log()).not.toMatch(/\n\s+at /);
    if (testDbKind === 'pglite') {
      // The directory is free, and holds a whole database or none (never a half-created one).
      expect(dataDirHolder(env.DATA_DIR!)).toBeUndefined();
      const dir = readdirSync(env.DATA_DIR!);
      expect(dir.includes('pgdata') ? existsSync(join(env.DATA_DIR!, 'pgdata', 'PG_VERSION')) : true).toBe(true);
    }
    const after = await cli(['migrate', '--create-database'], env);
    expect(after.code, after.stderr).toBe(0);
  }, 180_000);
});
