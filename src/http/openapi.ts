import type { z } from 'zod';
import { CATEGORIES } from '../core/categories.js';
import { ERROR_STATUS, type ErrorCode } from '../core/errors.js';
import { components, documentMetadata, MAX_INPUT_DEPTH } from '../core/schemas.js';
import { exampleOf } from './examples.js';
import { toJsonSchema, type JsonSchema } from '../core/json-schema.js';
import { envelopeSchema, inputLocation, operationPermission, pathParams, successStatus, type Operation } from '../core/operation.js';


// Where a format says it all, the long regular expression Zod adds for it is noise to a reader and a code generator.
const FORMATS_WITHOUT_PATTERN = new Set(['uuid', 'date-time', 'email', 'date', 'time', 'uri']);
// Set by the server on every resource: marked readOnly in responses.
const SERVER_FIELDS = ['id', 'createdAt', 'updatedAt', 'deletedAt', 'organizationId'];

function tidy(node: unknown, io: 'input' | 'output'): void {
  if (Array.isArray(node)) return node.forEach((n) => tidy(n, io));
  if (typeof node !== 'object' || node === null) return;
  const schema = node as JsonSchema;
  if (typeof schema.format === 'string' && FORMATS_WITHOUT_PATTERN.has(schema.format)) delete schema.pattern;
  const props = schema.properties as Record<string, JsonSchema> | undefined;
  // A resource (it has an id and audit timestamps): its server-set fields are read-only.
  if (io === 'output' && props && 'id' in props && 'createdAt' in props) {
    for (const f of SERVER_FIELDS) if (props[f]) props[f].readOnly = true;
  }
  for (const value of Object.values(schema)) tidy(value, io);
}

/** `#/$defs/X` (where Zod puts a named schema) becomes `#/components/schemas/X`, at any depth. */
function pointToComponents(node: unknown): void {
  if (Array.isArray(node)) return node.forEach(pointToComponents);
  if (typeof node !== 'object' || node === null) return;
  const schema = node as JsonSchema;
  if (typeof schema.$ref === 'string') schema.$ref = schema.$ref.replace(/^#\/\$defs\//, '#/components/schemas/');
  for (const value of Object.values(schema)) pointToComponents(value);
}

/**
 * A Zod schema as JSON Schema for the document. Schemas named in `components` are referred to by `$ref`;
 * their definitions go to `named` (the document's components/schemas).
 */
function toSchema(schema: z.ZodType, io: 'input' | 'output', named?: Record<string, JsonSchema>): JsonSchema {
  const { $defs, ...rest } = toJsonSchema(schema, io, documentMetadata) as JsonSchema & { $defs?: Record<string, JsonSchema> };
  for (const [id, def] of Object.entries($defs ?? {})) {
    tidy(def, io);
    pointToComponents(def);
    if (named) named[id] ??= def;
  }
  tidy(rest, io);
  pointToComponents(rest);
  return rest;
}

/** A schema's JSON as a key for comparing shapes: its own description left out (a field's text, not its shape). */
const shapeKey = (node: JsonSchema) => JSON.stringify({ ...node, description: undefined });

/**
 * The request parts named in `components` (`components.addRequestPart`): their shapes, and a function that
 * replaces each place in a request schema that has one of them by a `$ref` (its description kept beside).
 */
function requestParts(named: Record<string, JsonSchema>) {
  const byShape = new Map<string, string>();
  const defs = new Map<string, JsonSchema>();
  for (const [id, schema] of components.requestParts()) {
    const json = toSchema(schema, 'input', named);
    byShape.set(shapeKey(json), id);
    defs.set(id, json);
  }
  const refer = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(refer);
    if (typeof node !== 'object' || node === null) return node;
    const schema = node as JsonSchema;
    const id = byShape.size ? byShape.get(shapeKey(schema)) : undefined;
    if (id) {
      named[id] ??= defs.get(id)!;
      return { $ref: `#/components/schemas/${id}`, ...(typeof schema.description === 'string' ? { description: schema.description } : {}) };
    }
    return Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, refer(v)]));
  };
  return refer;
}

/** Errors every authenticated operation can answer. */
const COMMON_ERRORS: ErrorCode[] = ['VALIDATION_ERROR', 'UNAUTHORIZED', 'FORBIDDEN', 'RATE_LIMITED', 'INTERNAL_ERROR', 'SERVICE_UNAVAILABLE'];

