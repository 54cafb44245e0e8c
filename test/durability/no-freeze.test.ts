import { describe, expect, it } from 'vitest';
import { send, startServer, useStore, type ServerProcess } from './server-process.js';

/**
 * No input freezes the service: a message whose fields are 100,000 characters long (a sender of spaces
 * and one letter used to make a condition's regular expression backtrack for seconds), matched by an
 * automation's sender condition, is handled while `/healthz` keeps answering. Measured from outside, on
 * the real server process whose worker evaluates the condition.
 */

const store = useStore();
const LONG = 100_000;

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

async function call(server: ServerProcess, method: string, path: string, body?: unknown): Promise<Json> {
  const res = await send(server.url, method, path, store.key, body);
  expect(res.status, res.body).toBeLessThan(300);
  return JSON.parse(res.body).data as Json;
}

/** How long one /healthz takes, or Infinity when it does not answer within `limitMs`. */
async function healthz(server: ServerProcess, limitMs: number): Promise<number> {
  const started = performance.now();
  try {
    const res = await fetch(`${server.url}/healthz`, { signal: AbortSignal.timeout(limitMs) });
    await res.text();
    return res.ok ? performance.now() - started : Infinity;
  } catch {
    return Infinity;
  }
}

async function until<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const v = await fn();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('a message with 100,000-character fields', () => {
  it('is matched against a sender condition while /healthz answers promptly', async () => {
    const server = await startServer(store.env);
    const automation = await call(server, 'POST', '/v1/automations', { name: 'Billing', instructions: 'When a new email arrives from billing@acme.test, mark it as read' });
    await until('the plan', async () => ((await call(server, 'GET', `/v1/automations/${automation.id}`)).status === 'pending_approval' ? true : undefined));
    const approved = await call(server, 'POST', `/v1/automations/${automation.id}/approve`);
    expect(approved.status).toBe('active');
    expect(JSON.stringify(approved.condition)).toContain('sender');

    // The baseline: /healthz on this machine, now.
    const baseline: number[] = [];
    for (let i = 0; i < 10; i++) baseline.push(await healthz(server, 10_000));
    // Generous: storing 100,000-character fields takes the embedded database a moment on a busy machine, while
    // the backtracking pattern this guards against held the process for seconds at 2,400 characters (and
    // practically forever at 100,000).
    const limit = Math.max(5_000, 20 * Math.max(...baseline));

    // Probe /healthz every 20 ms while the hostile messages are stored and matched.
    const latencies: number[] = [];
    let probing = true;
    const probe = (async () => {
      while (probing) {
        latencies.push(await healthz(server, limit));
        await new Promise((r) => setTimeout(r, 20));
      }
    })();

    const spaces = ' '.repeat(LONG - 1);
    const hostile = [
      { sender: `${spaces}a`, recipient: `${spaces}b`, text: `${spaces}c`, summary: `${'<'.repeat(9_999)}d`, category: `"${spaces}`, metadata: { note: `${spaces}<` } },
      { sender: `"${' '.repeat(LONG - 20)}<billing@acme.test`, recipient: { name: spaces, email: `${spaces}x` }, text: `{{${' '.repeat(LONG - 2)}` },
      { sender: { name: `${spaces}a`, email: `${spaces}billing@acme.test` }, text: 'x'.repeat(LONG) },
    ];
    const stored: Json[] = [];
    for (const fields of hostile) stored.push(await call(server, 'POST', '/v1/messages', { direction: 'incoming', type: 'email', ...fields }));
    // A matching message sent after them is handled, so the worker got past the hostile ones.
    const normal = await call(server, 'POST', '/v1/messages', { direction: 'incoming', type: 'email', sender: 'Billing <billing@acme.test>', text: 'Invoice' });
    await until('the normal message to be handled', async () => ((await call(server, 'GET', `/v1/messages/${normal.id}`)).readAt ? true : undefined));
    probing = false;
    await probe;

    expect(latencies.length).toBeGreaterThan(0);
    expect(Math.max(...latencies), `baseline ${baseline.map((b) => b.toFixed(1)).join(', ')} ms; during ${latencies.length} probes`).toBeLessThan(limit);
    // A condition examines the first 10,000 characters only: an address after 99,980 spaces is not read.
    for (const m of stored) expect((await call(server, 'GET', `/v1/messages/${m.id}`)).readAt).toBeNull();
    const runs = await call(server, 'GET', `/v1/automations/${automation.id}/executions`);
    expect(runs.map((r: Json) => r.eventId)).toHaveLength(1);
  }, 180_000);
});
