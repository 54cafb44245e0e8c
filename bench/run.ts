/**
 * `npm run bench`: builds the service, starts it on a fresh PostgreSQL database (and, with --pglite, on the
 * embedded database), seeds it with the shared seeder, loads it with autocannon and reports each scenario as
 * a ratio of baselines measured in the same run. See bench/README.md.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { RequestSpec } from 'autocannon';
import { openDatabase } from '../src/db/client.js';
import { randomBytes } from 'node:crypto';
import { automationLatency } from './automation-latency.js';
import { imapSyncTime, smtpReceiveThroughput } from './email.js';
import { apiCounter, sqlCounter, type MessageCounter } from './channels.js';
import { smppReceiptThroughput, smsSendThroughput, smsWebhookThroughput } from './sms.js';
import { whatsappSendThroughput, whatsappWebhookThroughput } from './whatsapp.js';
import { writeChart } from './chart.js';
import { webhookThroughput } from './webhooks.js';
import { seedThreads, threadRows } from './threads.js';
import { createDatabase, dropDatabase, openSeedConnection } from './databases.js';
import { measure, probe, type Load, type LoadOptions, type Measurement } from './measure.js';
import { freePort } from '../test/helpers/listen.js';
import { rssBytes, rssSampler, startChild, stopChild, type Child } from './processes.js';
import { printTable, writeJson, type Row } from './report.js';
import { createMcpTokens, createTenant, sampleMessageIds, seedContacts, seedMessages, settleWrites, vacuumAnalyze, WORDS, type Tenant } from './seed.js';

const ROOT = resolve(import.meta.dirname, '..');
const RESULTS = join(ROOT, 'bench', 'results', 'latest.json');
const CHART = join(ROOT, 'bench', 'results', 'latest.svg');

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    pglite: { type: 'boolean', default: false },
    'no-build': { type: 'boolean', default: false },
    'keep-db': { type: 'boolean', default: false },
    strict: { type: 'boolean', default: false },
    messages: { type: 'string' },
    email: { type: 'boolean', default: false },
    sms: { type: 'boolean', default: false },
    threads: { type: 'boolean', default: false },
    'smtp-messages': { type: 'string' },
    'imap-messages': { type: 'string' },
    duration: { type: 'string' },
    only: { type: 'string' },
    profile: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});

if (args.help) {
  process.stdout.write(`npm run bench [-- options]
  --quick        small data, 2 s per scenario (a smoke run)
  --pglite       also measure the embedded database (informational)
  --messages N   size of the large message set (default 1000000; quick 50000)
  --email        only the email rows (SMTP receiving, IMAP sync), on PostgreSQL
  --sms          only the text-message and WhatsApp rows (signed webhooks, messages sent, each with its baseline; SMPP receipts), on PostgreSQL
                 (with --pglite: also on the embedded database)
  --threads      only the conversation rows (a member's open threads at 100k threads; the incoming write with its thread kept), on PostgreSQL
  --smtp-messages N, --imap-messages N   their sizes (default 1000 and 10000; quick 200 and 1000)
  --duration S   seconds measured per scenario (default 5; quick 2)
  --only writes  only the write rows (with their lean baselines) and the RSS peak: a short run
  --only reads   only the contact reads (get, page of 10, MCP get, with their baselines) and the RSS peak
  --profile DIR  write a CPU profile of the service (node --cpu-prof) into DIR when it stops
  --no-build     measure dist/ as it is
  --keep-db      keep the PostgreSQL bench database afterwards
  --strict       exit 1 when a target is missed
Environment: BENCH_DATABASE_URL (admin URL; default postgres://postgres@127.0.0.1:5432/postgres),
  BENCH_SERVICE_NODE_ARGS (Node options of the service only, space-separated; default: those of npm start)
`);
  process.exit(0);
}

const profile = {
  duration: Number(args.duration ?? (args.quick ? 2 : 5)),
  warmup: args.quick ? 0.5 : 1,
  connections: 50,
  contacts: args.quick ? 1_000 : 10_000,
  smallMessages: 10_000,
  largeMessages: Number(args.messages ?? (args.quick ? 50_000 : 1_000_000)),
  // The transport allows 100 requests a minute per (user, client); see createMcpTokens. At least this many
  // pairs, more when the REST read runs so fast that a pair would reach the limit (see mcpClientsFor).
  mcpClients: args.quick ? 100 : 300,
  smtpMessages: Number(args['smtp-messages'] ?? (args.quick ? 200 : 1000)),
  imapMessages: Number(args['imap-messages'] ?? (args.quick ? 1000 : 10_000)),
  threads: 100_000,
};
if (args.only !== undefined && args.only !== 'writes' && args.only !== 'reads') {
  process.stderr.write(`--only: unknown group "${args.only}" (known: writes, reads)\n`);
  process.exit(2);
}
const onlyWrites = args.only === 'writes';
const onlyReads = args.only === 'reads';
const loadOpts: LoadOptions = { connections: profile.connections, duration: profile.duration, warmup: profile.warmup };
/**
 * The service runs with the Node options of `npm start` (its memory defaults), or with
 * BENCH_SERVICE_NODE_ARGS (space-separated) to compare other settings.
 */
