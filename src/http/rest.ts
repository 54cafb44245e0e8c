import { CommittedWork } from '../modules/events/events.signal.js';
import { idempotencyKeyOf, requestHash, runIdempotent } from '../idempotency.js';
import { useJsonBodyParser } from './json-body.js';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../core/errors.js';
import { carriesJsonText, envelopeBytes } from '../core/json-text.js';
import { toJsonSchema } from '../core/json-schema.js';
import { withDeadline } from '../core/deadline.js';
import { inputLocation, operationPermission, pathParams, readsOnly, successStatus, type Envelope, type Operation } from '../core/operation.js';
import { hasPermission } from '../core/permissions.js';
import type { Limiter } from '../core/rate-limit.js';
import type { Db } from '../db/client.js';
import { runOperation } from '../run-operation.js';
import type { ApiKeyAuth } from './api-key-auth.js';

type Scalar = 'integer' | 'number' | 'boolean' | 'string';

/**
 * Query strings carry text; the input schema says which fields are numbers or booleans. Written here rather
 * than left to Fastify's route schemas (Ajv's `coerceTypes`): Ajv reads `null` as the text "null", where the
 * API takes `offset=null` and `parentFolderId=null` as null, and its failures would answer outside the API's
 * error tree. This only converts; the operation's Zod schema judges the result, so every error has one shape.
 */
function queryTypes(op: Operation): Record<string, { type: Scalar; nullable: boolean }> {
  const json = toJsonSchema(op.input, 'input') as { properties?: Record<string, Record<string, unknown>> };
  const out: Record<string, { type: Scalar; nullable: boolean }> = {};
  for (const [name, prop] of Object.entries(json.properties ?? {})) {
    const variants = (prop.anyOf as Record<string, unknown>[] | undefined) ?? [prop];
    const types = variants.map((v) => v.type);
    const type = (types.find((t) => t === 'integer' || t === 'number' || t === 'boolean') ?? 'string') as Scalar;
    out[name] = { type, nullable: types.includes('null') };
  }
  return out;
}

function coerceQuery(query: Record<string, unknown>, types: ReturnType<typeof queryTypes>) {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(query)) {
    const spec = types[name];
    if (typeof value !== 'string' || !spec) {
      out[name] = value;
    } else if (spec.nullable && (value === '' || value === 'null')) {
      out[name] = null;
    } else if ((spec.type === 'integer' || spec.type === 'number') && /^-?\d+(\.\d+)?$/.test(value.trim())) {
      out[name] = Number(value);
    } else if (spec.type === 'boolean' && (value === 'true' || value === 'false')) {
      out[name] = value === 'true';
    } else {
      out[name] = value; // left as text: the schema reports it
    }
  }
  return out;
}

/** Path parameters, then the query (GET, DELETE) or the JSON body (POST, PUT, PATCH), as one flat object. */
function rawInput(op: Operation, req: FastifyRequest, types: ReturnType<typeof queryTypes>, params: string[]) {
  const fromPath = req.params as Record<string, string>;
  let rest: Record<string, unknown>;
  if (inputLocation(op) === 'query') {
    rest = coerceQuery(req.query as Record<string, unknown>, types);
  } else {
    // No body at all (no Content-Type, or an empty JSON body) reads as `{}`; JSON `null` does not.
    const body = req.body === undefined ? {} : req.body;
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw new AppError('VALIDATION_ERROR', 'The request is invalid', { errors: ['The body must be a JSON object'] });
    }
    rest = { ...(body as Record<string, unknown>) };
    const clash = params.filter((p) => p in rest);
    if (clash.length) {
      throw new AppError('VALIDATION_ERROR', 'The request is invalid', {
        errors: [],
        properties: Object.fromEntries(clash.map((p) => [p, { errors: [`"${p}" is a path parameter and cannot be sent in the body`] }])),
      });
    }
  }
  for (const p of params) rest[p] = fromPath[p];
  return rest;
}

export interface RestDeps {
  db: Db;
  auth: ApiKeyAuth;
  limiter: Limiter | undefined;
  /** A read (its authentication included) answers 503 when the database has not answered within this (ms). */
  readTimeoutMs: number;
}

interface Answer {
  status: number;
  body: unknown;
  replayed?: boolean;
}

/** Registers one Fastify route per operation. The prefix (`/v1`) comes from the caller. */
export function registerRestRoutes(app: FastifyInstance, operations: Operation[], deps: RestDeps) {
  // Bodies are JSON only: without Fastify's built-in text/plain parser, any other type is a 415, answered as BAD_REQUEST.
  app.removeContentTypeParser('text/plain');
  useJsonBodyParser(app);
  for (const op of operations) {
    const types = queryTypes(op);
    const params = pathParams(op);
    const permission = operationPermission(op);
    const status = successStatus(op);
    const serve = async (req: FastifyRequest): Promise<Answer> => {
      // A key in the cache is answered without a promise (most requests); otherwise it is looked up.
      const known = deps.auth.authenticate(req);
      const principal = known instanceof Promise ? await known : known;
      if (deps.limiter) {
        const verdict = deps.limiter.consumeNow ? deps.limiter.consumeNow(principal.keyId) : await deps.limiter.consume(principal.keyId);
        if (!verdict.allowed) throw new AppError('RATE_LIMITED', 'Too many requests; retry later', undefined, verdict.retryAfter);
      }
      if (!hasPermission(principal.permissions, permission)) {
        throw new AppError('FORBIDDEN', `This API key lacks the "${permission}" permission`);
      }
      const key = op.method === 'POST' ? idempotencyKeyOf(req.headers['idempotency-key']) : undefined;
      const input = rawInput(op, req, types, params);
      const caller = { orgId: principal.orgId, actor: { type: 'api_key' as const, id: principal.keyId, depth: 0 }, permissions: principal.permissions, db: deps.db };
      if (!key) return { status, body: await runOperation(op, input, { ...caller, jsonText: true }) };
      const scope = { callerId: principal.keyId, orgId: principal.orgId, key, hash: requestHash(op.method, req.url.split('?')[0]!, input) };
      const committed = new CommittedWork(); // a replay runs nothing and announces nothing
      const answer = await runIdempotent(deps.db, scope, status, (tx) => runOperation(op, input, caller, tx, committed));
      committed.announce();
      return answer;
    };
    // A write is bound by the database's statement timeout, so that a 503 always means "not written"; a
    // read may give up earlier, since abandoning it changes nothing.
    const deadline = readsOnly(op) ? deps.readTimeoutMs : undefined;
    app.route({
      method: op.method,
      url: op.path.replace(/\{(\w+)\}/g, ':$1'),
      // Not an async function: the answer's promise is the one `serve` (or the deadline) makes, not one more around it.
      handler: (req, reply) => {
        // `/contacts/` matches `/contacts/:id` with an empty id: that is no route, like any other unknown path.
        const fromPath = req.params as Record<string, string>;
        if (params.some((p) => fromPath[p] === '')) throw new AppError('NOT_FOUND', `No route for ${req.method} ${req.url.split('?')[0]}`);
        return (deadline ? withDeadline(serve(req), deadline) : serve(req)).then((answer) => {
          if (answer.replayed) reply.header('idempotent-replayed', 'true');
          reply.code(answer.status);
          // The database's JSON goes into the body as it is (as bytes); any other answer is serialized as Fastify does.
          const envelope = answer.body as Envelope;
          return carriesJsonText(envelope) ? reply.type('application/json; charset=utf-8').send(envelopeBytes(envelope)) : reply.send(envelope);
        });
      },
    });
  }
}
