import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Measurement } from './measure.js';

/** One line of the bench table. */
export interface Row {
  /** `postgres` or `pglite`. */
  database: string;
  scenario: string;
  /** measured; unavailable (the endpoint does not answer yet); invalid (errors or non-2xx under load). */
  status: 'measured' | 'unavailable' | 'invalid';
  measurement?: Measurement;
  /** e.g. 0.84 = 0.84x of `ratioOf`, or a latency ratio. */
  ratio?: number;
  ratioOf?: string;
  /**
   * The server's CPU time per request ÷ that of the row's baseline (`ratioOf`), in the same run: 1.3 = the
   * service spends 1.3x the baseline's CPU on one request. Robust to the load other work puts on the machine.
   */
  cpuRatio?: number;
  /** The minimum ratio of a throughput target, for the chart. */
  targetRatio?: number;
  /** Human-readable target, e.g. ">= 0.8x lean, p99 < 25 ms". */
  target?: string;
  /** undefined = informational row (no target). */
  pass?: boolean;
  note?: string;
  /** Peak server RSS for the RSS row, bytes. */
  rssBytes?: number;
}

const fmt = (n: number | undefined, digits = 1) => (n === undefined || Number.isNaN(n) ? '' : n.toFixed(digits));

export function printTable(rows: Row[], out: (line: string) => void = (l) => process.stdout.write(`${l}\n`)) {
  const header = ['db', 'scenario', 'req/s', 'p50 ms', 'p99 ms', 'CPU ms', 'ratio', 'CPU ratio', 'target', 'result'];
  const body = rows.map((r) => {
    const m = r.measurement;
    const result = r.status === 'unavailable' ? 'unavailable' : r.status === 'invalid' ? 'INVALID' : r.pass === undefined ? '-' : r.pass ? 'pass' : 'FAIL';
    const rps = r.rssBytes !== undefined ? `${fmt(r.rssBytes / 1024 / 1024, 0)} MB` : m ? fmt(m.reqPerSec, 0) : '';
    const ratio = r.ratio === undefined ? '' : `${fmt(r.ratio, 2)}x${r.ratioOf ? ` ${r.ratioOf}` : ''}`;
    // The server process's CPU per request (ms), and its ratio to the baseline's.
    const cpu = m?.cpuPerRequest ? fmt(m.cpuPerRequest.server, 3) : '';
    const cpuRatio = r.cpuRatio === undefined ? '' : `${fmt(r.cpuRatio, 2)}x`;
    return [r.database, r.scenario, rps, fmt(m?.p50), fmt(m?.p99), cpu, ratio, cpuRatio, r.target ?? '', result];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((b) => b[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i >= 2 && i <= 5 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ');
  out(line(header));
  out(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const b of body) out(line(b));
  const notes = rows.filter((r) => r.note);
  if (notes.length) {
    out('');
    for (const r of notes) out(`* ${r.database} ${r.scenario}: ${r.note}`);
  }
}

export function writeJson(path: string, report: unknown) {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `${JSON.stringify(report, null, 2)}\n`);
}
