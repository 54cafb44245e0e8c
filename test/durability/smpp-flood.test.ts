import { randomBytes } from 'node:crypto';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { and, eq, inArray, sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/client.js';
import { events, messages } from '../../src/db/schema.js';
import { startSmsc } from '../helpers/smsc.js';
import { addOrganization, send, startServer, useStore, type ServerProcess } from './server-process.js';

/**
 * Timing-sensitive (it measures request latencies while a flood runs): run it alone, as the other tests in
 * this folder. One organization's SMSC floods deliver_sm as fast as TCP allows while another organization's
 * REST calls keep their baseline, measured in the same test on the same server process: the bind writes a
 * few deliver_sm at a time (TCP holds the SMSC back meanwhile) and answers ESME_RTHROTTLED past the channel's
 * rate. The flood ends with every PDU committed (with its event) or answered throttled or temporary, never
 * lost nor half-written.
 */

const store = useStore();
const SECRETS_KEY = randomBytes(32).toString('base64');
const FLOOD = 3000;
/** deliver_sm a minute the channel takes (SMPP_DELIVER_RATE_LIMIT): well under what a bind writes in one, so that the rest is throttled. */
const RATE = 600;
const ESME_RTHROTTLED = 0x58;
const ESME_RX_T_APPN = 0x64;

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

async function call(server: ServerProcess, key: string, method: string, path: string, body?: unknown): Promise<Json> {
  const res = await send(server.url, method, path, key, body);
  expect(res.status, res.body).toBeLessThan(300);
  return JSON.parse(res.body).data as Json;
}

/**
 * This process's own delays: on a busy machine the caller is held from running too, and an answer it could
 * not read meanwhile is not the server's delay (as the hostile-mail test discounts its prober's).
 */
const lag = monitorEventLoopDelay({ resolution: 10 });

/** One call's latency, and how long this process was held from running during it. */
interface Timed {
  ms: number;
  heldMs: number;
}

async function timed<T>(fn: () => Promise<T>): Promise<[T, Timed]> {
  lag.reset();
  const started = performance.now();
  const out = await fn();
  const ms = performance.now() - started;
  return [out, { ms, heldMs: lag.max / 1e6 }];
}

/** One round of the other organization's REST calls: a write, then a read of it. */
async function round(server: ServerProcess, key: string, n: number): Promise<{ write: Timed; read: Timed }> {
  const [contact, write] = await timed(() => call(server, key, 'POST', '/v1/contacts', { firstName: 'Neighbour', lastName: `N${n}` }));
  const [, read] = await timed(() => call(server, key, 'GET', `/v1/contacts/${contact.id}`));
  return { write, read };
}

const quantile = (xs: number[], q: number) => [...xs].sort((x, y) => x - y)[Math.min(xs.length - 1, Math.floor(xs.length * q))]!;
const median = (xs: number[]) => quantile(xs, 0.5);
/** The median, 90th percentile and slowest of some latencies, for the report. */
const spread = (xs: number[]) => `${[0.5, 0.9, 1].map((q) => quantile(xs, q).toFixed(0)).join('/')} ms`;

describe("one organization's SMSC flooding deliver_sm", () => {
  it("keeps another organization's REST calls within 250 ms of their baseline; every PDU is committed or answered throttled or temporary", async () => {
    const neighbour = await addOrganization(store, 'Neighbour');
    lag.enable();
    const smsc = await startSmsc({ flooder: 'floodpw' });
    try {
      const server = await startServer({ ...store.env, SECRETS_KEY, CHANNELS_ALLOW_PRIVATE: 'true', SMPP_DELIVER_RATE_LIMIT: String(RATE) });
      const channel = await call(server, store.key, 'POST', '/v1/channels', {
        type: 'sms',
        name: 'Flooded line',
        address: '+12125550199',
        provider: { kind: 'smpp', host: '127.0.0.1', port: smsc.port, tls: false, systemId: 'flooder', password: 'floodpw' },
      });
      await smsc.until(() => smsc.bound().length === 1, 30_000, 'the bind');

      // The baseline: the neighbour's calls on this server, now, after a warm-up.
      for (let i = 0; i < 10; i++) await round(server, neighbour, i);
      const baseline: { write: Timed; read: Timed }[] = [];
      for (let i = 0; i < 30; i++) baseline.push(await round(server, neighbour, i));
      const base = { write: median(baseline.map((b) => b.write.ms)), read: median(baseline.map((b) => b.read.ms)) };

      const texts = Array.from({ length: FLOOD }, (_, i) => `Flood text ${i}`);
      const pdus = texts.map((text, i) => ({ source_addr: `1415${String(5_000_000 + i).padStart(7, '0')}`, source_addr_ton: 1, source_addr_npi: 1, destination_addr: '12125550199', dest_addr_ton: 1, dest_addr_npi: 1, data_coding: 0, short_message: text }));
      let flooding = true;
      const floodStarted = performance.now();
      const flood = smsc.flood(pdus, 150_000).finally(() => (flooding = false));
      const during: { write: Timed; read: Timed }[] = [];
      while (flooding) {
        during.push(await round(server, neighbour, during.length));
        await new Promise((r) => setTimeout(r, 25));
      }
      const statuses = await flood;
      const minutes = Math.ceil((performance.now() - floodStarted) / 60_000);

      const committed = statuses.flatMap((s, i) => (s === 0 ? [texts[i]!] : []));
      const throttled = statuses.filter((s) => s === ESME_RTHROTTLED).length;
      const temporary = statuses.filter((s) => s === ESME_RX_T_APPN).length;
      const ms = (list: typeof during, kind: 'write' | 'read') => list.map((r) => r[kind].ms);
      const report = `writes (median/p90/slowest) ${spread(ms(baseline, 'write'))} before, ${spread(ms(during, 'write'))} during the flood; reads ${spread(ms(baseline, 'read'))} before, ${spread(ms(during, 'read'))} during (${during.length} rounds); ${committed.length} committed, ${throttled} throttled, ${temporary} temporary; this process was held up to ${Math.max(...during.flatMap((d) => [d.write.heldMs, d.read.heldMs])).toFixed(0)} ms during one call`;
      console.log(report);
      expect(during.length, report).toBeGreaterThan(5);
      for (const d of during) {
        expect(d.write.ms - d.write.heldMs, report).toBeLessThan(base.write + 250);
        expect(d.read.ms - d.read.heldMs, report).toBeLessThan(base.read + 250);
      }
      expect(committed.length + throttled + temporary, report).toBe(FLOOD);
      expect(throttled, report).toBeGreaterThan(0);
      expect(committed.length, report).toBeLessThanOrEqual(RATE * minutes);

      // Stopped, the store is read directly: each committed text once, with its event; nothing else.
      server.proc.kill('SIGTERM');
      await server.exited;
      const database = await openDatabase(store.env.DATABASE_URL ? { url: store.env.DATABASE_URL, poolSize: 1 } : { dataDir: store.dataDir });
      try {
        const rows = await database.db.select({ id: messages.id, text: messages.text }).from(messages).where(and(eq(messages.channelId, channel.id as string), eq(messages.direction, 'incoming')));
        expect(rows.map((r) => r.text).sort()).toEqual([...committed].sort());
        const [received] = await database.db
          .select({ n: sql<number>`count(*)::int` })
          .from(events)
          .where(and(eq(events.type, 'message.received'), inArray(events.resourceId, rows.length ? rows.map((r) => r.id) : [channel.id as string])));
        expect(received!.n).toBe(rows.length);
      } finally {
        await database.close();
      }
    } finally {
      lag.disable();
      await smsc.close();
    }
  }, 240_000);
});
