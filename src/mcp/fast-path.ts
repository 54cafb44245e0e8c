import type { IncomingHttpHeaders } from 'node:http';
import { isJsonContentType, PROTOCOL_VERSION_META_KEY, SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/server';
import type { Grant } from '../oauth/grants.js';
import type { ToolRunner } from './server.js';

/**
 * The common case of `/mcp`, answered without the SDK's per-request machinery: a single, well-formed
 * `tools/list` or `tools/call` request of a 2025-era client (named by its MCP-Protocol-Version header)
 * that accepts JSON. For those, the SDK would build a server, a web Request, a transport and a Response
 * around exactly the handler this calls (the same ToolRunner), and answer 200 with the JSON-RPC result;
 * that construction cost two thirds of an MCP call. Anything else (another method, a batch, a notification,
 * a 2026-07-28 envelope, unusual params, an unknown tool, a header the SDK would refuse) returns undefined
 * and goes to the SDK, which answers it, errors included, as it always does.
 */

const LEGACY_VERSIONS = new Set<string>(SUPPORTED_PROTOCOL_VERSIONS);
const LIST_PARAMS = new Set(['cursor', '_meta']);
const CALL_PARAMS = new Set(['name', 'arguments', '_meta']);

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const header = (h: string | string[] | undefined) => (typeof h === 'string' ? h : undefined);

/** `_meta` the SDK would treat as a 2025-era request's: absent, or an object without the 2026-07-28 envelope. */
const legacyMeta = (meta: unknown) => meta === undefined || (isPlainObject(meta) && !(PROTOCOL_VERSION_META_KEY in meta));

const onlyKeys = (params: Record<string, unknown>, allowed: Set<string>) => Object.keys(params).every((k) => allowed.has(k));

/** The JSON text of the answer, or undefined when the SDK must answer. */
export async function fastJsonAnswer(headers: IncomingHttpHeaders, body: unknown, grant: Grant, runner: ToolRunner): Promise<string | undefined> {
  const version = header(headers['mcp-protocol-version']);
  const accept = header(headers.accept) ?? '';
  if (version === undefined || !LEGACY_VERSIONS.has(version)) return undefined;
  if (!accept.includes('application/json') || !accept.includes('text/event-stream') || !isJsonContentType(header(headers['content-type']) ?? null)) return undefined;
  if (!isPlainObject(body) || body.jsonrpc !== '2.0') return undefined;
  const id = body.id;
  if (!(typeof id === 'string' || (typeof id === 'number' && Number.isInteger(id)))) return undefined;
  const params = body.params ?? {};
  if (!isPlainObject(params) || !legacyMeta(params._meta)) return undefined;
  const answer = (resultJson: string) => `{"result":${resultJson},"jsonrpc":"2.0","id":${JSON.stringify(id)}}`;

  if (body.method === 'tools/list') {
    if (!onlyKeys(params, LIST_PARAMS) || (params.cursor !== undefined && typeof params.cursor !== 'string')) return undefined;
    return answer(runner.list(grant).json);
  }
  if (body.method === 'tools/call') {
    if (!onlyKeys(params, CALL_PARAMS) || typeof params.name !== 'string' || (params.arguments !== undefined && !isPlainObject(params.arguments))) return undefined;
    const entry = runner.find(grant, params.name);
    if (!entry) return undefined;
    // For an object result and an object output schema the 2025-era projection of the SDK is the identity.
    return answer(await runner.callJson(grant, entry, params.arguments as Record<string, unknown> | undefined));
  }
  return undefined;
}
