import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { twilioSignature } from '../../src/modules/channels/sms/providers/twilio.js';
import { TEST_ORIGIN, toTestResponse, type TestResponse } from './app.js';

/**
 * A local HTTP server that plays Twilio's Messaging API as documented: `POST
 * /2010-04-01/Accounts/{AccountSid}/Messages.json` (form-encoded, HTTP basic auth with the account sid and
 * auth token) answers 201 with the message's `sid` and `status`; errors answer `{code, message, status}`;
 * `GET /2010-04-01/Accounts/{AccountSid}.json` answers the account. Each send takes the next scripted
 * behaviour (default: accepted).
 *
 * MMS media as Twilio serves them: `GET /2010-04-01/Accounts/{AccountSid}/Messages/{MessageSid}/Media/{MediaSid}`
 * needs the same basic auth and answers a 307 to a second local server standing in for Twilio's CDN, which
 * serves the bytes to anyone (Twilio's CDN links are signed, not authenticated). Both record every request
 * with its Authorization header.
 */

export type Behaviour =
  | { kind: 'accept' }
  | { kind: 'status'; status: number; code?: number; retryAfter?: string }
  /** Reads the whole request, then never answers. */
  | { kind: 'hang' }
  /** Runs `before` (e.g. a status webhook) before answering 201. */
  | { kind: 'accept'; before: (sid: string, form: URLSearchParams) => Promise<void> };

export interface SentText {
  sid: string | null;
  auth: string | undefined;
  path: string;
  form: URLSearchParams;
  at: number;
}

export interface MediaItem {
  content: Buffer;
  contentType: string;
  /** Sent as Content-Disposition when given. */
  filename?: string;
  /** Statuses the CDN answers first, one per request, before the bytes (e.g. 503). */
  failFirst?: number[];
}

export interface MediaRequest {
  path: string;
  auth: string | undefined;
}

export interface FakeTwilio {
  url: string;
  accountSid: string;
  authToken: string;
  sent: SentText[];
  script(...behaviours: Behaviour[]): void;
  /** Serves `item`: the URL on the API host to put in MediaUrl{i}, and the CDN's URL of the same bytes. */
  addMedia(messageSid: string, item: MediaItem): { url: string; cdnUrl: string };
  /** The CDN's origin. */
  cdn: string;
  /** Media requests on the API host, and on the CDN. */
  mediaRequests: MediaRequest[];
  cdnRequests: MediaRequest[];
  close(): Promise<void>;
}

export async function startFakeTwilio(): Promise<FakeTwilio> {
  const accountSid = `AC${randomBytes(16).toString('hex')}`;
  const authToken = randomBytes(16).toString('hex');
  const sent: SentText[] = [];
  const queue: Behaviour[] = [];
  const hanging: ServerResponse[] = [];
  const expectedAuth = `Basic ${Buffer.from(`${accountSid}:${authToken}`).toString('base64')}`;
  const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify(body));
  };
  const media = new Map<string, MediaItem>();
  const mediaRequests: MediaRequest[] = [];
  const cdnRequests: MediaRequest[] = [];
  const cdnServer: Server = createServer((req, res) => {
    req.resume();
    cdnRequests.push({ path: req.url ?? '', auth: req.headers.authorization });
    const item = media.get(/^\/media\/([\w-]+)$/.exec(req.url ?? '')?.[1] ?? '');
    if (!item) return void res.writeHead(404).end();
    const status = item.failFirst?.shift();
    if (status) return void res.writeHead(status, { 'content-type': 'text/plain' }).end(`Scripted ${status}`);
    res.writeHead(200, { 'content-type': item.contentType, 'content-length': item.content.length, ...(item.filename ? { 'content-disposition': `inline; filename="${item.filename}"` } : {}) });
    res.end(item.content);
  });
  await new Promise<void>((resolve) => cdnServer.listen(0, '127.0.0.1', resolve));
  const cdn = `http://127.0.0.1:${(cdnServer.address() as AddressInfo).port}`;
  const mediaPath = /^\/2010-04-01\/Accounts\/(\w+)\/Messages\/(\w+)\/Media\/([\w-]+)$/;
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const mediaMatch = mediaPath.exec(req.url ?? '');
        if (mediaMatch) mediaRequests.push({ path: req.url!, auth: req.headers.authorization });
        if (req.headers.authorization !== expectedAuth) return json(res, 401, { code: 20003, message: 'Authenticate', status: 401 });
        if (req.method === 'GET' && mediaMatch) {
          if (mediaMatch[1] !== accountSid || !media.has(mediaMatch[3]!)) return json(res, 404, { code: 20404, message: 'Not found', status: 404 });
          res.writeHead(307, { location: `${cdn}/media/${mediaMatch[3]}` });
          return void res.end();
        }
        if (req.method === 'GET' && req.url === `/2010-04-01/Accounts/${accountSid}.json`) return json(res, 200, { sid: accountSid, status: 'active' });
        if (req.method !== 'POST' || req.url !== `/2010-04-01/Accounts/${accountSid}/Messages.json`) return json(res, 404, { code: 20404, message: 'Not found', status: 404 });
        if (!String(req.headers['content-type']).startsWith('application/x-www-form-urlencoded')) return json(res, 400, { code: 21620, message: 'Form expected', status: 400 });
        const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
        const behaviour = queue.shift() ?? { kind: 'accept' };
        const sid = behaviour.kind === 'accept' ? `SM${randomBytes(16).toString('hex')}` : null;
        sent.push({ sid, auth: req.headers.authorization, path: req.url, form, at: Date.now() });
        if (behaviour.kind === 'hang') return void hanging.push(res);
        if (behaviour.kind === 'status') {
          return json(res, behaviour.status, { code: behaviour.code ?? behaviour.status * 100, message: `Scripted ${behaviour.status}`, status: behaviour.status }, behaviour.retryAfter ? { 'retry-after': behaviour.retryAfter } : {});
        }
        if ('before' in behaviour) await behaviour.before(sid!, form);
        json(res, 201, { sid, status: 'queued', to: form.get('To'), from: form.get('From'), body: form.get('Body'), account_sid: accountSid });
      })();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    accountSid,
    authToken,
    sent,
    script: (...behaviours) => void queue.push(...behaviours),
    addMedia(messageSid, item) {
      const sid = `ME${randomBytes(16).toString('hex')}`;
      media.set(sid, item);
      return { url: `http://127.0.0.1:${port}/2010-04-01/Accounts/${accountSid}/Messages/${messageSid}/Media/${sid}`, cdnUrl: `${cdn}/media/${sid}` };
    },
    cdn,
    mediaRequests,
    cdnRequests,
    close: async () => {
      for (const [s, handles] of [
        [server, hanging],
        [cdnServer, []],
      ] as const) {
        for (const res of handles) res.destroy();
        s.closeAllConnections();
        await new Promise<void>((resolve) => s.close(() => resolve()));
      }
    },
  };
}

/** A provider webhook as Twilio sends it: a form post signed with the channel's auth token over TEST_ORIGIN + path. */
export async function postWebhook(app: FastifyInstance, path: string, params: Record<string, string>, authToken: string, opts: { signature?: string; ip?: string } = {}): Promise<TestResponse> {
  const signature = opts.signature ?? twilioSignature(authToken, `${TEST_ORIGIN}${path}`, params);
  const res = await app.inject({
    method: 'POST',
    url: path,
    ...(opts.ip ? { remoteAddress: opts.ip } : {}),
    headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': signature },
    payload: new URLSearchParams(params).toString(),
  });
  return toTestResponse(res);
}
