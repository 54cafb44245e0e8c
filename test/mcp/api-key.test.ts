import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Tenant } from '../helpers/app.js';
import { rawMcp, startLiveApp, v2Client, type LiveApp } from './helpers.js';

/** MCP_API_KEYS=true: a REST API key is a bearer token on /mcp and /sse; its permissions decide the tools. */

const textOf = (r: unknown) => JSON.parse((r as { content: { text: string }[] }).content[0]!.text);
const toolNames = async (origin: string, key: string) => ((await rawMcp(origin, key, { jsonrpc: '2.0', id: 1, method: 'tools/list' })).json.result.tools as { name: string }[]).map((t) => t.name);

describe('MCP with an API key', () => {
  let t: LiveApp;
  let a: Tenant;
  beforeAll(async () => {
    t = await startLiveApp({ env: { MCP_API_KEYS: 'true' } });
    a = await t.tenant();
  });
  afterAll(() => t?.close());

  it('contacts:read alone gives the read tools of contacts only, on both transports', async () => {
    const reader = await a.keyWith(['contacts:read']);
    const names = await toolNames(t.origin, reader.key);
    expect(names).toEqual(['contacts_read']);
    for (const transport of ['mcp', 'sse'] as const) {
      const client = await v2Client(t.origin, reader.key, transport);
      expect((await client.callTool({ name: 'contacts_read', arguments: { method: 'list' } })).isError).toBeFalsy();
      await expect(client.callTool({ name: 'contacts_write', arguments: { method: 'create', name: 'No' } })).rejects.toThrow(/not found/);
      await client.close();
    }
  });

  it('a full key writes as itself, in its own organization; events name the key', async () => {
    const client = await v2Client(t.origin, a.key, 'mcp');
    const created = textOf(await client.callTool({ name: 'contacts_write', arguments: { method: 'create', name: 'Via key' } }));
    expect((await a.request('GET', `/v1/contacts/${created.data.id}`)).json.data.name).toBe('Via key');
    const events = (await a.request('GET', '/v1/events?type=contact.created&limit=100')).json.data as { resourceId: string; actor: { type: string; id: string } }[];
    expect(events.find((e) => e.resourceId === created.data.id)!.actor).toEqual({ type: 'api_key', id: a.keyId });
    await client.close();
  });

  it('a wrong or revoked key gets the same 401 as any bad token', async () => {
    const res = await rawMcp(t.origin, 'sb_not_a_key', { jsonrpc: '2.0', id: 1, method: 'tools/list' });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer realm="OAuth", resource_metadata=/);
  });
});

describe('MCP without MCP_API_KEYS', () => {
  let t: LiveApp;
  let a: Tenant;
  beforeAll(async () => {
    t = await startLiveApp();
    a = await t.tenant();
  });
  afterAll(() => t?.close());

  it('refuses an API key as a bearer token (off by default)', async () => {
    expect((await rawMcp(t.origin, a.key, { jsonrpc: '2.0', id: 1, method: 'tools/list' })).status).toBe(401);
  });
});
