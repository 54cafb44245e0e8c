import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/** Child processes of a bench run (the service, the baseline server): started, awaited, measured, stopped. */

export interface Child {
  name: string;
  proc: ChildProcess;
  port: number;
  url: string;
  /** The last lines the process wrote, for error messages. */
  output(): string;
}


export async function startChild(name: string, args: string[], env: Record<string, string>, port: number, readyPath = '/healthz', timeoutMs = 60_000): Promise<Child> {
  const proc = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const keep = (chunk: Buffer) => {
    lines.push(...chunk.toString().split('\n').filter(Boolean));
    if (lines.length > 40) lines.splice(0, lines.length - 40);
  };
  proc.stdout!.on('data', keep);
  proc.stderr!.on('data', keep);
  const child: Child = { name, proc, port, url: `http://127.0.0.1:${port}`, output: () => lines.join('\n') };
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) throw new Error(`${name} exited with code ${proc.exitCode}:\n${child.output()}`);
    try {
      const res = await fetch(child.url + readyPath, { signal: AbortSignal.timeout(1000) });
      if (res.ok) return child;
    } catch {
      // not listening yet
    }
    await sleep(200);
  }
  await stopChild(child);
  throw new Error(`${name} did not answer ${readyPath} within ${timeoutMs} ms:\n${child.output()}`);
}

/** SIGTERM, then SIGKILL if it has not exited after `graceMs`. */
export async function stopChild(child: Child | undefined, graceMs = 10_000) {
  if (!child || child.proc.exitCode !== null || child.proc.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.proc.once('exit', () => resolve()));
  child.proc.kill('SIGTERM');
  const timer = setTimeout(() => child.proc.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** Resident set size of a process in bytes (Linux /proc), or undefined where that is not available. */
export function rssBytes(pid: number | undefined): number | undefined {
  if (!pid) return undefined;
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
    return kb ? Number(kb[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** Samples a process's RSS every `everyMs` until stopped; reports the peak. */
export function rssSampler(pid: number | undefined, everyMs = 200) {
  let peak = 0;
  const take = () => {
    const rss = rssBytes(pid);
    if (rss !== undefined && rss > peak) peak = rss;
  };
  take();
  const timer = setInterval(take, everyMs);
  timer.unref();
  return {
    peak: () => peak,
    stop() {
      clearInterval(timer);
      take();
      return peak;
    },
  };
}

/** User + system CPU time of a process in ms (Linux /proc; clock ticks of 10 ms, the kernel's USER_HZ), or undefined. */
function processCpuMs(pid: number | string): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return undefined;
  }
}

/**
 * CPU time (ms) of the server process, and of every PostgreSQL process of the machine (the bench's database
 * is the only one under load): taken before and after a measurement, the split of a request's cost between
 * the server and the database. Undefined where /proc is not available.
 */
export function cpuTimes(serverPid: number | undefined): { server: number; database: Map<string, number> } | undefined {
  const server = serverPid ? processCpuMs(serverPid) : undefined;
  if (server === undefined) return undefined;
  const database = new Map<string, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() !== 'postgres') continue;
      const ms = processCpuMs(entry);
      if (ms !== undefined) database.set(entry, ms);
    } catch {
      // the process ended meanwhile
    }
  }
  return { server, database };
}

/**
 * The CPU (ms) spent between two `cpuTimes`: the server's, and PostgreSQL's summed per process (a backend
 * started meanwhile counts from zero; one that ended meanwhile is left out, so the figure is never negative).
 */
export function cpuSpent(before: NonNullable<ReturnType<typeof cpuTimes>>, after: NonNullable<ReturnType<typeof cpuTimes>>) {
  let database = 0;
  for (const [pid, ms] of after.database) database += ms - (before.database.get(pid) ?? 0);
  return { server: after.server - before.server, database };
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
