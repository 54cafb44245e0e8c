import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDbKind } from '../helpers/database.js';
import { withDatabase } from '../helpers/postgres-setup.js';
import { startFakeTwilio, type FakeTwilio } from '../helpers/twilio.js';
import { cli } from '../helpers/cli.js';
import { send, spawnServer, startServer, useStore, type ServerProcess } from './server-process.js';

/**
 * Backups that restore: a channel with a secret (a text channel's auth token), backed up, restored into a new
 * place, and the service started there: the token decrypts and the provider accepts it. The embedded
 * database's backup carries the secrets key, encrypted with the operator's passphrase (or leaves it out when
 * told, and says so); PostgreSQL's is a pg_dump plus SECRETS_KEY. A server that finds secrets it cannot read
 * refuses to start, writes nothing, and names the key and where it lived.
 */

const exec = promisify(execFile);
const store = useStore();
let twilio: FakeTwilio;
let work: string;

beforeAll(async () => {
  twilio = await startFakeTwilio();
  work = mkdtempSync(join(tmpdir(), 'sb-backup-secrets-'));
});
afterAll(async () => {
  await twilio?.close();
  rmSync(work, { recursive: true, force: true });
});

const json = (r: { body: string }) => JSON.parse(r.body) as { data: Record<string, unknown> };

/** A text channel whose auth token is a stored secret, on the running server. */
async function textChannel(server: ServerProcess) {
  const created = await send(server.url, 'POST', '/v1/channels', store.key, {
    type: 'sms',
    name: 'Backed up',
    address: `+1212200${String(Math.floor(Math.random() * 9000) + 1000)}`,
    provider: { kind: 'twilio', accountSid: twilio.accountSid, authToken: twilio.authToken, apiBaseUrl: twilio.url },
  });
  expect(created.status, created.body).toBe(201);
  return json(created).data.id as string;
}

/** The channel's connection test: the provider answers only to the right auth token. */
async function providerAccepts(server: ServerProcess, channelId: string) {
  const tested = await send(server.url, 'POST', `/v1/channels/${channelId}/test`, store.key);
  expect(tested.status, tested.body).toBe(200);
  return (json(tested).data as { ok: boolean }).ok;
}

/** Starts a server and waits until it has refused to start (exit 1); answers what it said. */
async function refusal(env: Record<string, string>) {
  const server = await spawnServer(env);
  const exit = await server.exited;
  expect(exit.code, server.output()).toBe(1);
  return server.output();
}

const common = { CHANNELS_ALLOW_PRIVATE: 'true' };

