import { compileErrors, validate } from '@readme/openapi-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inputLocation, pathParams, successStatus } from '../../src/core/operation.js';
import { buildOpenApi } from '../../src/http/openapi.js';
import { operations } from '../../src/operations.js';
import { VERSION } from '../../src/version.js';
import { createTestApp, TEST_ORIGIN, type TestApp } from '../helpers/app.js';

/**
 * The OpenAPI document is generated from the operation table. It must be valid OpenAPI 3.1, describe
 * every operation fully, and match the committed snapshot (`npx vitest run -u` rewrites it), so any
 * change to the public surface shows up as a diff in review.
 */

// The snapshot uses a fixed server URL so it does not depend on where the tests run.
const SNAPSHOT_SERVER = 'http://localhost:3000/v1';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let t: TestApp;
let doc: Json;

beforeAll(async () => {
  t = await createTestApp();
  const res = await t.app.inject({ method: 'GET', url: '/v1/openapi.json' });
  expect(res.statusCode).toBe(200);
  doc = res.json();
});
afterAll(() => t.close());

describe('GET /v1/openapi.json', () => {
  it('is public JSON with a request id, and its server URL is PUBLIC_URL + /v1', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/v1/openapi.json' });
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.headers['x-request-id']).toBeTruthy();
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.servers).toEqual([{ url: `${TEST_ORIGIN}/v1` }]);
    expect(doc.info.version).toBe(VERSION);
  });

  it('is a valid OpenAPI 3.1 document', async () => {
    // validate() dereferences in place: give it a copy.
    const result = await validate(structuredClone(doc) as never);
    expect(result.valid, result.valid ? '' : compileErrors(result)).toBe(true);
  });

  it('has every operation of the table, once, with its parameters, body, success and error responses', () => {
    const ids: string[] = [];
    for (const op of operations) {
      const o = doc.paths[op.path]?.[op.method.toLowerCase()];
      expect(o, `${op.method} ${op.path}`).toBeDefined();
      ids.push(o.operationId);
      expect(o.operationId).toBe(op.id);
      expect(o.summary).toBe(op.summary);
      expect(o.tags).toEqual([op.id.split('.')[0]]);
      expect(o.description).toContain(op.method === 'GET' ? ':read' : ':write');

      const inPath = o.parameters.filter((p: Json) => p.in === 'path').map((p: Json) => p.name);
      expect(inPath.sort()).toEqual(pathParams(op).sort());
      for (const p of o.parameters.filter((x: Json) => x.in === 'path')) {
        expect(p.required).toBe(true);
        // The path parameters that are no UUID: an opted-out phone number; a thread's id, the `threadId` of
        // its messages (any text a recorded message was given).
        if (op.id === 'channels.delete_opt_out' && p.name === 'number') continue;
        if (op.id.startsWith('threads.') && p.name === 'id') continue;
        expect(p.schema.format, `${op.id} {${p.name}}`).toBe('uuid');
      }
      const fields = Object.keys(op.input.shape).filter((f) => !pathParams(op).includes(f));
      if (inputLocation(op) === 'query') {
        expect(o.requestBody).toBeUndefined();
        expect(o.parameters.filter((p: Json) => p.in === 'query').map((p: Json) => p.name).sort()).toEqual(fields.sort());
      } else {
        const body = o.requestBody.content['application/json'].schema;
        expect(Object.keys(body.properties).sort()).toEqual(fields.sort());
        expect(body.additionalProperties).toBe(false);
      }

      const success = o.responses[String(successStatus(op))];
      expect(success, `${op.id} success`).toBeDefined();
      expect(success.headers['X-Request-ID']).toBeDefined();
      const envelope = success.content['application/json'].schema;
      expect(envelope.required).toContain('data');
      if (op.kind === 'list') {
        expect(envelope.properties.data.type).toBe('array');
        expect(envelope.properties.meta.properties.pagination).toEqual({ $ref: '#/components/schemas/Pagination' });
        const pagination = doc.components.schemas.Pagination;
        expect(Object.keys(pagination.properties).sort()).toEqual(['hasMore', 'limit', 'offset', 'total']);
        expect(pagination.required.sort()).toEqual(['hasMore', 'limit', 'offset']);
        expect(o.parameters.map((p: Json) => p.name)).toEqual(expect.arrayContaining(['limit', 'offset', 'sortOrder']));
      }

      const errors = Object.keys(o.responses).filter((s) => Number(s) >= 400);
      expect(errors).toEqual(expect.arrayContaining(['400', '401', '403', '429', '500', '503']));
      if (pathParams(op).length) expect(errors).toContain('404');
      if (op.method !== 'GET' && op.method !== 'DELETE') expect(errors).toContain('413');
      if (op.cost) expect(errors).toContain('402');
      for (const s of errors) {
        const named = o.responses[s].$ref.replace('#/components/responses/', '');
        const response = doc.components.responses[named];
        expect(response.content['application/json'].schema.$ref).toBe('#/components/schemas/Error');
        expect(response.headers['X-Request-ID']).toBeDefined();
      }
      expect(doc.components.responses[o.responses['429'].$ref.replace('#/components/responses/', '')].headers['Retry-After']).toBeDefined();
    }
    expect(new Set(ids).size).toBe(operations.length);
    const documented = Object.values(doc.paths).reduce((n: number, p) => n + Object.keys(p as Json).length, 0);
    expect(documented).toBe(operations.length);
  });

  it('uses uuid and date-time formats and marks server-set resource fields readOnly', () => {
    // Resources are named components, referred to by $ref.
    expect(doc.paths['/contacts/{id}'].get.responses['200'].content['application/json'].schema.properties.data).toEqual({ $ref: '#/components/schemas/Contact' });
    const contact = doc.components.schemas.Contact;
    expect(contact.properties.emails.items).toEqual({ $ref: '#/components/schemas/ContactEmail' });
    expect(contact.properties.id).toMatchObject({ type: 'string', format: 'uuid', readOnly: true });
    expect(contact.properties.organizationId).toMatchObject({ format: 'uuid', readOnly: true });
    expect(contact.properties.createdAt).toMatchObject({ type: 'string', format: 'date-time', readOnly: true });
    expect(contact.properties.deletedAt.readOnly).toBe(true);
    expect(doc.components.schemas.ContactEmail.properties.id.readOnly).toBe(true);
    // Formats carry the meaning; Zod's long regular expressions for them are left out.
    expect(JSON.stringify(contact)).not.toContain('"pattern"');
    // Request bodies are not marked readOnly (their fields are written by the client).
    expect(JSON.stringify(doc.paths['/contacts'].post.requestBody)).not.toContain('readOnly');
  });

  it('stays within 3.5 KB per operation: what operations share is a component, referred to by $ref', () => {
    const perOperation = JSON.stringify(doc).length / operations.length;
    expect(perOperation).toBeLessThanOrEqual(3_500);
    // Each channel kind's settings objects: one component each, referred to by POST /channels and PATCH /channels/{id} alike.
    const refs = (node: unknown) => [...JSON.stringify(node).matchAll(/"#\/components\/schemas\/([^"]+)"/g)].map((m) => m[1]!).sort();
    const create = doc.paths['/channels'].post.requestBody.content['application/json'].schema.properties;
    const update = doc.paths['/channels/{id}'].patch.requestBody.content['application/json'].schema.properties;
    for (const field of ['inbound', 'outbound', 'provider']) {
      expect(refs(create[field]).length, field).toBeGreaterThan(0);
      expect(refs(update[field]), field).toEqual(refs(create[field]));
      for (const id of refs(create[field])) expect(doc.components.schemas[id], id).toBeDefined();
    }
    // Idempotency: one parameter and one header, named once.
    for (const op of operations.filter((o) => o.method === 'POST')) {
      const o = doc.paths[op.path].post;
      expect(o.parameters, op.id).toContainEqual({ $ref: '#/components/parameters/Idempotency-Key' });
      expect(o.responses[String(successStatus(op))].headers['Idempotent-Replayed'], op.id).toEqual({ $ref: '#/components/headers/Idempotent-Replayed' });
    }
    expect(doc.components.parameters['Idempotency-Key']).toMatchObject({ name: 'Idempotency-Key', in: 'header' });
  });

  it('documents the error shape, with the details tree (properties, items) and every error code', () => {
    const err = doc.components.schemas.Error;
    expect(err.properties.error.required).toEqual(['code', 'message']);
    expect(err.properties.error.properties.code.enum).toEqual(
      expect.arrayContaining(['VALIDATION_ERROR', 'BAD_REQUEST', 'UNAUTHORIZED', 'INSUFFICIENT_CREDITS', 'FORBIDDEN', 'NOT_FOUND', 'PAYLOAD_TOO_LARGE', 'RATE_LIMITED', 'INTERNAL_ERROR', 'SERVICE_UNAVAILABLE']),
    );
    const tree = doc.components.schemas.ErrorTree;
    expect(Object.keys(tree.properties).sort()).toEqual(['errors', 'items', 'properties']);
    expect(tree.description).toMatch(/items/);
    expect(doc.components.securitySchemes.apiKey).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(doc.security).toEqual([{ apiKey: [] }]);
  });

  it('matches the committed snapshot (`npx vitest run -u` rewrites it)', async () => {
    const current = `${JSON.stringify(buildOpenApi(operations, { serverUrl: SNAPSHOT_SERVER, version: VERSION }), null, 2)}\n`;
    await expect(current).toMatchFileSnapshot('./openapi.snapshot.json');
  });
});

describe('examples', () => {
  it('every operation has an example answer, and every example request passes the operation’s own input schema', () => {
    const doc = buildOpenApi(operations, { serverUrl: 'https://switchboard.example.com/v1', version: VERSION }) as unknown as Json;
    const refused: string[] = [];
    for (const op of operations) {
      const o = doc.paths[op.path][op.method.toLowerCase()];
      expect(o.responses[String(successStatus(op))].content['application/json'].example, op.id).toBeDefined();
      const example = o.requestBody?.content['application/json'].example;
      if (!example) continue;
      const input = { ...example, ...Object.fromEntries(pathParams(op).map((p) => [p, '3f0e5c1a-8b7d-4c2e-9f10-5a6b7c8d9e0f'])) };
      const parsed = op.input.safeParse(input);
      if (!parsed.success) refused.push(`${op.id}: ${JSON.stringify(example)} ${parsed.error.message.slice(0, 200)}`);
    }
    expect(refused).toEqual([]);
  });
});
