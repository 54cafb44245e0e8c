import { request as httpRequest } from 'node:http';
import { describe, expect, it } from 'vitest';
import { useStore, send, startServer, type HttpResult } from './server-process.js';

/**
 * SIGTERM: the server stops accepting connections, lets in-flight requests finish (including ones whose
 * body is still arriving), then exits 0. What it acknowledged is there after a restart.
 */

const store = useStore();

/**
 * A POST whose body is held back: `accepted` resolves when the server has parsed its headers (it answers
 * `100 Continue`), then half the body is sent; the rest goes when `finish()` is called.
 */
function slowPost(url: string, path: string, key: string, body: unknown) {
  const payload = Buffer.from(JSON.stringify(body));
  const half = Math.floor(payload.length / 2);
  let finish!: () => void;
  let accepted!: () => void;
  const acceptedP = new Promise<void>((r) => (accepted = r));
  const result = new Promise<HttpResult>((resolve, reject) => {
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': payload.length, expect: '100-continue' };
    const req = httpRequest(
      `${url}${path}`,
      { method: 'POST', agent: false, headers, timeout: 30_000 },
      (res) => {
        let data = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (data += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: data }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.on('continue', () => req.write(payload.subarray(0, half), () => accepted()));
    req.flushHeaders();
    finish = () => req.end(payload.subarray(half));
  });
  // Observed at once, so a failure is reported by the assertions below, not as an unhandled rejection.
  const settled = result.then(
    (r) => r,
    (err: unknown) => ({ status: 0, body: String(err) }),
  );
  return { result: settled, accepted: acceptedP, finish: () => finish() };
}

describe('SIGTERM', () => {
  it('finishes in-flight requests, refuses new connections, then exits 0', async () => {
    const server = await startServer(store.env);

    const slow = Array.from({ length: 5 }, (_, i) => slowPost(server.url, '/v1/contacts', store.key, { name: `In flight ${i}`, notes: 'x'.repeat(2000) }));
    await Promise.all(slow.map((s) => s.accepted)); // the server is reading all five bodies

    server.proc.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 700));

    // Still running (the slow bodies are not complete), but no longer listening.
    expect(server.proc.exitCode).toBeNull();
    await expect(fetch(`${server.url}/healthz`, { signal: AbortSignal.timeout(2000) })).rejects.toThrow();

    for (const s of slow) s.finish();
    const created = await Promise.all(slow.map((s) => s.result));
    for (const r of created) expect(r.status, r.body).toBe(201);

    const exit = await Promise.race([server.exited, new Promise<'hung'>((r) => setTimeout(() => r('hung'), 20_000))]);
    expect(exit, server.output()).toEqual({ code: 0, signal: null });

    // The acknowledged writes survived the shutdown.
    const again = await startServer(store.env);
    for (const r of created) {
      const id = (JSON.parse(r.body) as { data: { id: string } }).data.id;
      const got = await send(again.url, 'GET', `/v1/contacts/${id}`, store.key);
      expect(got.status, got.body).toBe(200);
    }
    again.proc.kill('SIGTERM');
    expect(await again.exited).toEqual({ code: 0, signal: null });
  }, 120_000);

  it('exits 0 promptly when idle', async () => {
    const server = await startServer(store.env);
    const started = Date.now();
    server.proc.kill('SIGTERM');
    expect(await server.exited).toEqual({ code: 0, signal: null });
    expect(Date.now() - started).toBeLessThan(10_000);
  }, 120_000);
});