const startScript = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start;
const serviceNodeArgs = (process.env.BENCH_SERVICE_NODE_ARGS ?? startScript.split(' ').filter((word) => word.startsWith('--')).join(' ')).split(' ').filter(Boolean);
const adminUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const REST_RATE_LIMIT = '1000000000'; // the limiter stays in the request path; one key must not hit it

const rows: Row[] = [];
const timings: Record<string, number> = {};
const children: Child[] = [];
const tempDirs: string[] = [];
let benchDbName: string | undefined;
/** The service under test: its RSS is sampled during each of its scenarios. */
let current: Child | undefined;

const log = (msg: string) => process.stderr.write(`[bench] ${msg}\n`);
const label = (n: number) => (n >= 1_000_000 ? `${n / 1_000_000}M` : n >= 1000 ? `${n / 1000}k` : String(n));

async function timed<T>(name: string, fn: () => Promise<T>): Promise<T> {
  const start = Date.now();
  const value = await fn();
  timings[name] = Date.now() - start;
  log(`${name}: ${((Date.now() - start) / 1000).toFixed(1)} s`);
  return value;
}

function build() {
  if (args['no-build']) return;
  log('npm run build');
  const res = spawnSync('npm', ['run', '--silent', 'build'], { cwd: ROOT, stdio: 'inherit' });
  if (res.status !== 0) {
    if (!existsSync(join(ROOT, 'dist/src/main.js'))) throw new Error('npm run build failed and there is no dist/src/main.js to measure');
    log('WARNING: npm run build reported errors; measuring the JavaScript it emitted');
  }
}

async function startService(env: Record<string, string>): Promise<Child> {
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), 'sb-bench-'));
  tempDirs.push(dataDir);
  const child = await startChild(
    'service',
    [...serviceNodeArgs, ...(args.profile ? ['--cpu-prof', `--cpu-prof-dir=${resolve(args.profile)}`] : []), join(ROOT, 'dist/src/main.js')],
    { PORT: String(port), HOST: '127.0.0.1', PUBLIC_URL: `http://127.0.0.1:${port}`, LOG_LEVEL: 'warn', REST_RATE_LIMIT, WEBHOOK_ALLOW_INSECURE: 'true', DATA_DIR: dataDir, DATABASE_URL: '', ...env },
    port,
    '/readyz',
    120_000,
  );
  children.push(child);
  current = child;
  return child;
}

async function startBaseline(databaseUrl: string, orgId: string): Promise<Child> {
  const port = await freePort();
  const child = await startChild(
    'baseline',
    ['--import', 'tsx', join(ROOT, 'bench/baseline-server.ts')],
    { PORT: String(port), BASELINE_DATABASE_URL: databaseUrl, BASELINE_ORG_ID: orgId },
    port,
  );
  children.push(child);
  return child;
}

interface Scenario {
  database: string;
  name: string;
  origin: string;
  requests: RequestSpec[];
  headers?: Record<string, string>;
  /** A reason the first answer is not what the scenario should measure, or undefined when it is. */
  validate?: (status: number, body: string) => string | undefined;
}

const okStatus = (status: number, body: string) => (status >= 200 && status < 300 ? undefined : `HTTP ${status}: ${body.slice(0, 160)}`);

async function run(s: Scenario): Promise<Row> {
  const first = s.requests[0]!;
  const answer = await probe(s.origin, first, s.headers);
  const problem = (s.validate ?? okStatus)(answer.status, answer.body);
  if (problem) {
    log(`${s.database} ${s.name}: unavailable (${problem})`);
    return push({ database: s.database, scenario: s.name, status: 'unavailable', note: problem });
  }
  const load: Load = { origin: s.origin, requests: s.requests, ...(s.headers ? { headers: s.headers } : {}) };
  const rss = current && s.origin === current.url ? rssSampler(current.proc.pid) : undefined;
  const server = children.find((c) => c.url === s.origin);
  const m = await measure(load, loadOpts, server?.proc.pid);
  if (rss) m.rssPeakBytes = rss.stop();
  log(`${s.database} ${s.name}: ${m.reqPerSec.toFixed(0)} req/s, p50 ${m.p50} ms, p99 ${m.p99} ms${m.rssPeakBytes ? `, RSS ${Math.round(m.rssPeakBytes / 1048576)} MB` : ''}${m.cpuPerRequest ? `, CPU per request ${cpuText(m)}` : ''}`);
  if (m.non2xx > 0 || m.errors > 0) {
    return push({ database: s.database, scenario: s.name, status: 'invalid', measurement: m, pass: false, note: `under load: ${m.non2xx} non-2xx, ${m.errors} errors/timeouts (status codes ${JSON.stringify(m.statusCodes)})` });
  }
  return push({ database: s.database, scenario: s.name, status: 'measured', measurement: m });
}

