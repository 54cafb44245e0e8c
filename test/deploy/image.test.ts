import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { packagePath } from '../../src/core/paths.js';
import { freePort } from '../helpers/listen.js';

/**
 * The Dockerfile's steps, run where no container engine is (docs/deploy.md, "What is tested"): each stage in
 * a clean directory of its own standing for the image's file system, every COPY (from the repository or an
 * earlier stage) and RUN of both stages in order, then CMD with the image's ENV. The service that starts from
 * them must answer, with its embedded database in the image's data directory. An instruction this runner does
 * not know fails the test, so the Dockerfile cannot grow a step that is not run here.
 *
 * What it cannot run: the base image (the host's Node 20 and npm stand in for node:20-bookworm-slim), its
 * `node` user (`USER`, `--chown`), `VOLUME`, `EXPOSE` and `HEALTHCHECK`. RUN steps must not use absolute paths
 * (a test below holds it): the paths of WORKDIR, COPY and ENV are mapped into the stage's directory, a
 * shell's are not. Slow: `npm ci` and `npm prune` as in a real build (a minute or two).
 */

interface Instruction {
  op: string;
  args: string;
  line: number;
}

/** The Dockerfile's instructions (continuation lines joined, comments dropped). */
function instructions(text: string): Instruction[] {
  const out: Instruction[] = [];
  let pending = '';
  let start = 0;
  text.split('\n').forEach((raw, i) => {
    if (!pending && (raw.trim() === '' || raw.trimStart().startsWith('#'))) return;
    if (!pending) start = i + 1;
    pending += raw.replace(/\\$/, ' ');
    if (raw.endsWith('\\')) return;
    const m = /^\s*([A-Z]+)\s+(.*)$/.exec(pending)!;
    out.push({ op: m[1]!, args: m[2]!.trim(), line: start });
    pending = '';
  });
  return out;
}

interface Stage {
  name: string;
  root: string;
  workdir: string;
  env: Record<string, string>;
}

const dockerfile = readFileSync(packagePath('Dockerfile'), 'utf8');
const work = mkdtempSync(join(tmpdir(), 'sb-image-'));
let server: ChildProcess | undefined;
afterAll(async () => {
  if (server && server.exitCode === null) {
    const exited = new Promise((r) => server!.once('exit', r));
    server.kill('SIGTERM');
    await exited;
  }
  rmSync(work, { recursive: true, force: true });
});

