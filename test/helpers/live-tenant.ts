import { afterAll, beforeAll, expect } from 'vitest';
import { setGrantCategories } from '../../src/oauth/grants.js';
import { mintToken, rawMcp, startLiveApp, v1Client, type LiveApp } from '../mcp/helpers.js';
import type { Tenant } from './app.js';
import { later } from './later.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/**
 * The whole app listening (`startLiveApp`, PUBLIC_URL its own origin) and one organization, for the tests of a
 * file: made before them, closed after.
 */
export function useLiveTenant(env: Record<string, string> = {}): { t: LiveApp; a: Tenant } {
  const state: { t?: LiveApp; a?: Tenant } = {};
  beforeAll(async () => {
    state.t = await startLiveApp({ env });
    state.a = await state.t.tenant();
  });
  afterAll(() => state.t?.close());
  return { t: later('t', () => state.t), a: later('a', () => state.a) };
}

/** One `tools/call` over the raw MCP endpoint, answered as received. */
export const callTool = (t: LiveApp, token: string, name: string, args: Json) =>
  rawMcp(t.origin, token, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } });

/**
 * An assistant of a person of the organization, connected over MCP with the official SDK's client, that may
 * send (the person gave that consent on the consent page). `call` answers a tool's `data`, failing the test
 * on a tool error; close the client at the end.
 */
export async function connectAssistant(t: LiveApp, a: Tenant) {
  const person = await a.user();
  const minted = await mintToken(t, a, { userId: person.id });
  await setGrantCategories(t.database.db, minted.grant.id, minted.grant.categories, () => new Date(), false, true);
  const client = await v1Client(t.origin, minted.token, 'mcp');
  const call = async (name: string, args: Json) => {
    const res = (await client.callTool({ name, arguments: args })) as { isError?: boolean; content: { text: string }[]; structuredContent?: Json };
    expect(res.isError, res.content[0]?.text).toBeFalsy();
    return res.structuredContent!.data as Json;
  };
  return { client, call };
}