/** The server's CPU per request ÷ the baseline's (both from `/proc`, same run), when both were read. */
function cpuRatio(m: Measurement, base: Measurement): number | undefined {
  const [own, theirs] = [m.cpuPerRequest?.server, base.cpuPerRequest?.server];
  return own !== undefined && theirs !== undefined && theirs > 0 ? own / theirs : undefined;
}

/** The CPU a request cost the server and PostgreSQL, e.g. "0.43 + 0.42 ms". */
const cpuText = (m: Measurement | undefined) => (m?.cpuPerRequest ? `${m.cpuPerRequest.server.toFixed(2)} + ${m.cpuPerRequest.database.toFixed(2)} ms` : 'n/a');

function push(row: Row): Row {
  rows.push(row);
  return row;
}

const measured = (row: Row | undefined): Measurement | undefined => (row?.status === 'measured' ? row.measurement : undefined);

/** Sets the ratio of `row`'s throughput to `base`'s, and the verdict against `min` (and an optional p99 bound). */
function throughputTarget(row: Row, base: Row | undefined, baseName: string, min: number | undefined, p99Max?: number) {
  const m = measured(row);
  const b = measured(base);
  if (m && b) {
    row.ratio = m.reqPerSec / b.reqPerSec;
    row.ratioOf = baseName;
    const cpu = cpuRatio(m, b);
    if (cpu !== undefined) row.cpuRatio = cpu;
  }
  if (min === undefined) return;
  row.target = `>= ${min}x ${baseName}${p99Max ? `, p99 < ${p99Max} ms` : ''}`;
  row.targetRatio = min;
  if (row.status === 'measured') row.pass = row.ratio !== undefined && row.ratio >= min && (p99Max === undefined || m!.p99 < p99Max);
}

/** Adds a bound on the server's CPU per request relative to the row's baseline (`cpuRatio`) to its target and verdict. */
function cpuTarget(row: Row, max: number) {
  row.target = `${row.target ? `${row.target}, ` : ''}CPU <= ${max}x`;
  if (row.status !== 'measured') return;
  const within = row.cpuRatio !== undefined && row.cpuRatio <= max;
  row.pass = row.pass === undefined ? within : row.pass && within;
}

function p99Target(row: Row, max: number) {
  row.target = `p99 < ${max} ms`;
  const m = measured(row);
  if (m) row.pass = m.p99 < max;
}

/** A row comparing the median latency of the same scenario at two data sizes. */
function scalingRow(database: string, name: string, small: Row, large: Row, max: number) {
  const s = measured(small);
  const l = measured(large);
  const row: Row = { database, scenario: name, status: s && l ? 'measured' : 'unavailable', target: `p50 <= ${max}x` };
  if (s && l) {
    // p50 in ms at 1 ms resolution would turn 1 ms vs 2 ms into 2x; the mean is as robust and finer.
    row.ratio = l.mean / s.mean;
    row.ratioOf = 'mean latency';
    row.pass = row.ratio <= max;
    row.note = `mean latency ${s.mean.toFixed(2)} ms -> ${l.mean.toFixed(2)} ms (p50 ${s.p50} -> ${l.p50} ms)`;
  }
  rows.push(row);
}

/**
 * (user, client) pairs for the MCP scenario: enough that, at twice the REST read's rate over the warm-up and
 * the measurement, none reaches the transport's 100 requests a minute (a 429 would void the row).
 */
function mcpClientsFor(restGet: Row): number {
  const rate = measured(restGet)?.reqPerSec ?? 0;
  return Math.max(profile.mcpClients, Math.ceil((2 * rate * (profile.warmup + profile.duration)) / 100));
}

function mcpCall(id: number, name: string, args: Record<string, unknown>) {
  return JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } });
}

/** The JSON-RPC answer of a tools/call, whether it came as JSON or as a one-event SSE stream. */
function mcpProblem(status: number, body: string): string | undefined {
  if (status < 200 || status >= 300) return `HTTP ${status}: ${body.slice(0, 160)}`;
  const json = body.startsWith('{') ? body : /^data: (.*)$/m.exec(body)?.[1];
  try {
    const msg = JSON.parse(json ?? '') as { result?: { isError?: boolean; content?: unknown }; error?: { message?: string } };
    if (msg.error) return `JSON-RPC error: ${msg.error.message ?? ''}`;
    if (!msg.result || msg.result.isError) return `tool error: ${JSON.stringify(msg.result).slice(0, 160)}`;
    return undefined;
  } catch {
    return `not a JSON-RPC answer: ${body.slice(0, 160)}`;
  }
}