/** Runs the Dockerfile; answers the last stage and its CMD. */
function build(): { stage: Stage; cmd: string[] } {
  const stages: Stage[] = [];
  let stage: Stage | undefined;
  let cmd: string[] | undefined;
  const inStage = (s: Stage, path: string) => join(s.root, path.startsWith('/') ? path : join(s.workdir, path));
  for (const { op, args, line } of instructions(dockerfile)) {
    const at = `Dockerfile:${line} ${op}`;
    if (op === 'FROM') {
      const [, name] = /\bAS\s+(\S+)$/i.exec(args) ?? [];
      stage = { name: name ?? String(stages.length), root: join(work, `stage-${stages.length}`), workdir: '/', env: {} };
      mkdirSync(stage.root);
      stages.push(stage);
      continue;
    }
    if (!stage) throw new Error(`${at}: before FROM`);
    if (op === 'WORKDIR') {
      expect(args, at).toMatch(/^\//);
      stage.workdir = args;
      mkdirSync(join(stage.root, args), { recursive: true });
    } else if (op === 'ENV') {
      for (const m of args.matchAll(/([A-Z_]+)=(\S+)/g)) stage.env[m[1]!] = m[2]!;
    } else if (op === 'COPY') {
      const words = args.split(/\s+/);
      const flags = words.filter((w) => w.startsWith('--'));
      const paths = words.filter((w) => !w.startsWith('--'));
      const from = flags.find((f) => f.startsWith('--from='))?.slice('--from='.length);
      const source = from ? stages.find((s) => s.name === from) : undefined;
      if (from && !source) throw new Error(`${at}: no stage "${from}"`);
      const dest = paths.pop()!;
      for (const src of paths) {
        const origin = source ? join(source.root, src) : packagePath(src);
        expect(existsSync(origin), `${at}: ${src}`).toBe(true);
        // A directory's content goes into dest; a file goes into dest/ when dest ends with "/".
        const target = statSync(origin).isDirectory() || !dest.endsWith('/') ? inStage(stage, dest) : join(inStage(stage, dest), basename(src));
        mkdirSync(statSync(origin).isDirectory() ? target : join(target, '..'), { recursive: true });
        // Hard links between stages (node_modules is large); copies from the repository.
        execFileSync('cp', [source ? '-al' : '-a', statSync(origin).isDirectory() ? `${origin}/.` : origin, target]);
      }
    } else if (op === 'RUN') {
      expect(args, `${at}: a RUN step with an absolute path`).not.toMatch(/(^|[\s=])\/[a-z]/);
      const r = spawnSync('sh', ['-c', args], {
        cwd: inStage(stage, '.'),
        // The host's npm takes the image's part; its cache makes the install quicker, not different.
        env: { PATH: process.env.PATH!, HOME: process.env.HOME!, npm_config_prefer_offline: 'true', npm_config_update_notifier: 'false', ...stage.env },
        encoding: 'utf8',
        timeout: 600_000,
      });
      expect(r.status, `${at}: ${args}\n${r.stdout}\n${r.stderr}`).toBe(0);
    } else if (op === 'CMD') {
      cmd = JSON.parse(args) as string[];
    } else if (!['USER', 'VOLUME', 'EXPOSE', 'HEALTHCHECK', 'LABEL'].includes(op)) {
      throw new Error(`${at}: an instruction this runner does not know; teach it, so the step is run here too`);
    }
  }
  expect(cmd, 'the Dockerfile ends with a CMD').toBeDefined();
  return { stage: stage!, cmd: cmd! };
}

describe('Dockerfile', () => {
  it('builds in a clean directory with its own steps, and the service starts from them and answers', async () => {
    const { stage, cmd } = build();
    const app = join(stage.root, stage.workdir);
    // Only what runs is in the image: no sources, no development dependencies.
    expect(existsSync(join(app, 'dist/src/main.js'))).toBe(true);
    expect(existsSync(join(app, 'src'))).toBe(false);
    expect(existsSync(join(app, 'node_modules/vitest'))).toBe(false);
    expect(existsSync(join(app, 'node_modules/@electric-sql/pglite'))).toBe(true);
    expect(statSync(join(app, 'data')).mode & 0o777).toBe(0o700);

    // CMD with the image's ENV (its paths in the stage's directory), on a free loopback port.
    const port = await freePort();
    const env: Record<string, string> = { PATH: process.env.PATH!, HOME: process.env.HOME! };
    for (const [k, v] of Object.entries(stage.env)) env[k] = v.startsWith('/') ? join(stage.root, v) : v;
    expect(stage.env).toMatchObject({ HOST: '0.0.0.0', PORT: '3000', DATA_DIR: '/app/data' });
    Object.assign(env, { HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'warn' });
    let log = '';
    server = spawn(cmd[0]!, cmd.slice(1), { cwd: app, env, stdio: ['ignore', 'pipe', 'pipe'] });
    server.stdout!.on('data', (d) => (log += d));
    server.stderr!.on('data', (d) => (log += d));
    const origin = `http://127.0.0.1:${port}`;
    const until = Date.now() + 120_000;
    for (;;) {
      const ready = await fetch(`${origin}/readyz`).then((r) => r.json() as Promise<{ status: string; database: string }>, () => undefined);
      if (ready?.status === 'ok') {
        expect(ready.database).toBe('pglite');
        break;
      }
      if (server.exitCode !== null || Date.now() > until) throw new Error(`the service did not start from the image's steps:\n${log}`);
      await new Promise((r) => setTimeout(r, 250));
    }
    expect((await fetch(`${origin}/v1/openapi.json`)).status).toBe(200);
    // The image's command line, handed to the running service.
    const org = spawnSync('node', ['bin/switchboard.js', 'org', 'create', '--name', 'Image'], { cwd: app, env, encoding: 'utf8' });
    expect(org.status, org.stderr).toBe(0);
    expect(existsSync(join(app, 'data/pgdata/PG_VERSION'))).toBe(true);
  }, 900_000);
});
