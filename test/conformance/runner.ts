import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The server scenarios of `@modelcontextprotocol/conformance` that apply to a product server: the rest
 * need the conformance suite's own test tools, prompts and resources (`test_simple_text`, ...).
 */
export const SCENARIOS = ['server-initialize', 'ping', 'tools-list', 'dns-rebinding-protection'] as const;

export interface Check {
  id: string;
  status: 'SUCCESS' | 'FAILURE' | 'WARNING' | 'INFO' | string;
  errorMessage?: string;
}

export interface ScenarioResult {
  scenario: string;
  exitCode: number;
  checks: Check[];
  output: string;
}

const shim = fileURLToPath(new URL('./node20-shim.mjs', import.meta.url));
const cli = createRequire(import.meta.url).resolve('@modelcontextprotocol/conformance/package.json').replace(/package\.json$/, 'dist/index.js');

/**
 * The conformance runner cannot send an Authorization header: this proxy adds the bearer token and
 * forwards everything else untouched, Host and Origin included (the DNS-rebinding scenario sends
 * hostile ones and must see them refused by the server itself).
 */
export async function startTokenProxy(target: string, token: string): Promise<{ url: string; close: () => Promise<void> }> {
  const upstream = new URL(target);
  const server: Server = createServer((req, res) => {
    const forwarded = httpRequest(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: { ...req.headers, authorization: `Bearer ${token}` } },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    forwarded.on('error', () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    req.pipe(forwarded);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    // `localhost`, as a local user's client would name it: the server must accept loopback Host/Origin values.
    url: `http://localhost:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function runCli(args: string[], cwd: string): Promise<{ exitCode: number; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', shim, cli, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ exitCode: code ?? 1, output }));
  });
}

async function readChecks(dir: string): Promise<Check[]> {
  const checks: Check[] = [];
  for (const entry of await readdir(dir, { recursive: true })) {
    if (entry.endsWith('checks.json')) checks.push(...(JSON.parse(await readFile(join(dir, entry), 'utf8')) as Check[]));
  }
  return checks;
}

/** Runs each scenario against `<origin>/mcp` through the token proxy; results go to a temporary directory. */
export async function runConformance(origin: string, token: string, scenarios: readonly string[] = SCENARIOS): Promise<ScenarioResult[]> {
  const proxy = await startTokenProxy(origin, token);
  const results: ScenarioResult[] = [];
  try {
    for (const scenario of scenarios) {
      const cwd = await mkdtemp(join(tmpdir(), 'sb-conformance-'));
      try {
        const { exitCode, output } = await runCli(['server', '--url', `${proxy.url}/mcp`, '--scenario', scenario, '--output-dir', cwd], cwd);
        results.push({ scenario, exitCode, checks: await readChecks(cwd), output });
      } finally {
        await rm(cwd, { recursive: true, force: true });
      }
    }
  } finally {
    await proxy.close();
  }
  return results;
}

/** A scenario passes when the runner exits 0, reports checks, and none of them failed. */
export const passed = (r: ScenarioResult) => r.exitCode === 0 && r.checks.length > 0 && r.checks.every((c) => c.status !== 'FAILURE');
