import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';

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

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
