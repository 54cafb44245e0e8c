import { randomUUID } from 'node:crypto';
import { idempotencyArgument, requestHash, runIdempotent } from '../idempotency.js';
import { CommittedWork } from '../modules/events/events.signal.js';
import { ProtocolError, ProtocolErrorCode, Server, type CallToolResult } from '@modelcontextprotocol/server';
import type { FastifyBaseLogger } from 'fastify';
import { fieldError, logServerError, toAppError } from '../core/errors.js';
import { withDeadline } from '../core/deadline.js';
import { readsOnly, successStatus, type Envelope, type Operation } from '../core/operation.js';
import { envelopeJson } from '../core/json-text.js';
import { categoryPermissions, hasPermission } from '../core/permissions.js';
import type { Db } from '../db/client.js';
import type { Grant } from '../oauth/grants.js';
import { runOperation } from '../run-operation.js';
import { VERSION } from '../version.js';
import type { ToolCatalog, ToolDefinition, ToolEntry } from './tools.js';
import { LRUCache } from 'lru-cache';

export interface McpServerDeps {
  db: Db;
  catalog: ToolCatalog;
  log: FastifyBaseLogger;
  /** A read-only tool (a GET operation) answers SERVICE_UNAVAILABLE when the database has not answered within this (ms). */
  readTimeoutMs: number;
  /** `PUBLIC_URL`: the approval links in answers are absolute. */
  publicUrl?: string;
}

/**
 * The grant the current request was authenticated with. `/mcp` builds a server per request, so it is
 * constant there; an `/sse` session keeps one server and re-reads the grant on every POST.
 */
export type GrantSource = Grant | (() => Grant);

const INSTRUCTIONS =
  "Switchboard: contacts, messages, customers, businesses, folders, automations, domains, events and webhooks of the signed-in user's organization. " +
  'Per category up to three tools: `<category>_read`, `<category>_write` (create and change) and `<category>_delete`; each takes `method` (one of the methods its description lists) plus that method\'s arguments. ' +
  'Every method is one REST operation of the service: same input fields, same `{ data, meta? }` result, same error codes ' +
  '(an error result carries `{ "error": { "code", "message", "details"? } }`). List methods take `limit` (10 by default), `offset` and `sortOrder`; `meta.pagination` says whether more pages follow. ' +
  'Records carry every field of their type (null when unset). Creating methods take an optional `idempotencyKey`: a retry with the same key ' +
  'and arguments (within 24 hours) returns the first result; the same key with other arguments is an IDEMPOTENCY_KEY_REUSED error. ' +
  'Methods that send email or text messages need the send consent: the person ticked "Send email and text messages on your behalf" when connecting you (else FORBIDDEN; they can add it at /account/apps). ' +
  'You cannot make an automation active: `approve`, `resume` or `status: "active"` answer `approvalUrl`, a page where a person of the organization reviews and approves it; give them the link.';

/** Per grant (a verified token's grant is kept, unchanged, while the token lives): what it may do. */
const grantPermissions = new WeakMap<Grant, readonly string[]>();

/**
 * What the grant may do: read and write in its categories (or read only), or an API key's own permissions.
 * Computed once per grant, so a call (its tool looked up, then run) and the calls after it reuse it.
 */
function permissionsOf(g: Grant): readonly string[] {
  let found = grantPermissions.get(g);
  if (!found) grantPermissions.set(g, (found = g.apiKey?.permissions ?? categoryPermissions(g.categories, g.readOnly, g.send)));
  return found;
}

/** The tools of a grant: listed, and called through the operation table. Shared by the SDK server and the JSON fast path. */
export interface ToolRunner {
  /** The grant's tools, and the same list serialized once (`{"tools":[…]}`), per distinct set of permissions. */
  list(grant: Grant): { tools: ToolDefinition[]; json: string };
  /** The tool, when it exists and the grant allows it; a tool outside the grant does not exist. */
  find(grant: Grant, name: string): ToolEntry | undefined;
  call(grant: Grant, entry: ToolEntry, args: Record<string, unknown> | undefined): Promise<CallToolResult>;
  /** The same result as `call`, already as JSON text (the envelope is serialized once, never parsed back). */
  callJson(grant: Grant, entry: ToolEntry, args: Record<string, unknown> | undefined): Promise<string>;
}

