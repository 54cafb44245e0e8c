import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { packagePath } from '../../src/core/paths.js';
import { createMailSender } from '../../src/workers/mail-sender.js';
import { createTestApp, ok, useTestApp, type TestApp } from '../helpers/app.js';
import { testDbKind } from '../helpers/database.js';
import { relayChannel } from '../helpers/domains.js';
import { refusedPort } from '../helpers/smtp-relay.js';

/**
 * GET /metrics (CONTRACT §1): behind METRICS_TOKEN (absent: 404; without the token: 401), Prometheus's text
 * format, and what an operator watches: requests by route, event-loop lag, the outbox while mail is stuck
 * behind a dead relay (its oldest age growing), webhook backlog, channels per status, mailbox sync age,
 * evaluations waiting, the database pool.
 */

const TOKEN = randomBytes(24).toString('hex');
let now = Date.now();
const clock = () => new Date(now);
const env = { SECRETS_KEY: randomBytes(32).toString('base64'), CHANNELS_ALLOW_PRIVATE: 'true', WEBHOOK_ALLOW_INSECURE: 'true' };
const { t, a } = useTestApp({ app: { clock, env: { ...env, METRICS_TOKEN: TOKEN } } });
const silent = { error: () => {}, warn: () => {} };

async function scrape(token: string | null = TOKEN) {
  return t.app.inject({ method: 'GET', url: '/metrics', headers: token ? { authorization: `Bearer ${token}` } : {} });
}