describe.runIf(testDbKind === 'pglite')('backup and restore of the embedded database, secrets included', () => {
  it('restores into an empty directory and starts with the channel working; without the passphrase or with a wrong one it refuses', async () => {
    const server = await startServer({ ...store.env, ...common });
    const channelId = await textChannel(server);
    expect(await providerAccepts(server, channelId)).toBe(true);

    const out = join(work, 'with-secrets.backup');
    const passphrase = join(work, 'passphrase');
    writeFileSync(passphrase, 'correct horse battery staple\n', { mode: 0o600 });
    // Neither a passphrase nor --without-secrets: refused, saying both ways out.
    const bare = await cli(['backup', '--out', out], store.env);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toMatch(/--passphrase-file FILE.*--without-secrets/s);
    expect(existsSync(out)).toBe(false);

    const backup = await cli(['backup', '--out', out, '--passphrase-file', passphrase], store.env);
    expect(backup.code, backup.stderr).toBe(0);
    expect(backup.json).toMatchObject({ encrypted: true, secrets: 'included' });
    expect(backup.stderr).toMatch(/handled by the running server/);
    expect(backup.stderr).toContain(`npm run -s cli -- restore --in ${out} --passphrase-file FILE`);
    // Nothing of the key or the token in clear.
    const bytes = readFileSync(out);
    expect(bytes.includes(readFileSync(join(store.dataDir, 'secrets.key', ), 'utf8').trim())).toBe(false);
    expect(bytes.includes(twilio.authToken)).toBe(false);
    server.proc.kill('SIGTERM');
    await server.exited;

    const target = join(work, 'restored');
    const noPassphrase = await cli(['restore', '--in', out], { DATA_DIR: target });
    expect(noPassphrase.code).toBe(2);
    expect(noPassphrase.stderr).toMatch(/encrypted.*--passphrase-file/);
    const wrong = join(work, 'wrong');
    writeFileSync(wrong, 'not the passphrase at all\n');
    const refused = await cli(['restore', '--in', out, '--passphrase-file', wrong], { DATA_DIR: target });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/passphrase does not open this backup/);
    expect(existsSync(join(target, 'pgdata'))).toBe(false);

    const restored = await cli(['restore', '--in', out, '--passphrase-file', passphrase], { DATA_DIR: target });
    expect(restored.code, restored.stderr).toBe(0);
    expect(restored.json).toMatchObject({ restored: true, dataDir: target, secrets: 'restored', start: `DATA_DIR=${target} npm start` });
    expect(restored.stderr).toContain(`Start the server on it with: DATA_DIR=${target} npm start`);
    expect(statSync(join(target, 'secrets.key')).mode & 0o777).toBe(0o600);
    expect(readFileSync(join(target, 'secrets.key'), 'utf8')).toBe(readFileSync(join(store.dataDir, 'secrets.key'), 'utf8'));

    const again = await startServer({ DATA_DIR: target, ...common });
    expect(await providerAccepts(again, channelId)).toBe(true);
    again.proc.kill('SIGTERM');
    await again.exited;
  }, 180_000);

  it('--without-secrets says so; the server on the restore refuses to start, writes no key, and names the key and where it was', async () => {
    const out = join(work, 'without-secrets.backup');
    const backup = await cli(['backup', '--out', out, '--without-secrets'], store.env);
    expect(backup.code, backup.stderr).toBe(0);
    expect(backup.json).toMatchObject({ encrypted: false, secrets: 'omitted' });
    expect(backup.stderr).toMatch(/does NOT hold the secrets key/);

    const target = join(work, 'restored-without');
    const restored = await cli(['restore', '--in', out], { DATA_DIR: target });
    expect(restored.code, restored.stderr).toBe(0);
    expect(restored.json.secrets).toBe('not in the backup');
    expect(restored.stderr).toMatch(/WITHOUT the secrets key.*key id [0-9a-f]{8}/s);
    expect(existsSync(join(target, 'secrets.key'))).toBe(false);

    const said = await refusal({ DATA_DIR: target, ...common });
    expect(said).toMatch(/channels\.outbound_secret.*key id [0-9a-f]{8}/s);
    expect(said).toContain(`the key file ${join(store.dataDir, 'secrets.key')} on ${hostname()}`);
    expect(said).toMatch(/Nothing was written/);
    expect(existsSync(join(target, 'secrets.key'))).toBe(false);

    // The old key file put back: it starts, and the token works.
    copyFileSync(join(store.dataDir, 'secrets.key'), join(target, 'secrets.key'));
    const started = await startServer({ DATA_DIR: target, ...common });
    const list = await send(started.url, 'GET', '/v1/channels', store.key);
    const id = (JSON.parse(list.body) as { data: { id: string }[] }).data[0]!.id;
    expect(await providerAccepts(started, id)).toBe(true);
    started.proc.kill('SIGTERM');
    await started.exited;
  }, 180_000);
});

describe.runIf(testDbKind === 'postgres')('PostgreSQL: a pg_dump and SECRETS_KEY restore the channels', () => {
  it('pg_dump, pg_restore into a new database, start with the same SECRETS_KEY: the token decrypts; without it the start is refused by name', async () => {
    const key = randomBytes(32).toString('base64');
    const server = await startServer({ ...store.env, ...common, SECRETS_KEY: key });
    const channelId = await textChannel(server);
    const dump = join(work, 'switchboard.dump');
    // What docs/deploy.md says to run, while the service runs.
    await exec('pg_dump', ['-Fc', '-f', dump, store.env.DATABASE_URL!]);
    server.proc.kill('SIGTERM');
    await server.exited;

    const name = `sb_restore_${randomBytes(4).toString('hex')}`;
    const admin = new pg.Client({ connectionString: process.env.SB_TEST_PG_URL! });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
    try {
      const url = withDatabase(process.env.SB_TEST_PG_URL!, name);
      await exec('pg_restore', ['--no-owner', '-d', url, dump]);

      const said = await refusal({ DATABASE_URL: url, DATA_DIR: join(work, 'pg-data'), ...common });
      expect(said).toMatch(/key id [0-9a-f]{8}/);
      expect(said).toContain(`the SECRETS_KEY on ${hostname()}`);

      const restored = await startServer({ DATABASE_URL: url, DATA_DIR: join(work, 'pg-data'), SECRETS_KEY: key, ...common });
      expect(await providerAccepts(restored, channelId)).toBe(true);
      restored.proc.kill('SIGTERM');
      await restored.exited;
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    }
  }, 180_000);
});