const ERROR_TEXT: Record<number, string> = {
  400: 'Validation error (`VALIDATION_ERROR`, with `details`), malformed request (`BAD_REQUEST`) or an `Idempotency-Key` used with another request (`IDEMPOTENCY_KEY_REUSED`)',
  401: 'Missing or invalid API key (`UNAUTHORIZED`)',
  402: 'Insufficient credits for the operation (`INSUFFICIENT_CREDITS`)',
  403: 'The API key lacks the permission the operation needs (`FORBIDDEN`)',
  404: 'The resource does not exist, is soft-deleted or belongs to another organization (`NOT_FOUND`)',
  409: 'A request with the same `Idempotency-Key` is still running (`IDEMPOTENCY_IN_PROGRESS`); see `Retry-After`',
  413: 'The body is larger than 1 MiB (`PAYLOAD_TOO_LARGE`)',
  429: 'Too many requests for this API key (`RATE_LIMITED`); see `Retry-After`',
  500: 'Unexpected server error (`INTERNAL_ERROR`)',
  503: 'Temporarily unavailable, e.g. the database is unreachable (`SERVICE_UNAVAILABLE`); see `Retry-After`',
};

const IDEMPOTENCY_KEY_REF = { $ref: '#/components/parameters/Idempotency-Key' };
const IDEMPOTENCY_KEY_PARAMETER = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description:
    'Makes a retry safe: a second request with the same key (per API key, kept 24 hours) and the same body answers the first answer again (with `Idempotent-Replayed: true`) without writing or debiting twice; with another body, 400 `IDEMPOTENCY_KEY_REUSED`; while the first still runs, 409 `IDEMPOTENCY_IN_PROGRESS`. A request that fails stores nothing. 1 to 255 visible ASCII characters, e.g. a UUID.',
  schema: { type: 'string', minLength: 1, maxLength: 255 },
};

const ErrorTreeSchema: JsonSchema = {
  type: 'object',
  description:
    'A tree mirroring the request input (path parameters, query and body fields together). `errors` lists the issues at this node; object nodes have `properties` keyed by field name; array nodes have `items` (one node per element, `null` for elements without issues). Unknown fields are reported in the parent node\'s `errors`.',
  properties: {
    errors: { type: 'array', items: { type: 'string' } },
    properties: { type: 'object', additionalProperties: { $ref: '#/components/schemas/ErrorTree' } },
    items: { type: 'array', items: { anyOf: [{ $ref: '#/components/schemas/ErrorTree' }, { type: 'null' }] } },
  },
  required: ['errors'],
};

const ErrorSchema: JsonSchema = {
  type: 'object',
  properties: {
    error: {
      type: 'object',
      properties: {
        code: { type: 'string', enum: Object.keys(ERROR_STATUS), description: 'Machine-readable code' },
        message: { type: 'string', description: 'Human-readable text' },
        details: { $ref: '#/components/schemas/ErrorTree', description: 'Present only on VALIDATION_ERROR' },
      },
      required: ['code', 'message'],
      additionalProperties: false,
    },
  },
  required: ['error'],
  additionalProperties: false,
};

/** A media type object: the schema, and an example made from it (a whole answer, or a request's usual fields). */
const withExample = (schema: JsonSchema, named: Record<string, JsonSchema>, full: boolean) => ({ schema, example: exampleOf(schema, named, { full }) });

function operationObject(op: Operation, named: Record<string, JsonSchema>, refer: (node: unknown) => unknown) {
  const params = pathParams(op);
  const input = refer(toSchema(op.input, 'input', named)) as { properties?: Record<string, JsonSchema>; required?: string[] };
  const props = input.properties ?? {};
  const required = new Set(input.required ?? []);
  const inQuery = inputLocation(op) === 'query';
  const parameters: unknown[] = Object.entries(props)
    .filter(([name]) => params.includes(name) || inQuery)
    .map(([name, schema]) => ({
      name,
      in: params.includes(name) ? 'path' : 'query',
      required: params.includes(name) || required.has(name),
      ...(schema.description ? { description: schema.description } : {}),
      schema,
    }));
  if (op.method === 'POST') parameters.push(IDEMPOTENCY_KEY_REF);

  const codes = new Set<ErrorCode>([...COMMON_ERRORS, ...(op.errors ?? [])]);
  if ((op.cost ?? 0) > 0) codes.add('INSUFFICIENT_CREDITS');
  if (params.length) codes.add('NOT_FOUND');
  if (!inQuery) codes.add('BAD_REQUEST').add('PAYLOAD_TOO_LARGE');
  if (op.method === 'POST') codes.add('IDEMPOTENCY_KEY_REUSED').add('IDEMPOTENCY_IN_PROGRESS');
  const statuses = [...new Set([...codes].map((c) => ERROR_STATUS[c]))].sort();

  const responses: Record<string, unknown> = {
    [successStatus(op)]: {
      description: op.kind === 'list' ? 'One page of results' : 'Success',
      headers: {
        'X-Request-ID': { $ref: '#/components/headers/X-Request-ID' },
        ...(op.method === 'POST' ? { 'Idempotent-Replayed': { $ref: '#/components/headers/Idempotent-Replayed' } } : {}),
      },
      content: { 'application/json': withExample(toSchema(envelopeSchema(op), 'output', named), named, true) },
    },
  };
  for (const s of statuses) responses[s] = { $ref: `#/components/responses/Error${s}` };

  let requestBody: unknown;
  if (!inQuery) {
    const bodyProps = Object.fromEntries(Object.entries(props).filter(([name]) => !params.includes(name)));
    const bodyRequired = [...required].filter((n) => !params.includes(n));
    requestBody = {
      required: bodyRequired.length > 0,
      content: {
        'application/json': withExample({ type: 'object', properties: bodyProps, ...(bodyRequired.length ? { required: bodyRequired } : {}), additionalProperties: false }, named, false),
      },
    };
  }

  return {
    operationId: op.id,
    summary: op.summary,
    description: [
      op.description,
      `Requires the \`${operationPermission(op)}\` permission (or \`*\`).`,
      op.cost ? `Costs ${op.cost} credit(s); with too few credits it answers 402 and writes nothing.` : undefined,
    ]
      .filter(Boolean)
      .join('\n\n'),
    tags: [op.id.slice(0, op.id.indexOf('.'))],
    parameters,
    ...(requestBody ? { requestBody } : {}),
    responses,
  };
}

