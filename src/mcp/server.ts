import { idempotencyArgument, requestHash, runIdempotent } from '../idempotency.js';
import { notifyEventsCommitted } from '../modules/events/events.signal.js';
import { ProtocolError, ProtocolErrorCode, Server, type CallToolResult } from '@modelcontextprotocol/server';
import type { FastifyBaseLogger } from 'fastify';
import { toAppError } from '../core/errors.js';
import { operationPermission, successStatus } from '../core/operation.js';
import { categoryPermissions, hasPermission } from '../core/permissions.js';
import type { Db } from '../db/client.js';
import type { Grant } from '../oauth/grants.js';
import { runOperation } from '../run-operation.js';
import { VERSION } from '../version.js';
import type { ToolCatalog, ToolEntry } from './tools.js';

export interface McpServerDeps {
  db: Db;
  catalog: ToolCatalog;
  log: FastifyBaseLogger;
}

/**
 * The grant the current request was authenticated with. `/mcp` builds a server per request, so it is
 * constant there; an `/sse` session keeps one server and re-reads the grant on every POST.
 */
export type GrantSource = Grant | (() => Grant);

const INSTRUCTIONS =
  "Switchboard: contacts, messages, customers, businesses, folders, automations, domains, events and webhooks of the signed-in user's organization. " +
  'Each tool mirrors one REST operation of the service: same input fields, same `{ data, meta? }` result, same error codes ' +
  '(an error result carries `{ "error": { "code", "message", "details"? } }`). List tools take `limit` (10 by default), `offset` and `sortOrder`; `meta.pagination` says whether more pages follow. ' +
  'Records carry every field of their type (null when unset). Creating tools take an optional `idempotencyKey`: a retry with the same key ' +
  'and arguments (within 24 hours) returns the first result; the same key with other arguments is an IDEMPOTENCY_KEY_REUSED error.';

/**
 * An MCP server for one grant: only the tools of the grant's categories are listed or callable.
 * The low-level `Server` is used (not `McpServer`) so that nothing is registered or converted per
 * request: the tool definitions and their JSON Schemas come precomputed from the catalog.
 */
export function buildMcpServer(grantSource: GrantSource, deps: McpServerDeps): Server {
  const grant = typeof grantSource === 'function' ? grantSource : () => grantSource;
  const server = new Server({ name: 'switchboard', version: VERSION }, { capabilities: { tools: { listChanged: false } }, instructions: INSTRUCTIONS });

  /** What the grant may do: read and write in its categories, or an API key's own permissions. */
  const permissionsOf = (g: Grant) => g.apiKey?.permissions ?? categoryPermissions(g.categories, g.readOnly);
  const offered = (entry: ToolEntry, g: Grant) => g.categories.includes(entry.category) && hasPermission(permissionsOf(g), operationPermission(entry.op));

  /** The tool, when it exists and the grant allows it; a tool outside the grant does not exist. */
  const allowedTool = (name: string): ToolEntry | undefined => {
    const entry = deps.catalog.get(name);
    return entry && offered(entry, grant()) ? entry : undefined;
  };

  server.setRequestHandler('tools/list', () => {
    const g = grant();
    const tools = [];
    for (const entry of deps.catalog.values()) if (offered(entry, g)) tools.push(entry.definition);
    return { tools };
  });

  server.setRequestHandler('tools/call', async (request) => {
    const name = request.params.name;
    const entry = allowedTool(name);
    // The same answer as the SDK's McpServer gives for a tool it does not know.
    if (!entry) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Tool ${name} not found`);
    const g = grant();
    let result: CallToolResult;
    try {
      const actor = g.apiKey ? { type: 'api_key' as const, id: g.apiKey.id, depth: 0 } : { type: 'user' as const, id: g.userId, depth: 0 };
      const caller = { orgId: g.organizationId, actor, permissions: permissionsOf(g), db: deps.db };
      const { idempotencyKey, ...args } = request.params.arguments ?? {};
      const key = entry.op.method === 'POST' ? idempotencyArgument(idempotencyKey) : undefined;
      let envelope: unknown;
      if (key === undefined) {
        envelope = await runOperation(entry.op, entry.op.method === 'POST' ? args : (request.params.arguments ?? {}), caller);
      } else {
        const scope = { callerId: g.id, orgId: g.organizationId, key, hash: requestHash('TOOL', name, args) };
        envelope = (await runIdempotent(deps.db, scope, successStatus(entry.op), (tx) => runOperation(entry.op, args, caller, tx))).body;
        notifyEventsCommitted();
      }
      // One serialisation gives both the text copy and plain JSON (Dates become ISO strings, as in REST).
      const text = JSON.stringify(envelope);
      result = { content: [{ type: 'text', text }], structuredContent: JSON.parse(text) as Record<string, unknown> };
    } catch (err) {
      const appError = toAppError(err);
      if (appError.status >= 500) deps.log.error({ err, tool: name }, appError.code === 'SERVICE_UNAVAILABLE' ? 'database unavailable' : 'unexpected error in tool');
      // No structuredContent: it would have to match the output schema, which describes success only.
      result = { content: [{ type: 'text', text: JSON.stringify(appError.toBody()) }], isError: true };
    }
    return server.projectCallToolResult(result, entry.definition.outputSchema);
  });

  return server;
}