async function searchScenarios(database: string, service: Child, lean: Child | undefined, size: number, auth: Record<string, string>) {
  const found: Record<string, Row> = {};
  for (const [kind, word] of Object.entries(WORDS)) {
    const path = `/v1/messages/search?q=${word}`;
    const row = await run({ database, name: `search ${kind} "${word}" @${label(size)}`, origin: service.url, requests: [{ path }], headers: auth });
    if (lean && kind === 'common') {
      const base = await run({ database, name: `  lean search ${kind} @${label(size)}`, origin: lean.url, requests: [{ path }] });
      throughputTarget(row, base, 'lean', undefined);
    }
    if (database === 'postgres') p99Target(row, 20);
    found[kind] = row;
  }
  // Rare and absent words take other plans than a common word: each at no less than 0.8x its rate.
  for (const kind of Object.keys(WORDS).filter((k) => k !== 'common')) {
    const [m, c] = [measured(found[kind]), measured(found.common)];
    const row: Row = { database, scenario: `search ${kind} vs common @${label(size)}`, status: m && c ? 'measured' : 'unavailable', target: '>= 0.8x common', targetRatio: 0.8 };
    if (m && c) Object.assign(row, { ratio: m.reqPerSec / c.reqPerSec, ratioOf: 'common', pass: m.reqPerSec / c.reqPerSec >= 0.8 });
    rows.push(row);
  }
  return found;
}

async function messageScenarios(database: string, service: Child, size: number, ids: string[], auth: Record<string, string>) {
  const get = await run({ database, name: `GET /v1/messages/{id} @${label(size)}`, origin: service.url, requests: ids.map((id) => ({ path: `/v1/messages/${id}` })), headers: auth });
  const list = await run({ database, name: `GET /v1/messages/incoming @${label(size)}`, origin: service.url, requests: [{ path: '/v1/messages/incoming' }], headers: auth });
  if (database === 'postgres') {
    p99Target(get, 25);
    p99Target(list, 25);
  }
  return { get, list };
}

/** A write through the service: at least this share of the lean atomic write's rate. */
const ATOMIC_MIN = 1.0;
/** Writes held to a bound on their server CPU per request against the lean atomic write's. */
const ATOMIC_CPU_MAX: Record<string, number> = { 'POST /v1/messages (incoming)': 1.1 };

/** The write path (validation, transaction, event recording) against one lean statement each, when `lean` is given. */
async function writeScenarios(database: string, service: Child, lean: Child | undefined, messageIds: string[], auth: Record<string, string>, min?: number, settle?: () => Promise<void>) {
  const json = { 'content-type': 'application/json' };
  const scenarios: { name: string; requests: RequestSpec[] }[] = [
    { name: 'POST /v1/contacts', requests: [{ method: 'POST', path: '/v1/contacts', headers: json, body: JSON.stringify({ name: 'Bench contact' }) }] },
    {
      name: 'POST /v1/messages (incoming)',
      requests: [{ method: 'POST', path: '/v1/messages', headers: json, body: JSON.stringify({ direction: 'incoming', type: 'email', text: 'Thanks for the quote, see you Monday' }) }],
    },
    {
      name: 'PATCH /v1/messages/{id}',
      requests: messageIds.map((id, i) => ({ method: 'PATCH', path: `/v1/messages/${id}`, headers: json, body: JSON.stringify({ readAt: i % 2 ? null : '2026-01-01T00:00:00Z' }) })),
    },
  ];
  // Each measured row starts from the same database (`settleWrites`).
  const settled = async (s: Scenario) => {
    await settle?.();
    return run(s);
  };
  for (const scenario of scenarios) {
    const row = await settled({ database, name: scenario.name, origin: service.url, requests: scenario.requests, headers: auth });
    if (!lean) continue;
    const short = scenario.name.split(' ').slice(0, 2).join(' ');
    const base = await settled({ database, name: `  lean ${short}`, origin: lean.url, requests: scenario.requests });
    throughputTarget(row, base, 'lean', min);
    // The same write with its events (the ones the service records) in one transaction, bare: the share of the gap that atomicity costs.
    const atomic = await settled({ database, name: `  lean atomic ${short} (BEGIN, write, its events, COMMIT)`, origin: lean.url, requests: scenario.requests.map((r) => ({ ...r, path: `/atomic${r.path}` })) });
    throughputTarget(atomic, base, 'lean', undefined);
    const [m, a, b] = [measured(row), measured(atomic), measured(base)];
    const atomicCpu = m && a ? cpuRatio(m, a) : undefined;
    if (m && a) row.note = `${(m.reqPerSec / a.reqPerSec).toFixed(2)}x the lean atomic write${atomicCpu === undefined ? '' : ` (server CPU ${atomicCpu.toFixed(2)}x its)`}`;
    // Where a request's CPU goes (server process + PostgreSQL): what the ratios come from on a machine the processes share.
    if (m?.cpuPerRequest) row.note = `${row.note ? `${row.note}; ` : ''}CPU per request (server + PostgreSQL): ${cpuText(m)}, lean ${cpuText(b)}, lean atomic ${cpuText(a)}`;
    if (min === undefined) continue;
    // The write also answers at least as fast as the lean atomic write, with a p99 at most twice the lean statement's.
    row.target = `${row.target}, >= ${ATOMIC_MIN}x lean atomic, p99 <= 2x lean`;
    if (m && a && b && row.pass !== undefined) row.pass = row.pass && m.reqPerSec >= ATOMIC_MIN * a.reqPerSec && m.p99 <= 2 * b.p99;
    const cpuMax = ATOMIC_CPU_MAX[scenario.name];
    if (cpuMax !== undefined) {
      row.target = `${row.target}, CPU <= ${cpuMax}x lean atomic`;
      if (row.pass !== undefined) row.pass = row.pass && atomicCpu !== undefined && atomicCpu <= cpuMax;
    }
  }
}