/** One named response per error status: the error shape, X-Request-ID, and Retry-After where it applies. */
const ERROR_RESPONSES = Object.fromEntries(
  Object.keys(ERROR_TEXT).map((status) => [
    `Error${status}`,
    {
      description: ERROR_TEXT[Number(status)],
      headers: {
        'X-Request-ID': { $ref: '#/components/headers/X-Request-ID' },
        ...(['409', '429', '503'].includes(status) ? { 'Retry-After': { description: 'Seconds to wait before retrying', schema: { type: 'integer' } } } : {}),
      },
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
    },
  ]),
);

/** The OpenAPI 3.1 document of the REST interface, built from the operation table. */
export function buildOpenApi(operations: Operation[], opts: { serverUrl: string; version: string }) {
  const paths: Record<string, Record<string, unknown>> = {};
  const named: Record<string, JsonSchema> = {};
  const refer = requestParts(named);
  for (const op of operations) {
    (paths[op.path] ??= {})[op.method.toLowerCase()] = operationObject(op, named, refer);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Switchboard REST API',
      version: opts.version,
      license: { name: 'MIT', identifier: 'MIT' },
      description:
        `Business communication data, in these areas (each a tag below and a permission, \`<area>:read\` / \`<area>:write\`): ${CATEGORIES.map((c) => `**${c.id}** (${c.description.charAt(0).toLowerCase()}${c.description.slice(1)})`).join(', ')}.\n\n` +
        'Every response is `{ "data": …, "meta"?: { "pagination": … } }`; errors are `{ "error": { "code", "message", "details"? } }`. ' +
        'Every response carries `X-Request-ID`. Lists take `limit` (1-100, default 10), `offset` (default 0) and `sortOrder` (`asc`/`desc`, default `desc`, by creation date). ' +
        'Without `total`, `hasMore` is true whenever a page is full, so a client stops at the first empty page. DELETE is a soft delete.\n\n' +
        'Requests: bodies are JSON objects sent with `Content-Type: application/json` (any other type, malformed JSON or a body that is not an object is a 400; ' +
        'a POST with no body reads as `{}`), at most 1 MiB (413 `PAYLOAD_TOO_LARGE`). Unknown body and query fields are rejected with `VALIDATION_ERROR`. ' +
        `Strings and keys must not contain NUL characters or lone UTF-16 surrogates, and JSON may nest at most ${MAX_INPUT_DEPTH} levels. ` +
        'Path parameters are UUIDs; a malformed one is a 400 `VALIDATION_ERROR`.\n\n' +
        'Errors: `details` (validation errors only) mirrors the input (path, query and body fields together): each node has `errors`; object nodes have `properties`; ' +
        'array nodes have `items`, one node per element, `null` where that element has no issue. ' +
        'Each API key may send a limited number of requests per minute; beyond it the answer is 429 `RATE_LIMITED` with `Retry-After` (no `X-RateLimit-*` headers). ' +
        'A database outage answers 503 `SERVICE_UNAVAILABLE` with `Retry-After`.',
    },
    servers: [{ url: opts.serverUrl }],
    security: [{ apiKey: [] }],
    tags: CATEGORIES.map((c) => ({ name: c.id, description: c.description })),
    paths,
    components: {
      securitySchemes: { apiKey: { type: 'http', scheme: 'bearer', description: 'An API key: `Authorization: Bearer <API_KEY>`' } },
      responses: ERROR_RESPONSES,
      parameters: { 'Idempotency-Key': IDEMPOTENCY_KEY_PARAMETER },
      headers: {
        'X-Request-ID': { description: 'Identifier of the request (echoes a client-sent X-Request-ID when it is a sane token)', schema: { type: 'string' } },
        'Idempotent-Replayed': { description: '`true` when this answer is the stored answer of an earlier request with the same `Idempotency-Key`', schema: { type: 'string', enum: ['true'] } },
      },
      schemas: { ...Object.fromEntries(Object.entries(named).sort(([x], [y]) => x.localeCompare(y))), Error: ErrorSchema, ErrorTree: ErrorTreeSchema },
    },
  };
}
