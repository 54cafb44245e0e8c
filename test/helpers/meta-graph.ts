import { createHash, createHmac, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local HTTP server that plays Meta's WhatsApp Business Cloud API (the Graph API) as documented:
 *
 * - `POST /{version}/{phoneNumberId}/messages` (JSON, `Authorization: Bearer <token>`) answers
 *   `{ messaging_product, contacts: [{ input, wa_id }], messages: [{ id: "wamid…" }] }`; errors answer Graph's
 *   `{ error: { message: "(#code) title", type, code, error_data: { messaging_product, details }, fbtrace_id } }`.
 *   Each send takes the next scripted behaviour (default: accepted).
 * - `GET /{version}/{mediaId}` answers `{ messaging_product, url, mime_type, sha256 (hex), file_size, id }`, the
 *   `url` on a second local server standing in for Meta's media host (lookaside), which also wants the token.
 *   An item may instead be served by a redirect to a third server (`elsewhere`), to see whether the token follows.
 * - `GET /{version}/{phoneNumberId}` answers the phone number (`display_phone_number`, `verified_name`).
 * - `revoke()`: from then on every request answers 401 with code 190 (the token expired or was revoked).
 *
 * Every request is recorded with its host, path and Authorization header.
 */

export type GraphBehaviour =
  | { kind: 'accept' }
  /** Graph's error answer: HTTP `status`, Meta's `code` and title. */
  | { kind: 'error'; status: number; code: number; title?: string; retryAfter?: string }
  /** Reads the whole request, then never answers. */
  | { kind: 'hang' };

export interface GraphRequest {
  server: 'api' | 'media' | 'elsewhere';
  method: string;
  path: string;
  auth: string | undefined;
  body: string;
  at: number;
}

export interface SentWhatsApp {
  wamid: string | null;
  body: Record<string, unknown>;
  auth: string | undefined;
  path: string;
}

export interface GraphMedia {
  content: Buffer;
  mimeType: string;
  /** The sha256 Meta states (default: the content's, hex). */
  sha256?: string;
  /** The media host answers a redirect to `elsewhere` instead of the bytes. */
  redirect?: boolean;
  /** Statuses the media host answers first, one per request, before the bytes. */
  failFirst?: number[];
}

export interface FakeGraph {
  /** `apiBaseUrl` of a channel that talks to this fake. */
  url: string;
  version: string;
  phoneNumberId: string;
  accessToken: string;
  /** The origins of the media host and of the host it may redirect to. */
  mediaHost: string;
  elsewhere: string;
  sent: SentWhatsApp[];
  requests: GraphRequest[];
  script(...behaviours: GraphBehaviour[]): void;
  /** Serves a media item: its id, as a received message names it. */
  addMedia(item: GraphMedia): string;
  /** From now on every request answers 401 with code 190; `revoke(false)`: the token works again. */
  revoke(on?: boolean): void;
  close(): Promise<void>;
}

export const GRAPH_VERSION = 'v24.0';

export async function startFakeGraph(opts: { phoneNumberId?: string; accessToken?: string } = {}): Promise<FakeGraph> {
  const phoneNumberId = opts.phoneNumberId ?? String(100_000_000_000_000 + Math.floor(Math.random() * 1e12));
  const accessToken = opts.accessToken ?? `EAAG${randomBytes(24).toString('hex')}`;
  const sent: SentWhatsApp[] = [];
  const requests: GraphRequest[] = [];
  const queue: GraphBehaviour[] = [];
  const hanging: ServerResponse[] = [];
  const media = new Map<string, GraphMedia & { token: string }>();
  let revoked = false;
  const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify(body));
  };
  const graphError = (res: ServerResponse, status: number, code: number, title: string, headers: Record<string, string> = {}) =>
    json(res, status, { error: { message: `(#${code}) ${title}`, type: 'OAuthException', code, error_data: { messaging_product: 'whatsapp', details: title }, fbtrace_id: randomBytes(8).toString('base64url') } }, headers);
  /** The number the fake plays, and any other of the same business (tests add channels freely). */
  const isPhoneNumberId = (id: string) => id === phoneNumberId || /^\d{15}$/.test(id);
  const authorized = (req: IncomingMessage) => !revoked && req.headers.authorization === `Bearer ${accessToken}`;
  const refuseToken = (res: ServerResponse) =>
    json(res, 401, { error: { message: 'Error validating access token: The session has been invalidated because the user changed their password or Facebook has changed the session for security reasons.', type: 'OAuthException', code: 190, error_subcode: 460, fbtrace_id: 'A' } });

  const listen = async (handler: (req: IncomingMessage, res: ServerResponse, body: string) => void | Promise<void>, name: GraphRequest['server']) => {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        requests.push({ server: name, method: req.method ?? '', path: req.url ?? '', auth: req.headers.authorization, body, at: Date.now() });
        void handler(req, res, body);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
  };

  const elsewhere = await listen((_req, res) => void res.writeHead(200, { 'content-type': 'application/octet-stream' }).end('not the media'), 'elsewhere');
  const mediaHost = await listen((req, res) => {
    const id = new URL(req.url ?? '/', 'http://x').searchParams.get('mid') ?? '';
    const item = media.get(id);
    if (!item) return void res.writeHead(404).end();
    // Meta's media host wants the same token as the API.
    if (!authorized(req)) return refuseToken(res);
    const status = item.failFirst?.shift();
    if (status) return void res.writeHead(status, { 'content-type': 'text/plain' }).end(`Scripted ${status}`);
    if (item.redirect) return void res.writeHead(302, { location: `${elsewhere.origin}/copy?mid=${id}` }).end();
    res.writeHead(200, { 'content-type': item.mimeType, 'content-length': item.content.length });
    res.end(item.content);
  }, 'media');

  const api = await listen(async (req, res, body) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    const parts = path.split('/').filter(Boolean);
    if (parts[0] !== GRAPH_VERSION) return graphError(res, 400, 2500, `Unknown path components: /${parts[0] ?? ''}`);
    if (!authorized(req)) return refuseToken(res);
    if (req.method === 'POST' && parts.length === 3 && isPhoneNumberId(parts[1]!) && parts[2] === 'messages') {
      let message: Record<string, unknown>;
      try {
        message = JSON.parse(body) as Record<string, unknown>;
      } catch {
        return graphError(res, 400, 100, 'Invalid parameter');
      }
      if (message.messaging_product !== 'whatsapp' || typeof message.to !== 'string') return graphError(res, 400, 100, 'Invalid parameter');
      const behaviour = queue.shift() ?? { kind: 'accept' };
      const wamid = behaviour.kind === 'accept' ? `wamid.${randomBytes(24).toString('base64')}` : null;
      sent.push({ wamid, body: message, auth: req.headers.authorization, path });
      if (behaviour.kind === 'hang') return void hanging.push(res);
      if (behaviour.kind === 'error') return graphError(res, behaviour.status, behaviour.code, behaviour.title ?? `Scripted ${behaviour.code}`, behaviour.retryAfter ? { 'retry-after': behaviour.retryAfter } : {});
      const to = message.to;
      return json(res, 200, { messaging_product: 'whatsapp', contacts: [{ input: to, ...(/^\d+$/.test(to) ? { wa_id: to } : { user_id: to }) }], messages: [{ id: wamid, ...(message.type === 'template' ? { message_status: 'accepted' } : {}) }] });
    }
    if (req.method === 'GET' && parts.length === 2 && isPhoneNumberId(parts[1]!) && !media.has(parts[1]!)) {
      return json(res, 200, { display_phone_number: '+1 555-010-0000', verified_name: 'Test Business', id: parts[1] });
    }
    if (req.method === 'GET' && parts.length === 2) {
      const item = media.get(parts[1]!);
      if (!item) return graphError(res, 404, 100, 'Unsupported get request. Object does not exist');
      return json(res, 200, {
        messaging_product: 'whatsapp',
        url: `${mediaHost.origin}/whatsapp_business/attachments/?mid=${parts[1]}&ext=${Math.floor(Date.now() / 1000) + 300}&hash=${randomBytes(8).toString('hex')}`,
        mime_type: item.mimeType,
        sha256: item.sha256 ?? createHash('sha256').update(item.content).digest('hex'),
        file_size: String(item.content.length),
        id: parts[1],
      });
    }
    return graphError(res, 400, 100, 'Unsupported request');
  }, 'api');

  return {
    url: api.origin,
    version: GRAPH_VERSION,
    phoneNumberId,
    accessToken,
    mediaHost: mediaHost.origin,
    elsewhere: elsewhere.origin,
    sent,
    requests,
    script: (...behaviours) => void queue.push(...behaviours),
    addMedia(item) {
      const id = String(1_000_000_000_000_000 + Math.floor(Math.random() * 1e15));
      media.set(id, { ...item, token: accessToken });
      return id;
    },
    revoke: (on = true) => void (revoked = on),
    close: async () => {
      for (const res of hanging) res.destroy();
      for (const { server } of [api, mediaHost, elsewhere]) {
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      }
    },
  };
}

