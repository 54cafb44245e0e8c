import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { packagePath } from '../../src/core/paths.js';
import { cli, root, startServer } from './cli.js';
import { openTestDatabase, testDbKind } from './database.js';
import { freePort } from './listen.js';

/**
 * A walk of a docs page, run as written: its shell blocks are taken from the page and run with bash (the
 * server and a local stand-in of the outside world as its terminals 1 and 2, the rest as terminal 3), on
 * free ports instead of the page's. Every comment line that shows an exact answer (no "…") must be printed.
 */

export interface DocWalkOptions {
  /** The page, e.g. `docs/email.md`, and the text that starts and ends the walk on it. */
  page: string;
  from?: string;
  until: string;
  /** How many shell blocks the walk has. */
  blocks: number;
  /** The page's fixed ports, each replaced by a free one; terminal 2 listens on the last. */
  ports: number[];
}

export interface DocWalk {
  /** Runs terminal 3's blocks with `$BASE`, `$ORG` and `$KEY` of a new organization; answers what they printed and the exact lines it holds. */
  run(): Promise<{ stdout: string; exact: string[] }>;
  origin(): string;
}

export const listening = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });

/** The shell blocks of a page between `from` and `until`. */
export function walkBlocks(opts: Pick<DocWalkOptions, 'page' | 'from' | 'until'>): string[] {
  const text = readFileSync(packagePath(opts.page), 'utf8');
  const walk = text.slice(opts.from ? text.indexOf(opts.from) : 0, text.indexOf(opts.until));
  return [...walk.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

/** The settings of a terminal-1 line `VAR=value … npm start`. */
export function startLineSettings(line: string): Record<string, string> {
  expect(line.trim()).toMatch(/(^| )npm start$/);
  const pairs = line.trim().replace(/ ?npm start$/, '');
  return Object.fromEntries(pairs ? pairs.split(/\s+/).map((pair) => pair.split('=') as [string, string]) : []);
}

/** Runs terminal 3's script with bash (`set -eo pipefail`) in the repository; answers what it printed (or fails the test with it). */
export async function runTerminal(script: string, env: Record<string, string>, log: () => string): Promise<string> {
  const out = await new Promise<{ code: number | null; stdout: string; stderr: string }>((done) => {
    const bash = spawn('bash', ['-c', `set -eo pipefail\n${script}`], { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
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
  expect(out.code, `${out.stdout}\n${out.stderr}\n${log()}`).toBe(0);
  return out.stdout;
}

/** The comment lines of blocks that show an exact answer (`# …` without "…"): what must be printed. */
export const exactLines = (blocks: string[]) =>
  blocks
    .flatMap((b) => b.split('\n'))
    .filter((l) => l.startsWith('# ') && !l.includes('…'))
    .map((l) => l.slice(2));

export function useDocWalk(opts: DocWalkOptions): DocWalk {
  const blocks = walkBlocks(opts);
  let database: Awaited<ReturnType<typeof openTestDatabase>> | undefined;
  let dataDir: string;
  let server: Awaited<ReturnType<typeof startServer>>;
  let helperPid: number | undefined;
  let free: number[] = [];
  let env: Record<string, string> = {};
  const ported = (s: string) => opts.ports.reduce((acc, port, i) => acc.replace(new RegExp(`\\b${port}\\b`, 'g'), String(free[i])), s);

  beforeAll(async () => {
    expect(blocks).toHaveLength(opts.blocks);
    free = await Promise.all(opts.ports.map(() => freePort()));
    dataDir = mkdtempSync(join(tmpdir(), 'sb-doc-walk-'));
    if (testDbKind === 'postgres') database = await openTestDatabase();
    // On PostgreSQL a stored secret needs SECRETS_KEY (docs/configuration.md); the embedded database keeps a key in DATA_DIR.
    env = database ? { DATABASE_URL: database.url!, DATA_DIR: dataDir, SECRETS_KEY: randomBytes(32).toString('base64') } : { DATA_DIR: dataDir };

    // Terminal 1: `VAR=value … npm start`.
    server = await startServer({ ...env, ...startLineSettings(ported(blocks[0]!)) });

    // Terminal 2, in a process group of its own so that it can be stopped with its children.
    const helper = spawn('bash', ['-c', ported(blocks[1]!)], { cwd: root, detached: true, stdio: 'ignore' });
    helperPid = helper.pid;
    for (let i = 0; i < 200 && !(await listening(free.at(-1)!)); i++) await new Promise((r) => setTimeout(r, 100));
  }, 180_000);

  afterAll(async () => {
    if (helperPid) process.kill(-helperPid, 'SIGTERM');
    await server?.stop();
    await database?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  return {
    origin: () => server.origin,
    async run() {
      // The first walk's organization and key (README), through the command line as there.
      const org = await cli(['org', 'create', '--name', 'Acme'], env);
      const key = await cli(['apikey', 'create', '--org', org.json.id, '--name', 'demo'], env);
      expect(key.code, key.stderr).toBe(0);

      const stdout = await runTerminal(blocks.slice(2).map(ported).join('\n'), { ...env, BASE: server.origin, ORG: org.json.id, KEY: key.json.key }, server.log);
      const exact = exactLines(blocks.slice(2));
      // curl's answers end without a newline, so a line may follow one on the same line.
      for (const line of exact) expect(stdout, `${stdout}\n${server.log()}`).toContain(line);
      return { stdout, exact };
    },
  };
}
