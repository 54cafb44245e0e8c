import autocannon, { type RequestSpec, type Result } from 'autocannon';
import { cpuSpent, cpuTimes } from './processes.js';

/** One load measurement with autocannon: loopback only, a fixed number of connections, a bounded duration. */

export interface LoadOptions {
  connections: number;
  /** Seconds measured. */
  duration: number;
  /** Seconds of unrecorded load first, so the JIT, the pools and the caches are warm. */
  warmup: number;
}

export interface Measurement {
  reqPerSec: number;
  /** Milliseconds. */
  p50: number;
  /** From every answer's time (autocannon's histogram reports no 95th percentile). */
  p95?: number;
  p99: number;
  mean: number;
  requests: number;
  /** Responses outside 2xx, and connection errors/timeouts: a scenario with any is not a valid measurement. */
  non2xx: number;
  errors: number;
  statusCodes: Record<string, number>;
  /** Peak RSS of the service during the measurement, when it was sampled. */
  rssPeakBytes?: number;
  /** CPU time per request (ms) of the server process and of PostgreSQL during the measured seconds (Linux). */
  cpuPerRequest?: { server: number; database: number };
}

export interface Load {
  /** Origin, e.g. http://127.0.0.1:3000 (only loopback addresses are accepted). */
  origin: string;
  headers?: Record<string, string>;
  /** Requests sent in turn by every connection. */
  requests: RequestSpec[];
}

const perRequest = (spent: { server: number; database: number }, requests: number) => ({ server: spent.server / requests, database: spent.database / requests });

export async function measure(load: Load, opts: LoadOptions, serverPid?: number): Promise<Measurement> {
  const { hostname } = new URL(load.origin);
  if (hostname !== '127.0.0.1' && hostname !== 'localhost' && hostname !== '[::1]') throw new Error(`The bench only loads loopback addresses, not ${hostname}`);
  const base = { url: load.origin, connections: opts.connections, timeout: 10, headers: load.headers ?? {}, requests: load.requests };
  if (opts.warmup > 0) await autocannon({ ...base, duration: opts.warmup });
  const before = cpuTimes(serverPid);
  const times: number[] = [];
  const r = await new Promise<Result>((resolve, reject) => {
    autocannon({ ...base, duration: opts.duration }, (err, result) => (err ? reject(err) : resolve(result))).on('response', (_c, _s, _b, ms) => times.push(ms));
  });
  const after = cpuTimes(serverPid);
  times.sort((x, y) => x - y);
  const statusCodes = Object.fromEntries(Object.entries(r.statusCodeStats ?? {}).map(([code, s]) => [code, s.count]));
  return {
    reqPerSec: r.requests.average,
    p50: r.latency.p50,
    p95: times.length ? Math.round(times[Math.min(times.length - 1, Math.floor(times.length * 0.95))]! * 10) / 10 : r.latency.p99,
    p99: r.latency.p99,
    mean: r.latency.mean,
    requests: r.requests.total,
    non2xx: r.non2xx,
    errors: r.errors + r.timeouts,
    statusCodes,
    ...(before && after && r.requests.total > 0 ? { cpuPerRequest: perRequest(cpuSpent(before, after), r.requests.total) } : {}),
  };
}

/** One request through fetch, to check a scenario answers what it should before it is loaded. */
export async function probe(origin: string, spec: RequestSpec, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  try {
    const res = await fetch(origin + (spec.path ?? '/'), {
      method: spec.method ?? 'GET',
      headers: { ...headers, ...spec.headers },
      ...(spec.body !== undefined ? { body: spec.body } : {}),
      signal: AbortSignal.timeout(10_000),
    });
    return { status: res.status, body: await res.text() };
  } catch (err) {
    return { status: 0, body: err instanceof Error ? err.message : String(err) };
  }
}