/** A tool's outcome: the envelope's JSON text (and a sentence for the person, when one must act), or the error body's. */
type Outcome = { ok: true; text: string; notice?: string | undefined } | { ok: false; text: string };

/** The approval link an answer carries (`data.approvalUrl`): the call asked a person instead of activating. */
export function approvalLinkOf(envelope: unknown): string | undefined {
  const data = (envelope as { data?: { approvalUrl?: unknown } } | undefined)?.data;
  return typeof data?.approvalUrl === 'string' ? data.approvalUrl : undefined;
}

/** What the assistant tells its user when an activation waits for a person (the link also in `structuredContent`). */
export const approvalNotice = (url: string) =>
  `Not active yet: an assistant cannot make an automation active. A person of the organization must review and approve it at ${url} (the automation keeps its status until then).`;

const LIST_CACHE_MAX = 256;

export function createToolRunner(deps: McpServerDeps): ToolRunner {
  // Every method of a tool needs the same permission (reading, or writing, in its category): `entry.permissions`.
  const offered = (entry: ToolEntry, g: Grant, permissions: readonly string[]) =>
    g.categories.includes(entry.category) && entry.permissions.every((p) => hasPermission(permissions, p));
  // Grants with the same categories and permissions see the same list: it is filtered and serialized once.
  const lists = new LRUCache<string, { tools: ToolDefinition[]; json: string }>({ max: LIST_CACHE_MAX });

  return {
    list(g) {
      const permissions = permissionsOf(g);
      const key = `${g.categories.join(',')}|${permissions.join(',')}`;
      let hit = lists.get(key);
      if (!hit) {
        const tools = [...deps.catalog.values()].filter((entry) => offered(entry, g, permissions)).map((entry) => entry.definition);
        hit = { tools, json: JSON.stringify({ tools }) };
        lists.set(key, hit);
      }
      return hit;
    },

    find(g, name) {
      const entry = deps.catalog.get(name);
      return entry && offered(entry, g, permissionsOf(g)) ? entry : undefined;
    },

    async call(g, entry, args) {
      const outcome = await run(g, entry, args);
      // No structuredContent on errors: it would have to match the output schema, which describes success only.
      if (!outcome.ok) return { content: [{ type: 'text', text: outcome.text }], isError: true };
      const notice = outcome.notice ? [{ type: 'text' as const, text: outcome.notice }] : [];
      return { content: [{ type: 'text', text: outcome.text }, ...notice], structuredContent: JSON.parse(outcome.text) as Record<string, unknown> };
    },

    async callJson(g, entry, args) {
      const outcome = await run(g, entry, args);
      const notice = outcome.ok && outcome.notice ? `,{"type":"text","text":${JSON.stringify(outcome.notice)}}` : '';
      const content = `[{"type":"text","text":${JSON.stringify(outcome.text)}}${notice}]`;
      return outcome.ok ? `{"content":${content},"structuredContent":${outcome.text}}` : `{"content":${content},"isError":true}`;
    },
  };

  /** The operation a call names with `method`; a missing or unknown method is a validation error naming the tool's methods. */
  function methodOf(entry: ToolEntry, method: unknown): Operation {
    const op = typeof method === 'string' ? entry.methods.get(method) : undefined;
    if (op) return op;
    const known = [...entry.methods.keys()].join(', ');
    throw fieldError('method', method === undefined ? `Required: one of ${known}` : `${entry.name} has no method ${JSON.stringify(method)}; one of ${known}`);
  }

  async function run(g: Grant, entry: ToolEntry, rawArgs: Record<string, unknown> | undefined): Promise<Outcome> {
    const name = entry.name;
    try {
      const actor = g.apiKey ? { type: 'api_key' as const, id: g.apiKey.id, depth: 0 } : { type: 'user' as const, id: g.userId, grantId: g.id, depth: 0 };
      const caller = { orgId: g.organizationId, actor, permissions: permissionsOf(g), db: deps.db, publicUrl: deps.publicUrl };
      const { method, ...input } = rawArgs ?? {};
      const op = methodOf(entry, method);
      // `idempotencyKey` is an argument of creating methods only; elsewhere it is an unknown field like any other.
      const { idempotencyKey, ...args } = input;
      const key = op.method === 'POST' ? idempotencyArgument(idempotencyKey) : undefined;
      let envelope: Envelope;
      if (key === undefined) {
        const running = runOperation(op, op.method === 'POST' ? args : input, { ...caller, jsonText: true });
        envelope = await (readsOnly(op) ? withDeadline(running, deps.readTimeoutMs) : running);
      } else {
        const scope = { callerId: g.id, orgId: g.organizationId, key, hash: requestHash('TOOL', `${name}.${String(method)}`, args) };
        const committed = new CommittedWork();
        envelope = (await runIdempotent(deps.db, scope, successStatus(op), (tx) => runOperation(op, args, caller, tx, committed))).body as Envelope;
        committed.announce();
      }
      // One serialisation gives both the text copy and plain JSON (Dates become ISO strings, as in REST);
      // a record the database wrote as JSON is spliced in as it is.
      const link = approvalLinkOf(envelope);
      return { ok: true, text: envelopeJson(envelope), notice: link && approvalNotice(link) };
    } catch (err) {
      const appError = toAppError(err);
      logServerError(deps.log, appError, err, { tool: name });
      return { ok: false, text: JSON.stringify(appError.toBody()) };
    }
  }
}

