import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packagePath } from '../../src/core/paths.js';
import { testDbKind } from '../helpers/database.js';
import { freePort } from '../helpers/listen.js';
import { withDatabase } from '../helpers/postgres-setup.js';
import { bash, deployBlock, parseEnvFile, parseUnit } from './deploy-files.js';

/**
 * docs/deploy.md run as written, as far as a machine without systemd can: its commands fill in the settings
 * file; two processes start from the unit's command with the settings files the page gives them (PostgreSQL
 * and Redis; the second with its overrides); the command-line wrapper creates the first organization from
 * the same settings; a write through one process is read through the other, and one stops while the other
 * serves; `migrate` of "Upgrades"; the PostgreSQL backup and restore of "Backups". What the test changes:
 * paths (into a temporary directory), ports (free ones), the database (a new one per run), `sudo` and
 * `systemctl` (the processes are started here as systemd would).
 */

const ROOT = packagePath();
const REDIS = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
let work: string;
let etc: string;
let url: string;
const databases: string[] = [];
const running: ChildProcess[] = [];

/** A new database on the test server, dropped after the file. */
async function newDatabase(template?: string) {
  const name = `sb_deploy_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: process.env.SB_TEST_PG_URL! });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}${template ? ` TEMPLATE ${template}` : ''}`).finally(() => admin.end());
  databases.push(name);
  return withDatabase(process.env.SB_TEST_PG_URL!, name);
}

/** The page's paths, in this run's directory. */
const local = (script: string) =>
  script
    .replaceAll('/opt/switchboard', ROOT)
    .replaceAll('/etc/switchboard', etc)
    .replaceAll('/etc/systemd/system', etc)
    .replaceAll('/var/lib/switchboard', join(work, 'state'))
    .replaceAll('sudo -u switchboard ', '');

/** The lines of a block that run here (no package installs, no systemctl). */
const runnable = (block: string) =>
  block
    .split('\n')
    .filter((l) => !/^(install|systemctl|apt-get|curl|git|cd \/opt)/.test(l.trim()))
    .join('\n');