/** The service's RSS now, as a row (no target: what a process holds that serves nothing). */
function idleRow(db: string, scenario: string, service: Child) {
  const now = rssBytes(service.proc.pid);
  if (now !== undefined) rows.push({ database: db, scenario, status: 'measured', rssBytes: now });
}

/** The service's settings for the email rows: the SMTP receiver on loopback without a rate limit, a loopback IMAP server allowed. */
function emailEnv(smtpPort: number): Record<string, string> {
  return { SMTP_PORT: String(smtpPort), SMTP_HOST: '127.0.0.1', SMTP_RATE_LIMIT: '0', SECRETS_KEY: randomBytes(32).toString('base64'), CHANNELS_ALLOW_PRIVATE: 'true' };
}

async function emailRows(db: string, service: Child, auth: Record<string, string>, seedDb: Parameters<typeof smtpReceiveThroughput>[3], smtpPort: number) {
  log(`email: ${profile.smtpMessages} messages over SMTP`);
  rows.push(await smtpReceiveThroughput(db, service.url, auth, seedDb, smtpPort, profile.smtpMessages));
  log(`email: an IMAP mailbox of ${profile.imapMessages} messages`);
  rows.push(await imapSyncTime(db, service.url, auth, seedDb, profile.imapMessages));
}

/** The email rows and the service's RSS peak during them (received mail is read in worker threads, started on the first email). */
async function mailRowsWithRss(...rowArgs: Parameters<typeof emailRows>) {
  const [db, service] = rowArgs;
  const rss = rssSampler(service.proc.pid);
  try {
    await emailRows(...rowArgs);
  } finally {
    rows.push({ database: db, scenario: 'service RSS, peak during the email rows', status: 'measured', rssBytes: rss.stop(), note: 'received mail is read in worker threads (EMAIL_PARSE_THREADS), started on the first email' });
  }
}

/**
 * The text-message rows, each after its baseline; the sends may go to an organization of their own (PGlite
 * counts through the API, and the sends' organization then holds only the texts sent).
 */
async function smsRows(db: string, service: Child, auth: Record<string, string>, counter: MessageCounter, send = { auth, counter }) {
  const hooks = { database: db, origin: service.url, auth, counter };
  const sends = { database: db, origin: service.url, ...send };
  log(`${db} sms: signed webhooks`);
  rows.push(...(await smsWebhookThroughput(hooks, args.quick ? 500 : 2000)));
  log(`${db} sms: texts sent`);
  rows.push(...(await smsSendThroughput(sends, args.quick ? 100 : 500)));
  log(`${db} sms: SMPP receipts`);
  rows.push(...(await smppReceiptThroughput(sends, args.quick ? 200 : 1000)));
  log(`${db} whatsapp: signed webhook batches`);
  rows.push(...(await whatsappWebhookThroughput(hooks, args.quick ? 100 : 400)));
  log(`${db} whatsapp: messages sent`);
  rows.push(...(await whatsappSendThroughput(sends, args.quick ? 100 : 500)));
}

