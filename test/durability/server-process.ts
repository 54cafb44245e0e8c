import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { createApiKey, createOrganization } from '../../src/accounts/accounts.js';
import { openDatabase, restorePglite } from '../../src/db/client.js';
import { pgliteTemplate, testDbKind } from '../helpers/database.js';
import { withDatabase } from '../helpers/postgres-setup.js';
import { entry } from '../helpers/cli.js';
import { freePort } from '../helpers/listen.js';
import { afterAll, afterEach, beforeAll } from 'vitest';

/**
 * The real server as a child process (`node dist/src/main.js`, as `npm start` runs it) on loopback, for the fault tests:
 * signals, kill -9, restarts. Each test file gets its own store (a temp DATA_DIR, or a fresh PostgreSQL
 * database when the suite runs on PostgreSQL) and cleans it up.
 */

const ROOT = resolve(import.meta.dirname, '../..');

export interface ServerProcess {
  proc: ChildProcess;
  pid: number;
  url: string;
  /** Resolves with the exit code and signal once the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output(): string;
}

export interface Store {
  kind: 'pglite' | 'postgres';
  dataDir: string;
  /** Environment that points a server at this store. */
  env: Record<string, string>;
  /** An organization with an all-permissions API key, created before any server runs. */
  key: string;
  destroy(): Promise<void>;
}

/**
 * The store of one test file: created before its tests (when `enabled`), destroyed after them; servers a
 * test started are killed after each test. The returned object is filled in by the hook.
 */
export function useStore(enabled = true): Store {
  const store = {} as Store;
  beforeAll(async () => {
    if (enabled) Object.assign(store, await createStore());
  }, 120_000);
  afterEach(killAll);
  afterAll(async () => store.destroy?.());
  return store;
}

/** A fresh store of the kind the suite runs on, with one organization and key in it. */
export async function createStore(): Promise<Store> {
  const dataDir = mkdtempSync(join(tmpdir(), 'sb-dur-'));
  let url: string | undefined;
  let dbName: string | undefined;
  if (testDbKind === 'postgres') {
    const admin = process.env.SB_TEST_PG_URL!;
    dbName = `sb_dur_${randomBytes(4).toString('hex')}`;
    const c = new pg.Client({ connectionString: admin });
    await c.connect();
    await c.query(`CREATE DATABASE ${dbName} TEMPLATE ${process.env.SB_TEST_PG_TEMPLATE!}`).finally(() => c.end());
    url = withDatabase(admin, dbName);
  }
  // The embedded database: the run's migrated template restored into the directory (as `switchboard restore`
  // does), then opened here before any server holds it, and closed (lock released).
  if (!url) await restorePglite(dataDir, pgliteTemplate());
  const database = await openDatabase(url ? { url, poolSize: 1 } : { dataDir });
  let key: string;
  try {
    await database.migrate();
    const org = await createOrganization(database.db, { name: 'Durability' });
    key = (await createApiKey(database.db, { orgId: org.id })).key;
  } finally {
    await database.close();
  }
  return {
    kind: testDbKind,
    dataDir,
    env: { DATA_DIR: dataDir, DATABASE_URL: url ?? '' },
    key,
    async destroy() {
      rmSync(dataDir, { recursive: true, force: true });
      if (dbName) {
        const c = new pg.Client({ connectionString: process.env.SB_TEST_PG_URL! });
        await c.connect();
        await c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).finally(() => c.end());
      }
    },
  };
}

/** Another organization with an all-permissions key in `store` (while no server holds it); answers the key. */
export async function addOrganization(store: Store, name: string): Promise<string> {
  const database = await openDatabase(store.env.DATABASE_URL ? { url: store.env.DATABASE_URL, poolSize: 1 } : { dataDir: store.dataDir });
  try {
    const org = await createOrganization(database.db, { name });
    return (await createApiKey(database.db, { orgId: org.id })).key;
  } finally {
    await database.close();
  }
}

const running = new Set<ChildProcess>();

