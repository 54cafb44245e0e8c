import { createHash } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { matchesSha256, messageBody, metaGraph, recipientId } from '../../../src/modules/channels/whatsapp/meta.js';
import { startFakeGraph, type FakeGraph } from '../../helpers/meta-graph.js';

const ctx = { allowPrivate: true, timeoutMs: 2000 };

describe("Meta's Graph API client", () => {
  let graph: FakeGraph;
  let client: ReturnType<typeof metaGraph>;
  beforeAll(async () => {
    graph = await startFakeGraph();
  });
  afterAll(() => graph.close());
  beforeEach(() => {
    client = metaGraph({ phoneNumberId: graph.phoneNumberId, accessToken: graph.accessToken, apiBaseUrl: `${graph.url}/`, apiVersion: graph.version });
    graph.requests.length = 0;
    graph.sent.length = 0;
  });

  it('sends a text with the documented body and bearer token, and answers the wamid', async () => {
    const out = await client.send({ to: '4915112345678', text: 'Hello' }, ctx);
    expect(out).toEqual({ kind: 'sent', providerMessageId: graph.sent[0]!.wamid, whatsappId: '4915112345678' });
    expect(graph.sent[0]!.path).toBe(`/${graph.version}/${graph.phoneNumberId}/messages`);
    expect(graph.sent[0]!.auth).toBe(`Bearer ${graph.accessToken}`);
    expect(graph.sent[0]!.body).toEqual({ messaging_product: 'whatsapp', recipient_type: 'individual', to: '4915112345678', type: 'text', text: { body: 'Hello' } });
  });

  it('sends a template with its language and components', async () => {
    const components = [{ type: 'body', parameters: [{ type: 'text', text: 'Ada' }] }];
    const out = await client.send({ to: 'US.13491208655302741918', template: { name: 'order_update', language: 'en_US', components } }, ctx);
    expect(out.kind).toBe('sent');
    expect(graph.sent[0]!.body).toEqual({ messaging_product: 'whatsapp', recipient_type: 'individual', to: 'US.13491208655302741918', type: 'template', template: { name: 'order_update', language: { code: 'en_US' }, components } });
  });

  it('names the message answered as context', () => {
    expect(messageBody({ to: '1', text: 'x', contextId: 'wamid.A' })).toMatchObject({ context: { message_id: 'wamid.A' } });
  });

  it.each([
    [{ status: 400, code: 131047, title: 'Re-engagement message' }, { kind: 'failed', code: '131047', title: 'Re-engagement message', window: true }],
    [{ status: 400, code: 131026, title: 'Message undeliverable' }, { kind: 'failed', code: '131026', title: 'Message undeliverable' }],
    [{ status: 401, code: 190, title: 'Error validating access token' }, { kind: 'failed', code: '190', credentials: true }],
    [{ status: 400, code: 190, title: 'Error validating access token' }, { kind: 'failed', code: '190', credentials: true }],
    [{ status: 400, code: 130429, title: 'Rate limit hit' }, { kind: 'retry' }],
    [{ status: 429, code: 4, title: 'Application request limit reached', retryAfter: '7' }, { kind: 'retry', retryAfterMs: 7000 }],
    [{ status: 503, code: 1, title: 'Service temporarily unavailable' }, { kind: 'retry' }],
  ] as const)('maps Graph error %j', async (error, expected) => {
    graph.script({ kind: 'error', ...error });
    const out = await client.send({ to: '4915112345678', text: 'x' }, ctx);
    expect(out).toMatchObject(expected);
    expect(out.kind === 'failed' || out.kind === 'retry' ? out.error : '').toContain(`error ${error.code}: ${error.title}`);
  });

  it('reports a revoked token as a credentials failure, on send and on check', async () => {
    const revoked = await startFakeGraph();
    try {
      revoked.revoke();
      const c = metaGraph({ phoneNumberId: revoked.phoneNumberId, accessToken: revoked.accessToken, apiBaseUrl: revoked.url, apiVersion: revoked.version });
      expect(await c.send({ to: '1555', text: 'x' }, ctx)).toMatchObject({ kind: 'failed', code: '190', credentials: true });
      expect(await c.check(ctx)).toEqual([{ step: 'phoneNumber', ok: false, detail: expect.stringContaining('error 190') }]);
    } finally {
      await revoked.close();
    }
  });

  it('checks the phone number', async () => {
    expect(await client.check(ctx)).toEqual([{ step: 'phoneNumber', ok: true, detail: expect.stringContaining('Test Business') }]);
  });

  it('answers unknown when the request left and no answer came; never retried', async () => {
    graph.script({ kind: 'hang' });
    const out = await metaGraph({ phoneNumberId: graph.phoneNumberId, accessToken: graph.accessToken, apiBaseUrl: graph.url, apiVersion: graph.version }).send({ to: '1', text: 'x' }, { allowPrivate: true, timeoutMs: 300 });
    expect(out.kind).toBe('unknown');
  });

  it('retries when Meta cannot be reached', async () => {
    const out = await metaGraph({ phoneNumberId: '1', accessToken: 't', apiBaseUrl: 'http://127.0.0.1:9', apiVersion: 'v24.0' }).send({ to: '1', text: 'x' }, ctx);
    expect(out.kind).toBe('retry');
  });

  it('refuses a private address unless allowed, and sends no token there', async () => {
    const out = await client.send({ to: '1', text: 'x' }, { allowPrivate: false, timeoutMs: 2000 });
    expect(out).toMatchObject({ kind: 'failed' });
    expect(graph.requests).toHaveLength(0);
  });

  describe('media', () => {
    const bytes = Buffer.from('\x89PNG fake image bytes');
    it('fetches in two steps with the token, checked against sha256', async () => {
      const id = graph.addMedia({ content: bytes, mimeType: 'image/png' });
      const out = await client.fetchMedia(id, { ...ctx, maxBytes: 1024 });
      expect(out).toEqual({ kind: 'fetched', content: bytes, contentType: 'image/png', filename: null });
      expect(graph.requests.map((r) => [r.server, r.auth])).toEqual([
        ['api', `Bearer ${graph.accessToken}`],
        ['media', `Bearer ${graph.accessToken}`],
      ]);
    });

    it('refuses bytes that do not match sha256', async () => {
      const id = graph.addMedia({ content: bytes, mimeType: 'image/png', sha256: createHash('sha256').update('other').digest('hex') });
      expect(await client.fetchMedia(id, { ...ctx, maxBytes: 1024 })).toMatchObject({ kind: 'failed', error: expect.stringContaining('sha256') });
    });

    it('never sends the token along a redirect', async () => {
      const id = graph.addMedia({ content: bytes, mimeType: 'image/png', redirect: true });
      const out = await client.fetchMedia(id, { ...ctx, maxBytes: 1024 });
      // The other host's bytes are not the media: refused by the sha256 check.
      expect(out.kind).toBe('failed');
      const elsewhere = graph.requests.filter((r) => r.server === 'elsewhere');
      expect(elsewhere).toHaveLength(1);
      expect(elsewhere[0]!.auth).toBeUndefined();
    });

    it('refuses media over the limit before downloading, and retries a media host error', async () => {
      const big = graph.addMedia({ content: Buffer.alloc(2048), mimeType: 'video/mp4' });
      expect(await client.fetchMedia(big, { ...ctx, maxBytes: 1024 })).toMatchObject({ kind: 'failed', tooLarge: true });
      expect(graph.requests.filter((r) => r.server === 'media')).toHaveLength(0);
      const flaky = graph.addMedia({ content: bytes, mimeType: 'image/png', failFirst: [503] });
      expect((await client.fetchMedia(flaky, { ...ctx, maxBytes: 1024 })).kind).toBe('retry');
      expect((await client.fetchMedia(flaky, { ...ctx, maxBytes: 1024 })).kind).toBe('fetched');
    });

    it('fails an unknown media id, and a revoked token as credentials', async () => {
      expect(await client.fetchMedia('999', { ...ctx, maxBytes: 1024 })).toMatchObject({ kind: 'failed' });
      const revoked = await startFakeGraph();
      try {
        const id = revoked.addMedia({ content: bytes, mimeType: 'image/png' });
        revoked.revoke();
        const c = metaGraph({ phoneNumberId: revoked.phoneNumberId, accessToken: revoked.accessToken, apiBaseUrl: revoked.url, apiVersion: revoked.version });
        expect(await c.fetchMedia(id, { ...ctx, maxBytes: 1024 })).toMatchObject({ kind: 'failed', credentials: true });
      } finally {
        await revoked.close();
      }
    });
  });
});

describe('WhatsApp helpers', () => {
  it('addresses a number by its digits, else the business-scoped user id', () => {
    expect(recipientId({ phoneNumber: '+4915112345678', userId: 'US.1' })).toBe('4915112345678');
    expect(recipientId({ userId: 'US.1' })).toBe('US.1');
    expect(recipientId({ phoneNumber: 'ACME' })).toBeUndefined();
  });
  it('matches sha256 in hex or base64', () => {
    const content = Buffer.from('abc');
    const digest = createHash('sha256').update(content).digest();
    expect(matchesSha256(content, digest.toString('hex'))).toBe(true);
    expect(matchesSha256(content, digest.toString('base64'))).toBe(true);
    expect(matchesSha256(content, 'nope')).toBe(false);
    expect(matchesSha256(Buffer.from('abd'), digest.toString('hex'))).toBe(false);
  });
});
