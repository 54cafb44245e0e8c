import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { packagePath } from '../../src/core/paths.js';
import { cli, root, startServer } from '../helpers/cli.js';
import { openTestDatabase, testDbKind } from '../helpers/database.js';
import { freePort } from '../helpers/listen.js';

/**
 * The walk at the top of docs/sms.md, run as written: its shell blocks are taken from the page and run with
 * bash (the server and the provider as its terminals 1 and 2, the rest as terminal 3), the provider on a
 * free port instead of 2527. Every comment line that shows an exact answer (no "…") must be printed.
 */

const page = readFileSync(packagePath('docs/sms.md'), 'utf8');
const walk = page.slice(page.indexOf('## From an empty server'), page.indexOf('An assistant connected over MCP'));
const blocks = [...walk.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);

let database: Awaited<ReturnType<typeof openTestDatabase>> | undefined;
let dataDir: string;
let server: Awaited<ReturnType<typeof startServer>>;
let providerPid: number | undefined;
let providerPort: number;
const ports = (text: string) => text.replace(/\b2527\b/g, String(providerPort));

beforeAll(async () => {
  expect(blocks).toHaveLength(5);
  providerPort = await freePort();
  dataDir = mkdtempSync(join(tmpdir(), 'sb-sms-walk-'));
  if (testDbKind === 'postgres') database = await openTestDatabase();
  // On PostgreSQL a stored secret (the channel's auth token) needs SECRETS_KEY (docs/configuration.md); the embedded database keeps a key in DATA_DIR.
  const dbEnv: Record<string, string> = database ? { DATABASE_URL: database.url!, DATA_DIR: dataDir, SECRETS_KEY: randomBytes(32).toString('base64') } : { DATA_DIR: dataDir };

  // Terminal 1: `VAR=value … npm start`.
  const start = blocks[0]!.trim();
  expect(start).toMatch(/ npm start$/);
  const settings = Object.fromEntries(start.replace(/ npm start$/, '').split(/\s+/).map((pair) => pair.split('=') as [string, string]));
  server = await startServer({ ...dbEnv, ...settings });

  // Terminal 2: the provider, in a process group of its own so that it can be stopped with its children.
  const provider = spawn('bash', ['-c', ports(blocks[1]!)], { cwd: root, detached: true, stdio: 'ignore' });
  providerPid = provider.pid;
  for (let i = 0; i < 200; i++) {
    const open = await fetch(`http://127.0.0.1:${providerPort}`, { method: 'POST' }).then(() => true, (err: Error) => (err.cause as { code?: string })?.code !== 'ECONNREFUSED');
    if (open) break;
    await new Promise((r) => setTimeout(r, 100));
  }
}, 180_000);

afterAll(async () => {
  if (providerPid) process.kill(-providerPid, 'SIGTERM');
  await server?.stop();
  await database?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('docs/sms.md, the walk', () => {
  test('works as pasted: a text arrives, the automation answers, the receipt delivers it, STOP blocks the next', async () => {
    // The first walk's organization and key (README), through the command line as there.
    const env: Record<string, string> = database ? { DATABASE_URL: database.url!, DATA_DIR: dataDir } : { DATA_DIR: dataDir };
    const org = await cli(['org', 'create', '--name', 'Acme'], env);
    const key = await cli(['apikey', 'create', '--org', org.json.id, '--name', 'demo'], env);
    expect(key.code, key.stderr).toBe(0);

    const script = ['set -eo pipefail', ...blocks.slice(2).map(ports)].join('\n');
    const out = await new Promise<{ code: number | null; stdout: string; stderr: string }>((done) => {
      const bash = spawn('bash', ['-c', script], { cwd: root, env: { ...process.env, ...env, BASE: server.origin, KEY: key.json.key }, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      bash.stdout.on('data', (d) => (stdout += d));
      bash.stderr.on('data', (d) => (stderr += d));
      const timer = setTimeout(() => bash.kill('SIGKILL'), 150_000);
      bash.on('close', (code) => {
        clearTimeout(timer);
        done({ code, stdout, stderr });
      });
    });
    expect(out.code, `${out.stdout}\n${out.stderr}\n${server.log()}`).toBe(0);

    const exact = blocks
      .slice(2)
      .flatMap((b) => b.split('\n'))
      .filter((l) => l.startsWith('# ') && !l.includes('…'))
      .map((l) => l.slice(2));
    expect(exact.length).toBeGreaterThanOrEqual(6);
    for (const line of exact) expect(out.stdout, `${out.stdout}\n${server.log()}`).toContain(line);
    // The channel's URLs are built from PUBLIC_URL.
    expect(out.stdout).toContain(`"webhookUrl":"${server.origin}/hooks/sms/`);
  }, 240_000);
});