/** The value of one sample line (`name{labels} value`), or undefined. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-z_]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = m[2] ? m[2].split(/,(?=[a-z_]+=")/) : [];
    if (want.every((w) => have.includes(w))) return Number(m[3]);
  }
  return undefined;
}

describe('GET /metrics', () => {
  let bare: TestApp;
  beforeAll(async () => {
    // The same settings without METRICS_TOKEN (the services' policies are the process's: keep them the same).
    bare = await createTestApp({ env });
  });
  afterAll(() => bare?.close());

  it('does not exist without METRICS_TOKEN, and needs the token with it', async () => {
    const absent = await bare.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } });
    expect(absent.statusCode).toBe(404);
    expect(absent.json()).toMatchObject({ error: { code: 'NOT_FOUND' } });
    for (const token of [null, 'wrong-token-of-enough-length']) {
      const refused = await scrape(token);
      expect(refused.statusCode).toBe(401);
      expect(refused.json()).toEqual({ error: { code: 'UNAUTHORIZED', message: expect.stringContaining('METRICS_TOKEN') } });
      expect(refused.headers['www-authenticate']).toBe('Bearer realm="metrics"');
      expect(refused.headers['x-request-id']).toBeTruthy();
    }
  });

  it('reads requests by route, event-loop lag, channels, mailboxes, evaluations and webhooks in the Prometheus text format', async () => {
    now = Math.max(Date.now(), now + 60_000); // forward only, as time goes
    const contact = await ok(await a.request('POST', '/v1/contacts', { firstName: 'Ada' }), 201);
    for (let i = 0; i < 3; i++) await ok(await a.request('GET', `/v1/contacts/${contact.id}`));
    await ok(await a.request('POST', '/v1/webhooks', { url: 'http://127.0.0.1:9/hook', eventTypes: ['contact.created'] }), 201);
    await ok(await a.request('POST', '/v1/contacts', { firstName: 'Grace' }), 201); // a delivery waits
    await ok(await a.request('POST', '/v1/automations', { name: 'Later', instructions: 'When a new email arrives, archive it' }), 201); // waits for evaluation
    const mailbox = await ok(
      await a.request('POST', '/v1/channels', {
        type: 'email',
        name: 'Mailbox',
        address: 'box@mailbox.example',
        inbound: { mode: 'imap', host: '127.0.0.1', port: await refusedPort(), secure: false, tls: 'none', username: 'box', password: 'secret-password' },
      }),
      201,
    );
    now += 60_000; // past the cache of the last read

    const res = await scrape();
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = res.body;
    expect(sample(text, 'switchboard_http_request_duration_seconds_count', { method: 'GET', route: '/v1/contacts/:id', status_code: '200' })).toBe(3);
    expect(sample(text, 'switchboard_http_request_duration_seconds_count', { method: 'POST', route: '/v1/contacts', status_code: '201' })).toBe(2);
    expect(text).toMatch(/^nodejs_eventloop_lag_seconds \d/m);
    expect(text).toMatch(/^nodejs_eventloop_lag_p99_seconds \d/m);
    expect(text).toMatch(/^switchboard_info\{version="[^"]+"\} 1$/m);
    expect(sample(text, 'switchboard_database_up')).toBe(1);
    expect(sample(text, 'switchboard_channels', { type: 'email', status: 'active' })).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'switchboard_mailbox_last_sync_age_seconds', { channel_id: mailbox.id, organization_id: a.orgId })).toBeGreaterThanOrEqual(50);
    expect(sample(text, 'switchboard_automation_evaluations_waiting')).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'switchboard_webhook_deliveries_pending')).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'switchboard_webhook_oldest_pending_age_seconds')).toBeGreaterThanOrEqual(50);
    if (testDbKind === 'postgres') {
      expect(sample(text, 'switchboard_db_pool_connections', { state: 'total' })).toBeGreaterThanOrEqual(1);
      expect(sample(text, 'switchboard_db_pool_connections', { state: 'waiting' })).toBe(0);
    }
  });

  it('shows mail stuck behind a dead relay: the outbox holds it, its age grows, the channel is in error', async () => {
    now = Math.max(Date.now(), now + 60_000); // forward only, as time goes
    const channel = await relayChannel(t.database.db, a, { name: 'Stuck', address: 'hello@stuck.example', port: await refusedPort() });
    await ok(await a.request('POST', '/v1/messages/send', { channelId: channel.id, to: ['ada@customer.example'], subject: 'Hello', text: 'Hi' }), 201);
    const sender = createMailSender({ db: t.database.db, clock: () => new Date(), log: silent, allowPrivate: true, sendTimeoutMs: 5000, random: () => 0.5 });
    await sender.runOnce(); // the relay refuses the connection: retried later

    now += 60_000;
    const first = (await scrape()).body;
    expect(sample(first, 'switchboard_outbox_messages', { kind: 'email' })).toBe(1);
    expect(sample(first, 'switchboard_outbox_messages', { kind: 'sms' })).toBe(0);
    // Every channel kind of the registry has its outbox counted, WhatsApp's too.
    expect(sample(first, 'switchboard_outbox_messages', { kind: 'whatsapp' })).toBe(0);
    const age = sample(first, 'switchboard_outbox_oldest_age_seconds', { kind: 'email' })!;
    expect(age).toBeGreaterThanOrEqual(50);
    expect(sample(first, 'switchboard_channels', { type: 'email', status: 'error' })).toBe(1);

    // Within the cache, the same read of the database, the age counted to now; past it, a new read.
    now += 1_000;
    expect(sample((await scrape()).body, 'switchboard_outbox_oldest_age_seconds', { kind: 'email' })).toBeCloseTo(age + 1, 3);
    now += 10 * 60_000;
    const later = (await scrape()).body;
    expect(sample(later, 'switchboard_outbox_messages', { kind: 'email' })).toBe(1);
    expect(sample(later, 'switchboard_outbox_oldest_age_seconds', { kind: 'email' })).toBeGreaterThanOrEqual(age + 600);
  });

  it('names in the alert rules of deploy/ only metrics it exposes', async () => {
    const rules = parse(readFileSync(packagePath('deploy/prometheus-alerts.yml'), 'utf8')) as { groups: { rules: { alert: string; expr: string }[] }[] };
    now += 60_000;
    const exposed = new Set([...(await scrape()).body.matchAll(/^# TYPE (\S+) (\S+)$/gm)].flatMap(([, name, type]) => (type === 'histogram' ? [`${name}_bucket`, `${name}_count`, `${name}_sum`] : [name!])));
    const all = rules.groups.flatMap((g) => g.rules);
    expect(all.length).toBeGreaterThanOrEqual(10);
    for (const { alert, expr } of all) {
      // The metric names: what is left without label matchers, ranges, `by (…)` and function calls.
      const bare = expr.replace(/\{[^}]*\}/g, ' ').replace(/\[[^\]]*\]/g, ' ').replace(/\bby \([^)]*\)/g, ' ');
      const names = [...bare.matchAll(/\b([a-z_][a-z0-9_]*)\b(?!\s*\()/g)].map((m) => m[1]!).filter((n) => n !== 'up');
      expect(names.length + (/\bup\b/.test(expr) ? 1 : 0), alert).toBeGreaterThan(0);
      for (const name of names) expect(exposed, `${alert}: ${name}`).toContain(name);
    }
  });
});
