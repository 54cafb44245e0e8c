import { bearerToken } from '../core/secrets.js';
import {
  createMcpHandler,
  isLegacyRequest,
  WebStandardStreamableHTTPServerTransport,
  type AuthInfo,
  type McpRequestContext,
} from '@modelcontextprotocol/server';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Grant } from '../oauth/grants.js';
import { prototypeKeyError, type TransportGuard } from './guard.js';
import { buildMcpServer, type ToolRunner } from './server.js';
import { fastJsonAnswer } from './fast-path.js';

/** The grant travels to the per-request server factory inside the SDK's pass-through `authInfo`. */
export function authInfoFor(grant: Grant, token: string): AuthInfo {
  return { token, clientId: grant.clientId, scopes: grant.scopes, extra: { grant } };
}

function grantOf(authInfo: AuthInfo | undefined): Grant {
  const grant = authInfo?.extra?.grant as Grant | undefined;
  if (!grant) throw new Error('MCP request without an authenticated grant');
  return grant;
}

/** The Fastify request as a web `Request` (the SDK's HTTP face); the URL base is the public origin. */
function toWebRequest(req: FastifyRequest, publicUrl: string, body: string | undefined): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const v of value) headers.append(name, v);
    else headers.set(name, value);
  }
  return new Request(new URL(req.url, publicUrl), { method: req.method, headers, ...(body !== undefined ? { body } : {}) });
}

/** JSON bodies are buffered (a fixed length beats a piped stream); SSE answers are streamed. */
async function sendWebResponse(reply: FastifyReply, response: Response) {
  if (response.headers.get('content-type')?.startsWith('text/event-stream')) return reply.send(response);
  const text = response.body ? await response.text() : '';
  reply.code(response.status);
  response.headers.forEach((value, name) => void reply.header(name, value));
  return reply.send(text);
}

/**
 * `/mcp`: Streamable HTTP, stateless. Every POST is served by a fresh server built from the grant of
 * its token. Requests of the current revision (2026-07-28) go through the SDK's per-request handler;
 * 2025-era requests (an `initialize` handshake, then plain JSON-RPC POSTs) are served by a stateless
 * Streamable HTTP transport that answers in JSON rather than a one-event SSE stream. There is no
 * session to resume, so GET (standalone stream) and DELETE (session end) answer 405.
 */
export function registerStreamableHttp(app: FastifyInstance, guard: TransportGuard, runner: ToolRunner, publicUrl: string) {
  const factory = (ctx: McpRequestContext) => buildMcpServer(grantOf(ctx.authInfo), runner);
  const onerror = (err: Error) => app.log.debug({ err }, 'mcp request rejected');
  const modern = createMcpHandler(factory, { legacy: 'reject', onerror });
  // Before the server stops accepting: open modern streams (subscriptions) would otherwise hold it open.
  app.addHook('preClose', async () => modern.close());

  const legacy = async (request: Request, authInfo: AuthInfo, parsedBody: unknown) => {
    const server = buildMcpServer(grantOf(authInfo), runner);
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    await server.connect(transport);
    try {
      return await transport.handleRequest(request, { authInfo, ...(parsedBody !== undefined ? { parsedBody } : {}) });
    } finally {
      void transport.close().catch(() => {});
      void server.close().catch(() => {});
    }
  };

  guard.endpoint(app, '/mcp', 'POST', 'Method not allowed.', async (req, reply, grant, body) => {
    const refused = prototypeKeyError(body);
    if (refused) return reply.code(400).type('application/json').send(refused);
    const fast = await fastJsonAnswer(req.headers, body, grant, runner);
    if (fast !== undefined) return reply.code(200).type('application/json').send(fast);
    const token = bearerToken(req.headers.authorization)!; // checked by the route's auth hook
    const authInfo = authInfoFor(grant, token);
    const request = toWebRequest(req, publicUrl, typeof req.body === 'string' ? req.body : undefined);
    const response = (await isLegacyRequest(request, body)) ? await legacy(request, authInfo, body) : await modern.fetch(request, { authInfo, ...(body !== undefined ? { parsedBody: body } : {}) });
    return sendWebResponse(reply, response);
  });
}