/** The contact reads against their lean baselines (the bare route first), and the MCP get against the REST get. */
async function contactReads(db: string, service: Child, lean: Child, contactIds: string[], seedDb: Parameters<typeof createMcpTokens>[0], orgId: string, auth: Record<string, string>) {
  const fixed = await run({ database: db, name: 'baseline: bare Fastify, fixed JSON', origin: lean.url, requests: [{ path: '/fixed' }] });
  void fixed;

  const contactPaths = contactIds.map((id) => ({ path: `/v1/contacts/${id}` }));
  const leanGet = await run({ database: db, name: 'baseline: lean GET contact (json_agg)', origin: lean.url, requests: contactPaths });
  const get = await run({ database: db, name: 'GET /v1/contacts/{id}', origin: service.url, requests: contactPaths, headers: auth });
  throughputTarget(get, leanGet, 'lean', 0.85, 25);
  cpuTarget(get, 1.25);

  const leanList = await run({ database: db, name: 'baseline: lean contacts page', origin: lean.url, requests: [{ path: '/v1/contacts?limit=10' }] });
  const list = await run({ database: db, name: 'GET /v1/contacts (page of 10)', origin: service.url, requests: [{ path: '/v1/contacts?limit=10' }], headers: auth });
  throughputTarget(list, leanList, 'lean', 0.75, 25);
  cpuTarget(list, 1.25);

  const tokens = await createMcpTokens(seedDb, orgId, `${service.url}/mcp`, mcpClientsFor(get));
  const mcpHeaders = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' };
  // Each call picks a random token: autocannon starts every connection at the same request of a list,
  // which would send the first tokens 50 calls at once and trip the per-(user, client) limit.
  const mcpCallFor = (i: number) => ({
    method: 'POST',
    path: '/mcp',
    headers: { ...mcpHeaders, authorization: `Bearer ${tokens[i % tokens.length]}` },
    body: mcpCall(i + 1, 'contacts_read', { method: 'get', id: contactIds[i % contactIds.length] }),
  });
  const mcpRequests = [
    {
      ...mcpCallFor(0),
      setupRequest: (req: RequestSpec) => {
        const next = mcpCallFor(Math.floor(Math.random() * tokens.length));
        return { ...req, ...next, headers: { ...req.headers, ...next.headers } }; // keeps Host and the rest
      },
    },
  ];
  const mcp = await run({ database: db, name: 'MCP tools/call contacts_get', origin: service.url, requests: mcpRequests, headers: mcpHeaders, validate: mcpProblem });
  // TARGETS.md asks 0.5x; the reads round aims at 0.75x and 1.3x REST's CPU, with a p99 at most twice REST's.
  throughputTarget(mcp, get, 'REST get', 0.75);
  cpuTarget(mcp, 1.3);
  const [mcpM, getM] = [measured(mcp), measured(get)];
  if (mcpM && getM) {
    mcp.target = `${mcp.target}, p99 <= 2x REST p99 (${getM.p99} ms)`;
    if (mcp.pass !== undefined) mcp.pass = mcp.pass && mcpM.p99 <= 2 * getM.p99;
  }
}

