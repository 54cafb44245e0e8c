import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { parseJSONRPCMessage, type JSONRPCMessage, type MessageExtraInfo, type Server, type Transport } from '@modelcontextprotocol/server';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { Grant } from '../oauth/grants.js';
import { jsonRpcError, narrowGrant, parseJson, prototypeKeyError, requestIdOf, type TransportGuard } from './guard.js';
import { buildMcpServer, type ToolRunner } from './server.js';

const KEEPALIVE_MS = 25_000;
/** How long a session's owner record lives in Redis without a keep-alive refreshing it. */
const OWNER_TTL_S = 120;
const SESSION_ID = /^[0-9a-f-]{36}$/;

/**
 * The server side of the 2024-11-05 HTTP+SSE transport: messages to the client are `message` events
 * on the open GET stream; messages from the client arrive by POST and are handed in with `receive`.
 * (The v2 server SDK has no SSE transport; this one speaks the SDK's `Transport` interface so the same
 * `buildMcpServer` serves both paths.)
 */
class SseServerTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void;
  private closed = false;

  constructor(
    readonly sessionId: string,
    private readonly res: ServerResponse,
  ) {}

  async start() {}

  async send(message: JSONRPCMessage) {
    this.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`);
  }

  write(frame: string) {
    if (!this.closed && !this.res.writableEnded) this.res.write(frame);
  }

  receive(message: JSONRPCMessage) {
    this.onmessage?.(message);
  }

  async close() {
    if (this.closed) return;
    this.closed = true;
    if (!this.res.writableEnded) this.res.end();
    this.onclose?.();
  }
}

interface SseSession {
  id: string;
  userId: string;
  clientId: string;
  /** The grant of the latest authenticated request, narrowed as the stream's URL asked; tools are filtered against it. */
  grant: Grant;
  /** The categories the stream was opened for (`/sse/x/<category>,…`), or undefined for the whole grant. */
  narrowedTo: string[] | undefined;
  transport: SseServerTransport;
  server: Server;
}

/** A message handed from the instance that received a POST to the instance that holds the stream. */
interface RelayedMessage {
  grant: Grant;
  messages: JSONRPCMessage[];
}

const ownerKey = (id: string) => `sb:mcp:sse:owner:${id}`;
const relayChannel = (id: string) => `sb:mcp:sse:relay:${id}`;

/**
 * `/sse` (GET opens the stream; its `endpoint` event names `/sse/messages?sessionId=…`) and
 * `/sse/messages` (POST, answered 202; the response travels on the stream). Every POST is
 * authenticated again and must come from the (user, client) that opened the stream.
 *
 * Sessions live in this process. With Redis, the session's owner is recorded in Redis and a POST that
 * reaches another instance is relayed to the owning instance over Redis pub/sub.
 */
export function registerSse(app: FastifyInstance, guard: TransportGuard, runner: ToolRunner, redis: Redis | undefined) {
  const sessions = new Map<string, SseSession>();
  const subscriber = redis?.duplicate();

  if (subscriber) {
    subscriber.on('error', (err) => app.log.warn({ err }, 'redis subscriber error (mcp sse relay)'));
    subscriber.on('message', (channel: string, payload: string) => {
      const session = sessions.get(channel.slice(relayChannel('').length));
      if (!session) return;
      try {
        const relayed = JSON.parse(payload) as RelayedMessage;
        dispatch(session, relayed.grant, relayed.messages);
      } catch (err) {
        app.log.warn({ err }, 'unreadable relayed mcp message');
      }
    });
  }

  function dispatch(session: SseSession, grant: Grant, messages: JSONRPCMessage[]) {
    session.grant = narrowGrant(grant, session.narrowedTo);
    for (const message of messages) session.transport.receive(message);
  }

  async function closeSession(session: SseSession) {
    if (!sessions.delete(session.id)) return;
    await session.transport.close();
    await session.server.close().catch(() => {});
    if (redis && subscriber) {
      await Promise.allSettled([subscriber.unsubscribe(relayChannel(session.id)), redis.del(ownerKey(session.id))]);
    }
  }

  // Open streams would hold the server open on shutdown: end them first.
  app.addHook('preClose', async () => {
    await Promise.allSettled([...sessions.values()].map(closeSession));
  });
  app.addHook('onClose', async () => {
    if (subscriber) subscriber.disconnect();
  });

  guard.endpoint(app, '/sse', 'GET', 'Method not allowed: open the stream with GET /sse, then POST to the endpoint it names.', async (_req, reply, grant, _body, narrowedTo) => {
    const id = randomUUID();
    const res = reply.raw;
    const transport = new SseServerTransport(id, res);
    const server = buildMcpServer(() => session.grant, runner);
    const session: SseSession = { id, userId: grant.userId, clientId: grant.clientId, grant, narrowedTo, transport, server };
    sessions.set(id, session);
    // First beat after KEEPALIVE_MS, long after the head below is written.
    const keepalive = setInterval(() => {
      transport.write(': keep-alive\n\n');
      if (redis) void redis.expire(ownerKey(id), OWNER_TTL_S).catch(() => {});
    }, KEEPALIVE_MS);
    keepalive.unref();
    res.on('close', () => {
      clearInterval(keepalive);
      void closeSession(session);
    });

    if (redis && subscriber) {
      try {
        await redis.set(ownerKey(id), JSON.stringify({ userId: grant.userId, clientId: grant.clientId }), 'EX', OWNER_TTL_S);
        await subscriber.subscribe(relayChannel(id));
      } catch (err) {
        // Without Redis the session still works for POSTs that reach this instance.
        app.log.warn({ err }, 'redis unavailable: mcp sse session not shared with other instances');
      }
    }
    await server.connect(transport);

    reply.hijack();
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) headers[name] = String(value);
    res.writeHead(200, {
      ...headers,
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    transport.write(`event: endpoint\ndata: /sse/messages?sessionId=${id}\n\n`);
  });

  app.route({
    method: ['POST', 'OPTIONS'],
    url: '/sse/messages',
    config: { cors: guard.cors },
    onRequest: guard.authHook('/sse'),
    handler: async (req, reply) => {
      const grant = guard.grantOf(req);
      const body = parseJson(req.body);
      const requestId = requestIdOf(body);
      if (!(await guard.consume(grant, reply, requestId))) return reply;

      const sessionId = (req.query as { sessionId?: unknown }).sessionId;
      if (typeof sessionId !== 'string' || !SESSION_ID.test(sessionId)) {
        return reply.code(400).type('application/json').send(jsonRpcError(requestId, -32000, 'Missing or malformed sessionId: open a stream with GET /sse first'));
      }

      const refused = prototypeKeyError(body);
      if (refused) return reply.code(400).type('application/json').send(refused);

      let messages: JSONRPCMessage[];
      try {
        if (body === undefined) throw new Error('not JSON');
        messages = (Array.isArray(body) ? body : [body]).map((m) => parseJSONRPCMessage(m));
        if (messages.length === 0) throw new Error('empty batch');
      } catch {
        return reply.code(400).type('application/json').send(jsonRpcError(requestId, -32700, 'Parse error: the body must be a JSON-RPC message'));
      }

      const local = sessions.get(sessionId);
      let owner: { userId: string; clientId: string } | undefined = local;
      if (!owner && redis) {
        try {
          owner = await remoteOwner(redis, sessionId);
        } catch (err) {
          app.log.warn({ err }, 'redis unavailable: cannot relay mcp sse message');
          return reply.code(503).header('retry-after', '2').type('application/json').send(jsonRpcError(requestId, -32603, 'Session store temporarily unavailable'));
        }
      }
      if (!owner) return reply.code(404).type('application/json').send(jsonRpcError(requestId, -32001, 'Session not found'));
      if (owner.userId !== grant.userId || owner.clientId !== grant.clientId) {
        return reply.code(403).type('application/json').send(jsonRpcError(requestId, -32000, 'Forbidden: this session belongs to another user or client'));
      }

      if (local) {
        dispatch(local, grant, messages);
      } else {
        const receivers = await redis!.publish(relayChannel(sessionId), JSON.stringify({ grant, messages } satisfies RelayedMessage)).catch(() => 0);
        if (receivers === 0) return reply.code(404).type('application/json').send(jsonRpcError(requestId, -32001, 'Session not found'));
      }
      return reply.code(202).type('text/plain; charset=utf-8').send('Accepted');
    },
  });
}

async function remoteOwner(redis: Redis, sessionId: string): Promise<{ userId: string; clientId: string } | undefined> {
  const value = await redis.get(ownerKey(sessionId));
  return value ? (JSON.parse(value) as { userId: string; clientId: string }) : undefined;
}
