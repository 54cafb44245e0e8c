import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, expect } from 'vitest';
import { createApiKey, createOrganization, createUser } from '../../src/accounts/accounts.js';
import { buildApp, type AppDeps } from '../../src/app.js';
import { loadConfig, type Config } from '../../src/config.js';
import type { Database } from '../../src/db/client.js';
import { openTestDatabase } from './database.js';

export const TEST_ORIGIN = 'http://127.0.0.1:3999';

export interface TestApp {
  app: FastifyInstance;
  database: Database;
  config: Config;
  /** A new organization with an all-permissions key (or the given permissions). */
  tenant(opts?: { permissions?: string[]; credits?: number }): Promise<Tenant>;
  close(): Promise<void>;
}

export interface Tenant {
  orgId: string;
  key: string;
  keyId: string;
  /** A request with this tenant's key; `body` is sent as JSON. */
  request(method: InjectOptions['method'], url: string, body?: unknown, headers?: Record<string, string>): Promise<TestResponse>;
  /** Another key of the same organization with only these permissions. */
  keyWith(permissions: string[]): Promise<Tenant>;
  /** A user of this organization who can sign in on the consent page. */
  user(email?: string, password?: string): Promise<{ id: string; email: string; password: string }>;
}

export interface TestResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  json: any;
}

/** An injected response with its body parsed as JSON when it is JSON. */
export function toTestResponse(res: LightMyRequestResponse): TestResponse {
  let json: unknown;
  try {
    json = JSON.parse(res.body);
  } catch {
    json = undefined;
  }
  return { status: res.statusCode, headers: res.headers as TestResponse['headers'], body: res.body, json } as TestResponse;
}

/** The whole app on a fresh database, with `inject` helpers. */
/** The `data` of an answer, once its status is checked (the body shows when it differs). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function ok(res: { status: number; body: string; json: any }, status = 200): Record<string, any> {
  expect(res.status, res.body).toBe(status);
  return res.json.data;
}

export async function createTestApp(overrides: Partial<AppDeps> & { env?: Record<string, string> } = {}): Promise<TestApp> {
  const database = await openTestDatabase();
  const config = loadConfig({ PUBLIC_URL: TEST_ORIGIN, LOG_LEVEL: 'silent', API_KEY_CACHE_MS: '0', TRUST_PROXY: 'true', ...overrides.env });
  const { env: _env, ...deps } = overrides;
  const app = await buildApp({ config, database, ...deps });
  await app.ready();

  const send = async (key: string | undefined, method: InjectOptions['method'], url: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await app.inject({
      method,
      url,
      headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
      ...(body !== undefined ? { payload: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
    });
    return toTestResponse(res);
  };

  const tenantFor = (orgId: string, k: { key: string; id: string }): Tenant => ({
    orgId,
    key: k.key,
    keyId: k.id,
    request: (method, url, body, headers) => send(k.key, method, url, body, headers),
    keyWith: async (permissions) => tenantFor(orgId, await createApiKey(database.db, { orgId, permissions })),
    user: async (email = `user-${Math.random().toString(36).slice(2)}@example.test`, password = 'correct horse battery staple') => {
      const u = await createUser(database.db, { orgId, email, password });
      return { id: u.id, email, password };
    },
  });

  return {
    app,
    database,
    config,
    async tenant(opts = {}) {
      const org = await createOrganization(database.db, { name: 'Test org', credits: opts.credits });
      return tenantFor(org.id, await createApiKey(database.db, { orgId: org.id, permissions: opts.permissions }));
    },
    async close() {
      await app.close();
      await database.close();
    },
  };
}

/** A request without any API key. */
export const anonymous = (t: TestApp, method: InjectOptions['method'], url: string) => t.app.inject({ method, url });

/**
 * The app and two organizations (`a`, `b`, each with an all-permissions key) for one test file: created
 * before its tests, closed after them. The returned objects forward to the ones the hook creates.
 */
export function useTestApp(opts: { credits?: number; app?: Parameters<typeof createTestApp>[0] } = {}): { t: TestApp; a: Tenant; b: Tenant } {
  const state: { t?: TestApp; a?: Tenant; b?: Tenant } = {};
  const tenant = opts.credits === undefined ? {} : { credits: opts.credits };
  beforeAll(async () => {
    state.t = await createTestApp(opts.app);
    state.a = await state.t.tenant(tenant);
    state.b = await state.t.tenant(tenant);
  });
  afterAll(() => state.t?.close());
  const later = <K extends keyof typeof state>(key: K) =>
    new Proxy({} as NonNullable<(typeof state)[K]>, {
      get(_target, prop) {
        const value = state[key];
        if (!value) throw new Error(`useTestApp: "${key}" is used before the beforeAll hook ran`);
        const member = (value as unknown as Record<PropertyKey, unknown>)[prop];
        return typeof member === 'function' ? member.bind(value) : member;
      },
    });
  return { t: later('t'), a: later('a'), b: later('b') };
}