async function benchPostgres() {
  const db = 'postgres';
  benchDbName = `sb_bench_${process.pid}`;
  const url = await createDatabase(adminUrl, benchDbName);
  log(`PostgreSQL database ${benchDbName}`);
  await timed('migrate', async () => {
    const database = await openDatabase({ url, poolSize: 1 });
    try {
      await database.migrate();
    } finally {
      await database.close();
    }
  });

  const seed = openSeedConnection(url);
  let tenant: Tenant;
  let contactIds: string[];
  try {
    tenant = await createTenant(seed.db, 'Bench organization');
    contactIds = args.email || args.sms || args.threads ? [] : await timed(`seed ${label(profile.contacts)} contacts`, () => seedContacts(seed.db, tenant.orgId, profile.contacts));
    if (!args.email && !args.sms && !args.threads) {
      await timed(`seed ${label(profile.smallMessages)} messages`, () => seedMessages(seed.db, tenant.orgId, 0, profile.smallMessages, { rebuildIndexes: true }));
      await timed('vacuum analyze', () => vacuumAnalyze(seed.db));
    }
  } catch (err) {
    await seed.close();
    throw err;
  }

  const smtpPort = await freePort();
  const service = await startService({ DATABASE_URL: url, ...emailEnv(smtpPort) });
  if (args.threads) {
    const lean = await startBaseline(url, tenant.orgId);
    try {
      const seeded = await timed(`seed ${label(profile.threads)} threads`, () => seedThreads(seed.db, tenant.orgId, profile.threads));
      const runOne = (name: string, origin: string, requests: RequestSpec[], headers?: Record<string, string>) => run({ database: db, name, origin, requests, ...(headers ? { headers } : {}) });
      await threadRows(db, runOne, service.url, lean.url, { authorization: `Bearer ${tenant.apiKey}` }, seeded, label(profile.threads), () => settleWrites(seed.db));
    } finally {
      await seed.close();
      await stopChild(service);
      await stopChild(lean);
    }
    return;
  }
  if (args.email || args.sms) {
    try {
      if (args.email) await mailRowsWithRss(db, service, { authorization: `Bearer ${tenant.apiKey}` }, seed.db, smtpPort);
      if (args.sms) await smsRows(db, service, { authorization: `Bearer ${tenant.apiKey}` }, sqlCounter(seed.db));
    } finally {
      await seed.close();
    }
    return;
  }
  // Idle: the service started with every worker on and has served nothing yet (its mail reading threads not started).
  await new Promise((r) => setTimeout(r, 2000));
  idleRow(db, 'service RSS, idle (started, no load yet)', service);
  const rss = rssSampler(service.proc.pid);
  const lean = await startBaseline(url, tenant.orgId);
  const auth = { authorization: `Bearer ${tenant.apiKey}` };

  try {
    if (onlyReads) {
      // Nothing has loaded the service yet (the full run's earlier rows warm it): its JIT gets the same reads first, unrecorded.
      const warm = { origin: service.url, headers: auth, requests: contactIds.map((id) => ({ path: `/v1/contacts/${id}` })) };
      await measure(warm, { ...loadOpts, duration: 3 });
      await measure({ ...warm, requests: [{ path: '/v1/contacts?limit=10' }] }, { ...loadOpts, duration: 3 });
      await contactReads(db, service, lean, contactIds, seed.db, tenant.orgId, auth);
      const peak = rss.stop();
      rows.push({ database: db, scenario: 'service RSS, peak under load', status: 'measured', rssBytes: peak, target: '< 200 MB', pass: peak > 0 ? peak < 200 * 1024 * 1024 : undefined });
      return;
    }
    if (onlyWrites) {
      await writeScenarios(db, service, lean, await sampleMessageIds(seed.db, tenant.orgId, 200), auth, 0.6, () => settleWrites(seed.db));
      const peak = rss.stop();
      rows.push({ database: db, scenario: 'service RSS, peak under load', status: 'measured', rssBytes: peak, target: '< 200 MB', pass: peak > 0 ? peak < 200 * 1024 * 1024 : undefined });
      return;
    }
    rows.push(await automationLatency(db, service.url, auth));
    rows.push(await webhookThroughput(db, service.url, auth, 1, args.quick ? 300 : 1000));
    rows.push(await webhookThroughput(db, service.url, auth, 8, args.quick ? 100 : 500));
    // Mail goes to an organization of its own, and the planner's statistics are taken again after it: the
    // 11,000 received messages must not change the data the read and search rows measure.
    const mailTenant = await createTenant(seed.db, 'Bench mail organization');
    await mailRowsWithRss(db, service, { authorization: `Bearer ${mailTenant.apiKey}` }, seed.db, smtpPort);
    await smsRows(db, service, { authorization: `Bearer ${mailTenant.apiKey}` }, sqlCounter(seed.db));
    await timed('vacuum analyze', () => vacuumAnalyze(seed.db));

    await contactReads(db, service, lean, contactIds, seed.db, tenant.orgId, auth);

    const smallSearch = await searchScenarios(db, service, lean, profile.smallMessages, auth);
    const smallIds = await sampleMessageIds(seed.db, tenant.orgId, 200);
    const smallMessages = await messageScenarios(db, service, profile.smallMessages, smallIds, auth);

    await timed(`grow messages to ${label(profile.largeMessages)}`, () =>
      seedMessages(seed.db, tenant.orgId, profile.smallMessages, profile.largeMessages, { rebuildIndexes: true }),
    );
    const largeSearch = await searchScenarios(db, service, lean, profile.largeMessages, auth);
    const largeMessages = await messageScenarios(db, service, profile.largeMessages, smallIds, auth);

    const scale = `${label(profile.largeMessages)} vs ${label(profile.smallMessages)}`;
    for (const kind of Object.keys(WORDS)) scalingRow(db, `search ${kind}: ${scale}`, smallSearch[kind]!, largeSearch[kind]!, 1.5);
    scalingRow(db, `GET message: ${scale}`, smallMessages.get, largeMessages.get, 1.5);
    scalingRow(db, `list incoming: ${scale}`, smallMessages.list, largeMessages.list, 1.5);

    await writeScenarios(db, service, lean, smallIds, auth, 0.6, () => settleWrites(seed.db));

    const peak = rss.stop();
    rows.push({ database: db, scenario: 'service RSS, peak under load', status: 'measured', rssBytes: peak, target: '< 200 MB', pass: peak > 0 ? peak < 200 * 1024 * 1024 : undefined });
    // Idle again once the load has stopped and the mail reading threads' idle life (EMAIL_PARSE_IDLE_MS) has passed.
    await new Promise((r) => setTimeout(r, 12_000));
    idleRow(db, 'service RSS, idle after the load', service);
  } finally {
    rss.stop();
    await seed.close();
    await stopChild(service);
    await stopChild(lean);
  }
}

/** A new embedded database in a temporary data directory, migrated (closed before the service opens it). */
async function openBenchPglite() {
  const dataDir = mkdtempSync(join(tmpdir(), 'sb-bench-pglite-'));
  tempDirs.push(dataDir);
  const database = await timed('pglite: open and migrate', async () => {
    const d = await openDatabase({ dataDir });
    await d.migrate();
    return d;
  });
  return { dataDir, database };
}

