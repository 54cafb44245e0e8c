import { describe, expect, it } from 'vitest';
import pino from 'pino';
import type { Db } from '../../src/db/client.js';
import { fastJsonAnswer } from '../../src/mcp/fast-path.js';
import { createToolRunner } from '../../src/mcp/server.js';
import { buildToolCatalog } from '../../src/mcp/tools.js';
import type { Grant } from '../../src/oauth/grants.js';
import { operations } from '../../src/operations.js';

// tools/list and the refusals never touch the database.
const runner = createToolRunner({ db: undefined as unknown as Db, catalog: buildToolCatalog(operations), log: pino({ level: 'silent' }), readTimeoutMs: 2000 });
const grant: Grant = { id: 'g', userId: 'u', organizationId: 'o', clientId: 'c', scopes: ['mcp'], categories: ['contacts'], resource: 'http://x/mcp', readOnly: false };
const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' };
const list = { jsonrpc: '2.0', id: 1, method: 'tools/list' };

describe('the MCP JSON fast path', () => {
  it('answers a 2025-era tools/list itself, from the list serialized once per permission set', async () => {
    const answer = await fastJsonAnswer(headers, list, grant, runner);
    const parsed = JSON.parse(answer!) as { jsonrpc: string; id: number; result: { tools: { name: string }[] } };
    expect(parsed).toMatchObject({ jsonrpc: '2.0', id: 1 });
    expect(parsed.result.tools.every((tool) => tool.name.startsWith('contacts_'))).toBe(true);
    expect(runner.list(grant)).toBe(runner.list({ ...grant, id: 'other grant' }));
    expect(runner.list({ ...grant, readOnly: true }).tools.length).toBeLessThan(parsed.result.tools.length);
  });

  it('leaves everything else to the SDK', async () => {
    const declined: Array<[Record<string, string>, unknown]> = [
      [{ ...headers, 'mcp-protocol-version': '2026-07-28' }, list],
      [{ 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, list],
      [{ ...headers, accept: 'application/json' }, list],
      [{ ...headers, 'content-type': 'text/plain' }, list],
      [headers, [list]],
      [headers, { jsonrpc: '2.0', method: 'tools/list' }],
      [headers, { jsonrpc: '2.0', id: 1.5, method: 'tools/list' }],
      [headers, { jsonrpc: '2.0', id: 1, method: 'initialize', params: {} }],
      [headers, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' } } }],
      [headers, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: { cursor: 5 } }],
      [headers, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: { other: true } }],
      [headers, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'messages_read' } }],
      [headers, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'contacts_read', arguments: [] } }],
      [headers, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 7 } }],
    ];
    for (const [h, body] of declined) expect(await fastJsonAnswer(h, body, grant, runner), JSON.stringify([h, body])).toBeUndefined();
  });
});
