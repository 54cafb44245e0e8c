import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';

/** What Node's HTTP parser refuses is answered in the API's error shape, with an X-Request-ID. */

let t: TestApp;
let port: number;

beforeAll(async () => {
  t = await createTestApp();
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  port = (t.app.server.address() as AddressInfo).port;
});
afterAll(() => t?.close());

function rawHttp(request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.end(request));
    let data = '';
    socket.setEncoding('utf8');
    socket.on('data', (c: string) => (data += c));
    socket.on('end', () => resolve(data));
    socket.on('error', reject);
    socket.setTimeout(5000, () => socket.destroy(new Error('no answer')));
  });
}

describe('malformed HTTP', () => {
  it.each([
    ['a header line without a colon', 'GET /healthz HTTP/1.1\r\nHost: x\r\nThis is not a header\r\n\r\n'],
    ['a space in the header name', 'GET /healthz HTTP/1.1\r\nHost: x\r\nBad Name: y\r\n\r\n'],
    ['an invalid request line', 'GARBAGE\r\n\r\n'],
    ['headers that are far too large', `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`],
  ])('%s: 400 with X-Request-ID and the error shape', async (_name, request) => {
    const answer = await rawHttp(request);
    const [head, body] = answer.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 400 /);
    expect(head).toMatch(/\r\nX-Request-ID: [0-9a-f-]{36}\r\n/i);
    expect(head).toMatch(/\r\nContent-Type: application\/json/i);
    expect(JSON.parse(body!)).toEqual({ error: { code: 'BAD_REQUEST', message: expect.any(String) } });
  });
});