/**
 * URL-mode elicitation (MCP 2025-11-25): when the client declared it, the server also asks it to open the
 * approval page, without waiting for the answer (the tool's result already carries the link). Only a
 * connection that keeps its server knows what the client declared (`/sse`); a stateless `/mcp` request has
 * neither the client's capabilities nor a stream to ask on, and the link in the result is all there is.
 */
function askToOpen(server: Server, url: string | undefined) {
  if (!url || !server.getClientCapabilities()?.elicitation?.url) return;
  const message = 'An automation waits for your approval. Open the page to review what it will do and approve or reject it.';
  try {
    // The answer (accept, decline, cancel) changes nothing: the page itself is where the person decides.
    server.elicitInput({ mode: 'url', message, url, elicitationId: randomUUID() }).catch(() => {});
  } catch {
    // A 2026-07-28 request cannot carry a server-to-client request: the link in the result stands alone.
  }
}

/**
 * An MCP server for one grant: only the tools of the grant's categories are listed or callable.
 * The low-level `Server` is used (not `McpServer`) so that nothing is registered or converted per
 * request: the tool definitions and their JSON Schemas come precomputed from the catalog.
 */
export function buildMcpServer(grantSource: GrantSource, runner: ToolRunner): Server {
  const grant = typeof grantSource === 'function' ? grantSource : () => grantSource;
  const server = new Server({ name: 'switchboard', version: VERSION }, { capabilities: { tools: { listChanged: false } }, instructions: INSTRUCTIONS });

  server.setRequestHandler('tools/list', () => ({ tools: runner.list(grant()).tools }));

  server.setRequestHandler('tools/call', async (request) => {
    const name = request.params.name;
    const g = grant();
    const entry = runner.find(g, name);
    // The same answer as the SDK's McpServer gives for a tool it does not know.
    if (!entry) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Tool ${name} not found`);
    const result = await runner.call(g, entry, request.params.arguments);
    askToOpen(server, approvalLinkOf(result.structuredContent));
    return server.projectCallToolResult(result, entry.definition.outputSchema);
  });

  return server;
}
