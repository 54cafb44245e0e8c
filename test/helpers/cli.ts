import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from './listen.js';

/**
 * The real command line and server entry, spawned as a user runs them: from the compiled output in dist/
 * (`bin/switchboard.js`, `npm start`), which test/helpers/global-setup.ts builds once per run when the
 * sources are newer. Starting from JavaScript spares every spawn the TypeScript loader's start-up.
 */

export const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** What `switchboard` (bin/switchboard.js) and `npm start` run. */
export const entry = { cli: join(root, 'dist/src/cli.js'), server: join(root, 'dist/src/main.js') };

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  json: any;
}

export function baseEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: 'warn', ...extra };
  if (!extra.DATABASE_URL) delete env.DATABASE_URL;
  return env;
}

/** `switchboard ARGS` with the environment `env`; resolves when it exits. */
export function cli(args: string[], env: Record<string, string>): Promise<CliResult> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [entry.cli, ...args], { cwd: root, env: baseEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', fail);
    child.on('close', (code) => {
      let json: unknown;
      try {
        json = JSON.parse(stdout);
      } catch {
        json = undefined;
      }
      done({ code, stdout, stderr, json });
    });
  });
}

/** `npm start`'s entry with `env`, not waited for: its stderr is collected in `log()`. */
export function spawnServer(env: Record<string, string>) {
  const child = spawn(process.execPath, [entry.server], { cwd: root, env: baseEnv(env), stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr!.on('data', (d) => (log += d));
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  return { child, log: () => log, exited };
}

/** `npm start`'s entry on its own port; resolves once /healthz answers. */
export async function startServer(env: Record<string, string>) {
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const { child, log } = spawnServer({ PORT: String(port), HOST: '127.0.0.1', PUBLIC_URL: origin, ...env });
  const until = Date.now() + 90_000;
  for (;;) {
    try {
      if ((await fetch(`${origin}/healthz`)).ok) break;
    } catch {
      /* not up yet */
    }
    if (child.exitCode !== null || Date.now() > until) throw new Error(`server did not start: ${log()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  const rest = (path: string, key: string) => fetch(`${origin}/v1${path}`, { headers: { authorization: `Bearer ${key}` } });
  return { child, origin, port, rest, log, stop: () => stopServer(child) };
}

export function stopServer(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((done) => {
    child.once('exit', (code) => done(code));
    child.kill('SIGTERM');
  });
}