/** The text-message rows on the embedded database: two organizations, the service's settings of the email rows. */
async function smsPglite() {
  const db = 'pglite';
  const { dataDir, database } = await openBenchPglite();
  let hooks: Tenant;
  let sends: Tenant;
  try {
    hooks = await createTenant(database.db, 'Bench text organization');
    sends = await createTenant(database.db, 'Bench sending organization');
  } finally {
    await database.close(); // releases the data directory for the service
  }
  const service = await startService({ DATA_DIR: dataDir, ...emailEnv(await freePort()) });
  try {
    const [auth, sendAuth] = [{ authorization: `Bearer ${hooks.apiKey}` }, { authorization: `Bearer ${sends.apiKey}` }];
    await smsRows(db, service, auth, apiCounter(service.url, auth), { auth: sendAuth, counter: apiCounter(service.url, sendAuth) });
  } finally {
    await stopChild(service);
  }
}

/** The embedded database: informational (one connection on the main thread, no targets of its own). */
async function benchPglite() {
  const db = 'pglite';
  if (args.sms) return smsPglite();
  const { dataDir, database } = await openBenchPglite();
  let tenant: Tenant;
  let contactIds: string[];
  let messageIds: string[];
  try {
    tenant = await createTenant(database.db, 'Bench organization');
    contactIds = await timed(`pglite: seed ${label(profile.contacts)} contacts`, () => seedContacts(database.db, tenant.orgId, profile.contacts));
    await timed(`pglite: seed ${label(profile.smallMessages)} messages`, () => seedMessages(database.db, tenant.orgId, 0, profile.smallMessages, { rebuildIndexes: false }));
    await vacuumAnalyze(database.db);
    messageIds = await sampleMessageIds(database.db, tenant.orgId, 200);
  } finally {
    await database.close(); // releases the data directory for the service
  }

  const service = await startService({ DATA_DIR: dataDir });
  const rss = rssSampler(service.proc.pid);
  const auth = { authorization: `Bearer ${tenant.apiKey}` };
  const pgRow = (name: string) => rows.find((r) => r.database === 'postgres' && r.scenario === name);
  try {
    const get = await run({ database: db, name: 'GET /v1/contacts/{id}', origin: service.url, requests: contactIds.map((id) => ({ path: `/v1/contacts/${id}` })), headers: auth });
    throughputTarget(get, pgRow('baseline: lean GET contact (json_agg)'), 'PG lean', undefined);
    const list = await run({ database: db, name: 'GET /v1/contacts (page of 10)', origin: service.url, requests: [{ path: '/v1/contacts?limit=10' }], headers: auth });
    throughputTarget(list, pgRow('baseline: lean contacts page'), 'PG lean', undefined);
    await searchScenarios(db, service, undefined, profile.smallMessages, auth);
    await messageScenarios(db, service, profile.smallMessages, messageIds, auth);
    await writeScenarios(db, service, undefined, messageIds, auth);
    rows.push(await webhookThroughput(db, service.url, auth, 1, args.quick ? 300 : 1000));
    const peak = rss.stop();
    rows.push({ database: db, scenario: 'service RSS, peak under load', status: 'measured', rssBytes: peak, note: 'PGlite runs PostgreSQL in WebAssembly inside the process; no RSS target' });
  } finally {
    rss.stop();
    await stopChild(service);
  }
}

async function cleanup() {
  for (const child of children) await stopChild(child).catch(() => {});
  if (benchDbName && !args['keep-db']) await dropDatabase(adminUrl, benchDbName).catch((err: unknown) => log(`could not drop ${benchDbName}: ${String(err)}`));
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
}

let interrupted = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (interrupted) return;
    interrupted = true;
    log(`${signal}: stopping`);
    void cleanup().finally(() => process.exit(130));
  });
}

const startedAt = new Date();
let failed: unknown;
try {
  build();
  await benchPostgres();
  if (args.pglite) await benchPglite();
} catch (err) {
  failed = err;
} finally {
  await cleanup();
}

if (rows.length) {
  process.stdout.write('\n');
  printTable(rows);
  writeJson(RESULTS, {
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    mode: args.quick ? 'quick' : 'full',
    machine: { node: process.version, cpus: cpus().length, cpu: cpus()[0]?.model },
    profile,
    seedTimingsMs: timings,
    rows,
  });
  writeChart(CHART, rows, `npm run bench${args.quick ? ' --quick' : ''}, ${startedAt.toISOString().slice(0, 10)}, ${cpus().length} cores`);
  process.stdout.write(`\nJSON: ${RESULTS}\nChart: ${CHART}\n`);
}
if (failed) {
  log(`failed: ${failed instanceof Error ? (failed.stack ?? failed.message) : String(failed)}`);
  process.exit(1);
}
const missed = rows.filter((r) => r.pass === false);
if (missed.length) log(`${missed.length} target(s) missed: ${missed.map((r) => `${r.database} ${r.scenario}`).join('; ')}`);
process.exit(args.strict && missed.length ? 1 : 0);