/** Spawns the server; does not wait for it (see `waitReady`). */
export async function spawnServer(env: Record<string, string>): Promise<ServerProcess> {
  const port = await freePort();
  const proc = spawn(process.execPath, [entry.server], {
    cwd: ROOT,
    env: {
      ...process.env,
      PORT: String(port),
      HOST: '127.0.0.1',
      PUBLIC_URL: `http://127.0.0.1:${port}`,
      LOG_LEVEL: 'warn',
      REST_RATE_LIMIT: '0',
      API_KEY_CACHE_MS: '0',
      REDIS_URL: '',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(proc);
  let out = '';
  const keep = (chunk: Buffer) => {
    out = (out + chunk.toString()).slice(-8000);
  };
  proc.stdout!.on('data', keep);
  proc.stderr!.on('data', keep);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) =>
    proc.once('exit', (code, signal) => {
      running.delete(proc);
      res({ code, signal });
    }),
  );
  return { proc, pid: proc.pid!, url: `http://127.0.0.1:${port}`, exited, output: () => out };
}

/** Resolves once /healthz answers; rejects if the process exits first or `timeoutMs` passes. */
export async function waitReady(server: ServerProcess, timeoutMs = 60_000): Promise<ServerProcess> {
  const deadline = Date.now() + timeoutMs;
  let gone = false;
  void server.exited.then(() => (gone = true));
  while (Date.now() < deadline) {
    if (gone) throw new Error(`server exited before it was ready:\n${server.output()}`);
    try {
      const res = await fetch(`${server.url}/healthz`, { signal: AbortSignal.timeout(1000) });
      if (res.ok) return server;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`server not ready after ${timeoutMs} ms:\n${server.output()}`);
}

export const startServer = async (env: Record<string, string>) => waitReady(await spawnServer(env));

/** SIGKILLs every server a test left running (afterEach), so no test outlives its file. */
export async function killAll() {
  const waits = [...running].map((p) => new Promise<void>((r) => (p.exitCode !== null || p.signalCode !== null ? r() : (p.once('exit', () => r()), p.kill('SIGKILL')))));
  await Promise.all(waits);
}

export interface HttpResult {
  status: number;
  body: string;
}

/** A JSON request over a fresh connection (no keep-alive, so a dying server cannot leave it half-used). */
export function send(url: string, method: string, path: string, key: string, body?: unknown): Promise<HttpResult> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((res, rej) => {
    const req = httpRequest(
      `${url}${path}`,
      {
        method,
        agent: false,
        headers: { authorization: `Bearer ${key}`, connection: 'close', ...(payload ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}) },
        timeout: 20_000,
      },
      (response) => {
        let data = '';
        response.setEncoding('utf8');
        response.on('data', (c: string) => (data += c));
        response.on('end', () => res({ status: response.statusCode ?? 0, body: data }));
        response.on('error', rej);
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', rej);
    req.end(payload);
  });
}

/**
 * `send`, asked again once a second (as a client honouring `Retry-After` would) while the server answers 503:
 * a read answers 503 when the database has not answered within `DB_READ_TIMEOUT_MS`, which a server that has
 * just started can miss on a loaded machine.
 */
export async function sendUntilServed(url: string, method: string, path: string, key: string, tries = 10): Promise<HttpResult> {
  let got = await send(url, method, path, key);
  for (let i = 0; got.status === 503 && i < tries; i++) {
    await new Promise((r) => setTimeout(r, 1000));
    got = await send(url, method, path, key);
  }
  return got;
}

/**
 * The longest time between two /healthz answers while `work` runs, probing every 20 ms; and the longest this
 * process itself was held from running (`ownLagMs`): on a busy machine the prober is delayed too, and a
 * gap it caused is not the server's.
 */
export async function probeWhile(server: ServerProcess, work: () => Promise<void>): Promise<{ probes: number; maxGapMs: number; ownLagMs: number }> {
  const lag = monitorEventLoopDelay({ resolution: 10 });
  lag.enable();
  let probing = true;
  let last = performance.now();
  let maxGapMs = 0;
  let probes = 0;
  const probe = (async () => {
    while (probing) {
      try {
        const res = await fetch(`${server.url}/healthz`, { signal: AbortSignal.timeout(30_000) });
        await res.text();
      } catch {
        // A refused or timed-out probe is a gap that goes on until the next answer.
        continue;
      }
      const now = performance.now();
      maxGapMs = Math.max(maxGapMs, now - last);
      last = now;
      probes++;
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  try {
    await work();
  } finally {
    probing = false;
    await probe;
    lag.disable();
  }
  return { probes, maxGapMs, ownLagMs: lag.max / 1e6 };
}