/** Starts the unit's ExecStart with the settings of its EnvironmentFile lines (later files override), as systemd does. */
async function startUnit(unitFile: string, overrides: Record<string, string>) {
  const unit = parseUnit(readFileSync(unitFile, 'utf8'));
  const service = unit.Service!;
  const env: Record<string, string> = {};
  for (const file of service.EnvironmentFile!) Object.assign(env, parseEnvFile(readFileSync(local(file), 'utf8')));
  Object.assign(env, overrides);
  mkdirSync(env.DATA_DIR!, { recursive: true, mode: 0o700 });
  const [command, ...args] = service.ExecStart![0]!.split(' ');
  const child = spawn(command!, args, { cwd: local(service.WorkingDirectory![0]!), env: { PATH: process.env.PATH!, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  running.push(child);
  let log = '';
  child.stdout!.on('data', (d) => (log = (log + d).slice(-8000)));
  child.stderr!.on('data', (d) => (log = (log + d).slice(-8000)));
  const origin = `http://${env.HOST}:${env.PORT}`;
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  return {
    env,
    origin,
    log: () => log,
    exited,
    async ready() {
      for (const until = Date.now() + 90_000; ; ) {
        if ((await fetch(`${origin}/readyz`).then((r) => r.status, () => 0)) === 200) return;
        if (child.exitCode !== null || Date.now() > until) throw new Error(`the service did not start:\n${log}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    },
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}

/** The built service is what the unit runs: build it when the sources are newer (a developer's machine). */
function ensureBuilt() {
  const newest = (dir: string): number => Math.max(...readdirSync(dir, { withFileTypes: true }).map((e) => (e.isDirectory() ? newest(join(dir, e.name)) : statSync(join(dir, e.name)).mtimeMs)));
  let built = 0;
  try {
    built = statSync(packagePath('dist/src/main.js')).mtimeMs;
  } catch {
    /* not built */
  }
  if (built < newest(packagePath('src'))) expect(spawnSync('npm', ['run', '-s', 'build'], { cwd: ROOT, stdio: 'ignore' }).status).toBe(0);
}

describe.runIf(testDbKind === 'postgres')('docs/deploy.md, run as written', () => {
  beforeAll(async () => {
    ensureBuilt();
    work = mkdtempSync(join(tmpdir(), 'sb-deploy-'));
    etc = join(work, 'config');
    mkdirSync(etc);
    url = await newDatabase();
  }, 300_000);
  afterAll(async () => {
    for (const child of running) if (child.exitCode === null) child.kill('SIGKILL');
    const admin = new pg.Client({ connectionString: process.env.SB_TEST_PG_URL! });
    await admin.connect();
    for (const name of databases) await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
    rmSync(work, { recursive: true, force: true });
  });

  it('settings, two processes on one database, the first organization, an upgrade\'s migrate, a backup and its restore', async () => {
    // "The settings": the page's commands fill in the file (this run's database in place of the new role's).
    copyFileSync(packagePath('deploy/switchboard.env'), join(etc, 'switchboard.env'));
    bash(local(runnable(deployBlock('settings'))), { DB_PASSWORD: 'unused' });
    const filled = readFileSync(join(etc, 'switchboard.env'), 'utf8');
    expect(Object.values(parseEnvFile(filled)).join(' ')).not.toContain('CHANGE-ME');
    const [port1, port2, smtp] = [await freePort(), await freePort(), await freePort()];
    writeFileSync(
      join(etc, 'switchboard.env'),
      filled.replace(/^DATABASE_URL=.*$/m, `DATABASE_URL=${url}`).replace(/^REDIS_URL=.*$/m, `REDIS_URL=${REDIS}`).replace(/^PORT=.*$/m, `PORT=${port1}`).replace(/^SMTP_PORT=.*$/m, `SMTP_PORT=${smtp}`).replace(/^SMTP_HOST=.*$/m, 'SMTP_HOST=127.0.0.1'),
    );
    const settings = parseEnvFile(readFileSync(join(etc, 'switchboard.env'), 'utf8'));
    writeFileSync(join(etc, 'switchboard.service'), readFileSync(packagePath('deploy/switchboard.service'), 'utf8'));

    // The first process, as the unit runs it.
    const first = await startUnit(join(etc, 'switchboard.service'), { DATA_DIR: join(work, 'state') });
    await first.ready();
    expect(first.log()).toContain('Switchboard listening on https://switchboard.example.com');

    // "Two processes on one database": the page's second unit and its settings file.
    bash(local(runnable(deployBlock('second process'))).replace('PORT=3001', `PORT=${port2}`));
    const secondUnit = parseUnit(readFileSync(join(etc, 'switchboard-2.service'), 'utf8'));
    expect(secondUnit.Service!.EnvironmentFile!.map(local)).toEqual([join(etc, 'switchboard.env'), join(etc, 'switchboard-2.env')]);
    expect(secondUnit.Service!.StateDirectory).toEqual(['switchboard-2']);
    const second = await startUnit(join(etc, 'switchboard-2.service'), {});
    await second.ready();
    expect(second.env).toMatchObject({ PORT: String(port2), SMTP_PORT: '', DATA_DIR: join(work, 'state-2'), DATABASE_URL: url, SECRETS_KEY: settings.SECRETS_KEY });

    // "The first organization", through the wrapper and the settings file.
    const created = bash(local(deployBlock('first organization')), { SWITCHBOARD_ENV: join(etc, 'switchboard.env') });
    const key = (JSON.parse(created.slice(created.lastIndexOf('{\n'))) as { key: string }).key;
    expect(key).toMatch(/^sb_/);

    // One database behind both: a write through one, read through the other; a text channel's token is a stored secret.
    const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const contact = (await (await fetch(`${first.origin}/v1/contacts`, { method: 'POST', headers: auth, body: JSON.stringify({ firstName: 'Ada' }) })).json()) as { data: { id: string } };
    expect((await fetch(`${second.origin}/v1/contacts/${contact.data.id}`, { headers: auth })).status).toBe(200);
    const channel = await fetch(`${second.origin}/v1/channels`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ type: 'sms', name: 'Shop', address: '+12122005001', provider: { kind: 'twilio', accountSid: 'AC1', authToken: 'token', apiBaseUrl: 'https://api.twilio.com' } }),
    });
    expect(channel.status, await channel.clone().text()).toBe(201);
    // One stops (SIGTERM, exit 0); the other goes on serving.
    expect(await first.stop()).toBe(0);
    expect((await fetch(`${second.origin}/v1/contacts/${contact.data.id}`, { headers: auth })).status).toBe(200);

    // "Upgrades": migrate, from the wrapper (nothing pending: a no-op that says so).
    const migrated = bash(local(runnable(deployBlock('upgrade'))), { SWITCHBOARD_ENV: join(etc, 'switchboard.env') });
    expect(JSON.parse(migrated)).toEqual({ migrated: true, database: 'postgres' });

    // "Backups": pg_dump while the service runs, pg_restore into a new database; the same SECRETS_KEY starts on it.
    bash(`cd ${work}\n${local(deployBlock('pg backup'))}`);
    const restoredUrl = await newDatabase();
    bash(`cd ${work}\n${deployBlock('pg restore')}`, { NEW_DATABASE_URL: restoredUrl });
    await second.stop();
    const restored = await startUnit(join(etc, 'switchboard.service'), { DATABASE_URL: restoredUrl, DATA_DIR: join(work, 'state-3') });
    await restored.ready();
    expect((await fetch(`${restored.origin}/v1/contacts/${contact.data.id}`, { headers: auth })).status).toBe(200);
    expect(await restored.stop()).toBe(0);
    const withoutKey = await startUnit(join(etc, 'switchboard.service'), { DATABASE_URL: restoredUrl, DATA_DIR: join(work, 'state-3'), SECRETS_KEY: randomBytes(32).toString('base64') });
    expect(await withoutKey.exited).toBe(1);
    expect(withoutKey.log()).toMatch(/channels\.outbound_secret.*key id [0-9a-f]{8}.*the SECRETS_KEY on /s);
  }, 300_000);
});
