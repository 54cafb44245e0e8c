import { createServer, connect, type Server, type Socket, type AddressInfo } from 'node:net';
import pg from 'pg';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey, createOrganization } from '../../src/accounts/accounts.js';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { openDatabase, type Database } from '../../src/db/client.js';
import { openTestDatabase, testDbKind } from '../helpers/database.js';

/**
 * A database outage, without touching the shared PostgreSQL server: the app talks to PostgreSQL through
 * a TCP proxy on 127.0.0.1 that this test closes (refusing new connections and cutting open ones) and
 * reopens, or stalls (holding connections open and answering nothing). With the service's default timeouts,
 * reads (REST, MCP tools, /readyz) must answer 503 SERVICE_UNAVAILABLE within 2 s and writes within 5 s, and
 * the service must recover by itself. (The embedded database runs in-process and cannot become unreachable.)
 */

class TcpProxy {
  private server: Server | undefined;
  private sockets = new Set<Socket>();
  port = 0;
  /** While true, bytes are swallowed both ways: connections stay open and nothing is answered. */
  stalled = false;
  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  async open() {
    this.server = createServer((client) => {
      const upstream = connect(this.targetPort, this.targetHost);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.on('data', (d: Buffer) => void (this.stalled || upstream.write(d)));
      upstream.on('data', (d: Buffer) => void (this.stalled || client.write(d)));
    });
    await new Promise<void>((resolve, reject) => {
      this.server!.once('error', reject);
      this.server!.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (this.server.address() as AddressInfo).port;
  }

  /** Refuses new connections and cuts the open ones, like a database that went away. */
  async close() {
    const closed = new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    await closed;
    this.server = undefined;
  }
}

const pgUrl = process.env.SB_TEST_PG_URL;
const config = loadConfig({ PUBLIC_URL: 'http://127.0.0.1:3999', LOG_LEVEL: 'silent', API_KEY_CACHE_MS: '0', MCP_API_KEYS: 'true' });
/** The bounds docs/operating.md promises. */
const READ_BOUND_MS = 2000;
const WRITE_BOUND_MS = 5000;

describe.skipIf(testDbKind !== 'postgres' || !pgUrl)('database outage (PostgreSQL behind a proxy)', () => {
  let direct: Database & { url?: string };
  let proxied: Database;
  let proxy: TcpProxy;
  let app: FastifyInstance;
  let key: string;

  beforeAll(async () => {
    direct = await openTestDatabase();
    const target = new URL(direct.url!);
    proxy = new TcpProxy(target.hostname, Number(target.port || 5432));
    await proxy.open();
    const viaProxy = new URL(direct.url!);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(proxy.port);
    proxied = await openDatabase({ url: viaProxy.toString(), poolSize: 4, statementTimeoutMs: config.dbStatementTimeoutMs });
    // API_KEY_CACHE_MS=0: every request looks its key up, so the outage hits authentication too.
    app = await buildApp({ config, database: proxied });
    await app.ready();
    const org = await createOrganization(direct.db, { name: 'Outage' });
    key = (await createApiKey(direct.db, { orgId: org.id })).key;
  });
  afterAll(async () => {
    await app?.close();
    await proxied?.close().catch(() => {});
    await proxy?.close();
    await direct?.close();
  });

  const timed = async (method: 'GET' | 'POST' | 'PATCH', url: string, body?: unknown, headers: Record<string, string> = {}) => {
    const started = performance.now();
    const res = await app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}), ...headers },
      ...(body ? { payload: JSON.stringify(body) } : {}),
    });
    return { res, ms: performance.now() - started };
  };
  /** A read-only MCP tool call on /mcp with the API key as bearer token. */
  const mcpCall = (name: string, args: Record<string, unknown>) =>
    timed('POST', '/mcp', { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } }, { accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' });
  const expectUnavailable = (res: Awaited<ReturnType<typeof timed>>['res']) => {
    expect(res.statusCode, res.body).toBe(503);
    expect(res.json().error).toEqual({ code: 'SERVICE_UNAVAILABLE', message: expect.any(String) });
    expect(res.json().error.message).not.toMatch(/ECONN|127\.0\.0\.1|postgres|timeout/i);
    expect(res.headers['retry-after']).toBeDefined();
    expect(res.headers['x-request-id']).toBeTruthy();
  };

  it('works while the database is up', async () => {
    expect((await timed('GET', '/v1/contacts')).res.statusCode).toBe(200);
    expect((await timed('POST', '/v1/contacts', { name: 'Before' })).res.statusCode).toBe(201);
    expect((await app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
    const mcp = await mcpCall('contacts_read', { method: 'list' });
    expect(mcp.res.statusCode, mcp.res.body).toBe(200);
    expect(mcp.res.json().result.structuredContent.data).toHaveLength(1);
  });

  it('answers 503 SERVICE_UNAVAILABLE within 2 s while it is down, /readyz 503, then recovers without a restart', async () => {
    await proxy.close();
    for (const [method, url, body] of [
      ['GET', '/v1/contacts', undefined],
      ['POST', '/v1/contacts', { name: 'During' }],
      ['GET', '/v1/contacts/9b2f6c1e-3f1a-4c59-8d1e-2f1b7e0c4a11', undefined],
    ] as const) {
      const { res, ms } = await timed(method, url, body);
      expectUnavailable(res);
      expect(ms, `${method} ${url} took ${Math.round(ms)} ms`).toBeLessThan(READ_BOUND_MS);
    }
    const started = performance.now();
    const ready = await app.inject({ method: 'GET', url: '/readyz' });
    expect(ready.statusCode).toBe(503);
    expect(performance.now() - started).toBeLessThan(2500);

    await proxy.open();
    const after = await timed('GET', '/v1/contacts');
    expect(after.res.statusCode, after.res.body).toBe(200);
    expect((await timed('POST', '/v1/contacts', { name: 'After' })).res.statusCode).toBe(201);
    expect((await app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
    const names = (await timed('GET', '/v1/contacts?limit=100')).res.json().data.map((c: { name: string }) => c.name);
    expect(names.sort()).toEqual(['After', 'Before']);
  });

  it('a row lock held elsewhere answers a write 503 within 5 s, not a hanging request; reads of the row go on', async () => {
    const created = await timed('POST', '/v1/contacts', { name: 'Locked' });
    const id = created.res.json().data.id as string;
    const holder = new pg.Client({ connectionString: direct.url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM contacts WHERE id = $1 FOR UPDATE', [id]);
      expect((await timed('POST', '/v1/contacts', { name: 'Unrelated' })).res.statusCode).toBe(201); // other rows are not held up
      const patched = await timed('PATCH', `/v1/contacts/${id}`, { name: 'Waits' });
      expectUnavailable(patched.res);
      expect(patched.ms, `took ${Math.round(patched.ms)} ms`).toBeLessThan(WRITE_BOUND_MS);
      expect((await timed('GET', `/v1/contacts/${id}`)).res.json().data.name).toBe('Locked');
    } finally {
      await holder.query('ROLLBACK').catch(() => {});
      await holder.end();
    }
    expect((await timed('GET', `/v1/contacts/${id}`)).res.json().data.name).toBe('Locked');
  });

  it('a database that stops answering (a stalled connection) answers reads 503 within 2 s and writes within 5 s', async () => {
    await Promise.all([timed('GET', '/v1/contacts'), timed('GET', '/v1/contacts')]); // connections are open and idle
    proxy.stalled = true;
    try {
      const [write, list, one, tool, ready] = await Promise.all([
        timed('POST', '/v1/contacts', { name: 'Stalled' }),
        timed('GET', '/v1/contacts'),
        timed('GET', '/v1/contacts/9b2f6c1e-3f1a-4c59-8d1e-2f1b7e0c4a11'),
        mcpCall('contacts_read', { method: 'list' }),
        (async () => {
          const started = performance.now();
          const res = await app.inject({ method: 'GET', url: '/readyz' });
          return { res, ms: performance.now() - started };
        })(),
      ]);
      for (const [name, read] of Object.entries({ list, one, tool })) {
        expectUnavailable(read.res);
        expect(read.ms, `${name} took ${Math.round(read.ms)} ms`).toBeLessThan(READ_BOUND_MS);
      }
      expect(ready.res.statusCode).toBe(503);
      expect(ready.ms).toBeLessThan(READ_BOUND_MS);
      expectUnavailable(write.res);
      expect(write.ms, `the write took ${Math.round(write.ms)} ms`).toBeLessThan(WRITE_BOUND_MS);
    } finally {
      proxy.stalled = false;
    }
    // The stalled connections are given up; fresh ones serve the next requests.
    let after = await timed('GET', '/v1/contacts');
    for (let i = 0; i < 5 && after.res.statusCode !== 200; i++) after = await timed('GET', '/v1/contacts');
    expect(after.res.statusCode).toBe(200);
  });
});
