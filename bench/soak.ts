/**
 * `npm run soak [-- --duration S] [--postgres]`: a bounded soak of the real server (from source, on
 * loopback): mixed REST and MCP traffic from 16 concurrent clients, 1% of it hostile (malformed JSON,
 * prototype keys, bad ids, wrong keys, oversized headers). Prints requests, answers by status, the 5xx
 * count (must be 0) and the server's RSS at start and end; exits 1 on any 5xx or connection error.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { openDatabase } from '../src/db/client.js';
import { freePort } from '../test/helpers/listen.js';
import { createDatabase, dropDatabase } from './databases.js';
import { rssBytes, startChild, stopChild } from './processes.js';
import { createMcpTokens, createTenant } from './seed.js';

const { values: args } = parseArgs({ options: { duration: { type: 'string', default: '120' }, postgres: { type: 'boolean', default: false } } });
const ROOT = resolve(import.meta.dirname, '..');
const durationMs = Number(args.duration) * 1000;
const adminUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

const dataDir = mkdtempSync(join(tmpdir(), 'sb-soak-'));
const dbName = `sb_soak_${process.pid}`;
const databaseUrl = args.postgres ? await createDatabase(adminUrl, dbName) : undefined;
const seedDb = await openDatabase(databaseUrl ? { url: databaseUrl, poolSize: 2 } : { dataDir });
await seedDb.migrate();
const port = await freePort();
const origin = `http://127.0.0.1:${port}`;
const tenant = await createTenant(seedDb.db, 'Soak');
const tokens = await createMcpTokens(seedDb.db, tenant.orgId, `${origin}/mcp`, 64);
await seedDb.close();

const server = await startChild(
  'service',
  ['--import', 'tsx', join(ROOT, 'src/main.ts')],
  { PORT: String(port), HOST: '127.0.0.1', PUBLIC_URL: origin, LOG_LEVEL: 'warn', REST_RATE_LIMIT: '0', MCP_RATE_LIMIT: '0', DATA_DIR: dataDir, DATABASE_URL: databaseUrl ?? '' },
  port,
  '/readyz',
  120_000,
);
const rssStart = rssBytes(server.proc.pid) ?? 0;

const statuses: Record<string, number> = {};
let requests = 0;
let failures = 0;
const auth = { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json' };
const ids: string[] = [];
const pick = <T>(list: T[]) => list[Math.floor(Math.random() * list.length)]!;

type Call = { path: string; method?: string; headers?: Record<string, string>; body?: string };
const normal: (() => Call)[] = [
  () => ({ method: 'POST', path: '/v1/contacts', body: JSON.stringify({ name: `Soak ${requests}`, data: { n: requests } }) }),
  () => ({ path: ids.length ? `/v1/contacts/${pick(ids)}` : '/v1/contacts' }),
  () => ({ path: '/v1/contacts?limit=20' }),
  () => ({ method: 'POST', path: '/v1/messages', body: JSON.stringify({ direction: 'incoming', type: 'email', text: 'Thanks for the quote, see you Monday' }) }),
  () => ({ path: `/v1/messages/search?q=${pick(['thanks', 'quote', 'zeppelin'])}` }),
  () => ({ path: '/v1/events?limit=10' }),
  () => ({
    method: 'POST',
    path: '/mcp',
    headers: { authorization: `Bearer ${pick(tokens)}`, accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'contacts_read', arguments: { method: 'list', limit: 5 } } }),
  }),
];
const hostile: (() => Call)[] = [
  () => ({ method: 'POST', path: '/v1/contacts', body: '{"name":' }),
  () => ({ method: 'POST', path: '/v1/contacts', body: '{"name":"x","__proto__":{"admin":true}}' }),
  () => ({ path: '/v1/contacts/not-a-uuid' }),
  () => ({ path: '/v1/contacts', headers: { authorization: 'Bearer wrong' } }),
  () => ({ path: '/v1/contacts', headers: { 'x-filler': 'a'.repeat(9000) } }),
  () => ({ method: 'POST', path: '/v1/messages', body: JSON.stringify({ direction: 'sideways', type: 'x'.repeat(300) }) }),
];

async function worker(until: number) {
  while (Date.now() < until) {
    const call = (Math.random() < 0.01 ? pick(hostile) : pick(normal))();
    requests++;
    try {
      const res = await fetch(`${origin}${call.path}`, { method: call.method ?? 'GET', headers: { ...auth, ...call.headers }, ...(call.body ? { body: call.body } : {}) });
      const text = await res.text();
      statuses[res.status] = (statuses[res.status] ?? 0) + 1;
      if (res.status === 201 && call.path === '/v1/contacts' && ids.length < 500) ids.push((JSON.parse(text) as { data: { id: string } }).data.id);
    } catch {
      failures++;
    }
  }
}

const started = Date.now();
await Promise.all(Array.from({ length: 16 }, () => worker(started + durationMs)));
const rssEnd = rssBytes(server.proc.pid) ?? 0;
await stopChild(server);
rmSync(dataDir, { recursive: true, force: true });
if (databaseUrl) await dropDatabase(adminUrl, dbName);

const fivexx = Object.entries(statuses).filter(([s]) => Number(s) >= 500).reduce((n, [, c]) => n + c, 0);
const mb = (b: number) => `${Math.round(b / 1048576)} MiB`;
process.stdout.write(
  `${JSON.stringify({ database: databaseUrl ? 'postgres' : 'embedded', seconds: durationMs / 1000, requests, statuses, fivexx, connectionErrors: failures, rssStart: mb(rssStart), rssEnd: mb(rssEnd) }, null, 2)}\n`,
);
process.exit(fivexx > 0 || failures > 0 ? 1 : 0);
