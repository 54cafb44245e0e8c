import { and, eq, inArray, sql } from 'drizzle-orm';
import type { Db } from '../src/db/client.js';
import { messages } from '../src/db/schema.js';
import type { Measurement } from './measure.js';
import type { Row } from './report.js';

/**
 * The shape every messaging channel's rows share, so that each kind's file keeps only what differs (its local
 * provider, its channel, its signed posts, its direct requests):
 * - `webhookRows`: signed provider webhooks per second to committed messages, from `CLIENTS` concurrent
 *   clients; the baseline is `POST /v1/messages` (an incoming message through the API's write path) from the
 *   same clients, as many requests: the ratio is what the signature check, the duplicate checks, the threads
 *   and the answer cost over a plain write;
 * - `sendRows`: messages sent per second through the channel's sender to a local server playing the
 *   provider; the baseline is the same requests sent straight to that server, one after another (the sender
 *   sends one channel's messages in turn): the ratio is the share of the provider's serial rate the outbox
 *   reaches. The channel's rate is high: the row measures the sender, not the pacing.
 * The service must run with CHANNELS_ALLOW_PRIVATE=true and a SECRETS_KEY.
 */

export async function call(origin: string, auth: Record<string, string>, method: string, path: string, body?: unknown) {
  const res = await fetch(`${origin}${path}`, { method, headers: { ...auth, 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const json = (await res.json()) as { data?: { id: string } };
  if (!res.ok) throw new Error(`${method} ${path}: HTTP ${res.status} ${JSON.stringify(json)}`);
  return json.data!;
}

/**
 * How many messages of a channel are in one of `statuses` (any status when absent); `pollMs`, how often a row
 * that waits for a count asks (its granularity: a sends row's time is rounded up to it).
 */
export type MessageCounter = ((channelId: string, statuses?: string[]) => Promise<number>) & { pollMs: number };

/** Counts in the database itself (PostgreSQL: a connection of the bench's own), cheap enough to ask every 5 ms (a sends row of 100 texts takes 0.2-0.3 s: a 20 ms poll added up to a tenth to it). */
export const sqlCounter = (db: Db): MessageCounter =>
  Object.assign(
    async (channelId: string, statuses?: string[]) => {
      const [row] = await db
        .select({ n: sql<number>`count(*)::int` })
        .from(messages)
        .where(and(eq(messages.channelId, channelId), statuses ? inArray(messages.status, statuses) : undefined));
      return row?.n ?? 0;
    },
    { pollMs: 5 },
  );

/** Counts through the API, page by page (PGlite: the service holds the only connection to its database). */
export const apiCounter = (origin: string, auth: Record<string, string>): MessageCounter =>
  Object.assign(
    async (channelId: string, statuses?: string[]) => {
      let n = 0;
      for (let offset = 0; ; offset += 100) {
        const res = await fetch(`${origin}/v1/messages?limit=100&offset=${offset}`, { headers: auth });
        const page = ((await res.json()) as { data?: { channelId: string | null; status: string | null }[] }).data ?? [];
        n += page.filter((m) => m.channelId === channelId && (!statuses || statuses.includes(m.status ?? ''))).length;
        if (page.length < 100) return n;
      }
    },
    { pollMs: 250 },
  );

/** A valid New York number: customers are +1 212 2xx xxxx (5,000 of them), channels +1 212 `block`xx xxxx. */
export const customerNumber = (i: number) => `+1212${2000000 + (i % 5000)}`;
export const channelNumber = (block: number) => `+1212${block * 1_000_000 + (Date.now() % 1_000_000)}`;

/** Runs `tasks` on `clients` concurrent clients; the rate, latencies and failures. */
export async function load(count: number, clients: number, task: (i: number) => Promise<boolean>): Promise<Measurement & { seconds: number }> {
  const latencies: number[] = [];
  let next = 0;
  let failures = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < count) {
        const i = next++;
        const t0 = performance.now();
        if (!(await task(i))) failures++;
        latencies.push(performance.now() - t0);
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  latencies.sort((x, y) => x - y);
  const at = (q: number) => Math.round(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0);
  return {
    seconds,
    reqPerSec: count / seconds,
    p50: at(0.5),
    p99: at(0.99),
    mean: latencies.reduce((s, x) => s + x, 0) / Math.max(1, latencies.length),
    requests: count,
    non2xx: failures,
    errors: 0,
    statusCodes: {},
  };
}

export const CLIENTS = 20;

/** One HTTP request of a row, and the status that counts as success. */
export interface Request {
  url: string;
  init: RequestInit;
  ok: number;
}

/** Sends a request; counts its answer's status in `statuses` (a connection error as 0). */
async function send(request: Request, statuses: Record<number, number> = {}) {
  const res = await fetch(request.url, request.init).catch(() => undefined);
  await res?.text();
  const status = res?.status ?? 0;
  statuses[status] = (statuses[status] ?? 0) + 1;
  return status === request.ok;
}

/** `{ 200: 495, 503: 5 }` as "200 ×495, 503 ×5". */
const statusesText = (statuses: Record<number, number>) =>
  Object.entries(statuses)
    .map(([status, n]) => `${status} ×${n}`)
    .join(', ');

/** A local server playing the provider: every request it took, and its end. */
export interface LocalProvider {
  sent: unknown[];
  close(): Promise<void>;
}

/** Where a row runs: the database's name, the service, an API key's headers, and how messages are counted. */
export interface Target {
  database: string;
  origin: string;
  auth: Record<string, string>;
  counter: MessageCounter;
}

/** Starts the local provider, runs the rows (`unavailable` when they throw), and always deletes the channel made and closes the provider. */
export async function withChannel<P extends { close(): Promise<void> }>(target: Target, scenario: string, start: () => Promise<P>, rows: (provider: P, created: (id: string) => void) => Promise<Row[]>): Promise<Row[]> {
  const provider = await start();
  let channelId: string | undefined;
  try {
    return await rows(provider, (id) => (channelId = id));
  } catch (err) {
    return [{ database: target.database, scenario, status: 'unavailable', note: (err as Error).message }];
  } finally {
    if (channelId) await call(target.origin, target.auth, 'DELETE', `/v1/channels/${channelId}`).catch(() => undefined);
    await provider.close();
  }
}

export interface WebhookKind<P extends LocalProvider> {
  scenario: string;
  /** The channel type: the baseline's incoming messages and the hook path `/hooks/{type}/{channelId}`. */
  type: string;
  start: () => Promise<P>;
  /** The `POST /v1/channels` body. */
  channel: (provider: P) => Record<string, unknown>;
  /** The `count` signed posts to the channel's hook URL. */
  posts: (provider: P, url: string, count: number) => Request[];
  /** How many messages the posts commit (duplicates once). */
  expected: number;
  /** What the row's note says of the posts, e.g. "2000 webhooks (1600 distinct MessageSids)". */
  what: string;
}

export async function webhookRows<P extends LocalProvider>(target: Target, kind: WebhookKind<P>, count: number): Promise<Row[]> {
  const { database, origin, auth, counter } = target;
  const { scenario, expected } = kind;
  return withChannel(target, scenario, kind.start, async (provider, created) => {
    const channel = await call(origin, auth, 'POST', '/v1/channels', kind.channel(provider));
    created(channel.id);
    const posts = kind.posts(provider, `${origin}/hooks/${kind.type}/${channel.id}`, count);
    const write = { url: `${origin}/v1/messages`, init: { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ direction: 'incoming', type: kind.type, text: 'Order 1 please' }) }, ok: 201 };
    const base = await load(count, CLIENTS, () => send(write));
    const baseRow: Row = { database, scenario: `  baseline: POST /v1/messages (incoming), ${CLIENTS} clients`, status: base.non2xx ? 'invalid' : 'measured', measurement: base, note: `${count} writes in ${base.seconds.toFixed(1)} s` };
    const statuses: Record<number, number> = {};
    const m = await load(count, CLIENTS, (i) => send(posts[i]!, statuses));
    const stored = await counter(channel.id);
    const note = `${kind.what} over ${CLIENTS} clients in ${m.seconds.toFixed(1)} s (${(expected / m.seconds).toFixed(0)} messages/s)`;
    if (m.non2xx > 0 || stored !== expected) return [baseRow, { database, scenario, status: 'invalid', note: `${m.non2xx} non-200 answers (${statusesText(statuses)}); ${stored} of ${expected} messages; ${note}` }];
    const row: Row = { database, scenario, status: 'measured', measurement: m, note };
    if (baseRow.status === 'measured') Object.assign(row, { ratio: m.reqPerSec / base.reqPerSec, ratioOf: 'API incoming write' });
    return [baseRow, row];
  });
}

export interface SendKind<P extends LocalProvider> {
  scenario: string;
  start: () => Promise<P>;
  /** What the baseline and the ratio name, e.g. "the local provider". */
  alone: string;
  /** The request the sender makes for the `i`th customer, sent straight to the local provider. */
  direct: (provider: P, i: number) => Request;
  /** The `POST /v1/channels` body (its rate high). */
  channel: (provider: P) => Record<string, unknown>;
  /** The `POST /v1/messages/send` body but `channelId` and `to`, and how it writes a customer's number. */
  message: Record<string, unknown>;
  to: (i: number) => string;
  /** What is sent, plural: "texts", "templates". */
  what: string;
}

export async function sendRows<P extends LocalProvider>(target: Target, kind: SendKind<P>, count: number): Promise<Row[]> {
  const { database, origin, auth, counter } = target;
  const { scenario } = kind;
  return withChannel(target, scenario, kind.start, async (provider, created) => {
    // The provider alone: the same requests with the same credentials, one at a time, from the bench.
    const base = await load(count, 1, (i) => send(kind.direct(provider, i)));
    const baseRow: Row = { database, scenario: `  baseline: ${kind.alone} alone, 1 client`, status: base.non2xx ? 'invalid' : 'measured', measurement: base, note: `${count} POSTs in ${base.seconds.toFixed(1)} s` };
    provider.sent.length = 0;
    const channel = await call(origin, auth, 'POST', '/v1/channels', kind.channel(provider));
    created(channel.id);
    const start = performance.now();
    for (let i = 0; i < count; i += 50) {
      const to = Array.from({ length: Math.min(50, count - i) }, (_, k) => kind.to(i + k));
      await call(origin, auth, 'POST', '/v1/messages/send', { ...kind.message, channelId: channel.id, to });
    }
    const deadline = Date.now() + 10 * 60_000;
    let settled = 0;
    while (Date.now() < deadline) {
      settled = await counter(channel.id, ['sent', 'failed']);
      if (settled >= count) break;
      await new Promise((r) => setTimeout(r, counter.pollMs));
    }
    const seconds = (performance.now() - start) / 1000;
    const sent = await counter(channel.id, ['sent']);
    if (sent < count || provider.sent.length !== count) return [baseRow, { database, scenario, status: 'invalid', note: `${sent} of ${count} sent (${settled} settled), ${provider.sent.length} requests` }];
    const measurement: Measurement = { reqPerSec: count / seconds, p50: Number.NaN, p99: Number.NaN, mean: (seconds * 1000) / count, requests: count, non2xx: 0, errors: 0, statusCodes: {} };
    const row: Row = { database, scenario, status: 'measured', measurement, note: `${count} ${kind.what} queued (${Math.ceil(count / 50)} sends of 50 numbers) and sent in ${seconds.toFixed(1)} s` };
    if (baseRow.status === 'measured') Object.assign(row, { ratio: measurement.reqPerSec / base.reqPerSec, ratioOf: `${kind.alone.replace(/^the /, '')} alone` });
    return [baseRow, row];
  });
}