// ------------------------------------------------------------------ webhooks as Meta sends them

/**
 * JSON as Meta writes its webhook bodies: `/` escaped as `\/` and every non-ASCII character as `\uXXXX`, so
 * that the bytes differ from `JSON.stringify`'s (a body re-serialized by the receiver no longer verifies).
 */
export function metaJson(value: unknown): string {
  return JSON.stringify(value)
    .replace(/\//g, '\\/')
    .replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** `X-Hub-Signature-256` of a body. */
export const hubSignature = (appSecret: string, body: string | Buffer) => `sha256=${createHmac('sha256', appSecret).update(body).digest('hex')}`;

export interface WebhookContact {
  waId?: string;
  userId?: string;
  name?: string;
}

/** One `changes[]` of `field: "messages"` for a phone number. */
export function messagesChange(phoneNumberId: string, value: { contacts?: WebhookContact[]; messages?: unknown[]; statuses?: unknown[]; displayPhoneNumber?: string }) {
  return {
    field: 'messages',
    value: {
      messaging_product: 'whatsapp',
      metadata: { display_phone_number: value.displayPhoneNumber ?? '15550100000', phone_number_id: phoneNumberId },
      ...(value.contacts ? { contacts: value.contacts.map((c) => ({ profile: { name: c.name ?? 'Customer' }, ...(c.waId ? { wa_id: c.waId } : {}), ...(c.userId ? { user_id: c.userId } : {}) })) } : {}),
      ...(value.messages ? { messages: value.messages } : {}),
      ...(value.statuses ? { statuses: value.statuses } : {}),
    },
  };
}

/** A whole webhook body: entries of changes. */
export const webhookBody = (...entries: unknown[][]) => ({ object: 'whatsapp_business_account', entry: entries.map((changes, i) => ({ id: String(102290129340398 + i), changes })) });

export const wamid = () => `wamid.${randomBytes(24).toString('base64')}`;
const now = () => String(Math.floor(Date.now() / 1000));

/** A received text as Meta sends it. */
export const textMessage = (from: string, body: string, extra: Record<string, unknown> = {}) => ({ from, id: wamid(), timestamp: now(), type: 'text', text: { body }, ...extra });

/** A status report as Meta sends it. */
export function statusReport(id: string, status: 'sent' | 'delivered' | 'read' | 'failed', recipient: string, error?: { code: number; title: string }) {
  return {
    id,
    status,
    timestamp: now(),
    recipient_id: recipient,
    ...(status === 'failed' && error ? { errors: [{ code: error.code, title: error.title, message: error.title, error_data: { details: error.title }, href: 'https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes/' }] } : {}),
    ...(status !== 'failed' ? { conversation: { id: randomBytes(16).toString('hex'), origin: { type: 'service' } }, pricing: { billable: true, pricing_model: 'PMP', category: 'service' } } : {}),
  };
}
