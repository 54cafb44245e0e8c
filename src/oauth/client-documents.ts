import type { IncomingHttpHeaders } from 'node:http';
import type { Redis } from 'ioredis';
import { LRUCache } from 'lru-cache';
import type { Clock } from '../core/clock.js';
import { outboundRequest, OutboundProblem, urlProblem } from '../core/outbound.js';
import { createLimiter } from '../core/rate-limit.js';
import type { DbOrTx } from '../db/client.js';
import { oauthClients } from '../db/schema.js';
import { clientColumns, findClient, MAX_CLIENT_ID_LENGTH, parseRegistration, type Client } from './clients.js';

/**
 * Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document, preferred by the MCP
 * authorization spec): a client uses the https URL of a JSON document as its `client_id`, and this server
 * fetches that document instead of asking the client to register. The document is kept as a client row
 * (id = the URL) so that grants, codes and the connected-apps page treat both kinds of client alike; the
 * row is fetched again at an authorization request once its HTTP cache lifetime has passed.
 */

/** The draft recommends a limit of 5 kilobytes: a client's metadata is a few hundred bytes. */
export const CLIENT_DOCUMENT_MAX_BYTES = 5 * 1024;
export const CLIENT_DOCUMENT_TIMEOUT_MS = 5_000;
/** Kept this long when the document says nothing about caching; never longer than a day, whatever it says. */
const DEFAULT_LIFETIME_S = 60 * 60;
const MAX_LIFETIME_S = 24 * 60 * 60;
/**
 * Fetching is work this server does for anyone who opens an authorization URL, so it is bounded: a
 * document is kept at least a minute (even `no-store`), a failed fetch is remembered for a minute (the
 * same error is shown without fetching again), one IP address makes at most 10 fetches a minute, and a
 * process runs at most 4 fetches at once (requests for a document being fetched wait for that fetch).
 */
export const CLIENT_DOCUMENT_LIMITS = { minLifetimeS: 60, failureCacheS: 60, fetchesPerIpPerMinute: 10, maxConcurrentFetches: 4 } as const;
/** The setting that allows http and private addresses (development and tests only). */
const INSECURE_SETTING = 'OAUTH_CLIENT_METADATA_ALLOW_INSECURE';

export interface ClientDocumentPolicy {
  enabled: boolean;
  allowInsecure: boolean;
  timeoutMs?: number;
}

/** A document client_id is a URL; registered clients have `sbc_…` ids. */
export const isDocumentClientId = (clientId: string) => /^https?:\/\//i.test(clientId);

/** Thrown when a client_id URL or its document cannot be used; the message is shown on the error page. */
export class ClientDocumentError extends Error {
  constructor(
    message: string,
    /** The error page's status: 400, or 429/503 when the fetch was not attempted for now. */
    readonly status = 400,
    /** Seconds after which trying again may succeed (429/503). */
    readonly retryAfter?: number,
  ) {
    super(message);
  }
}

/**
 * Why a client_id URL is refused (draft §3): https with a path, no fragment, no credentials, no dot
 * segments, and a public address. The URL must be written in its normal form, because the document's own
 * `client_id` is compared with it character for character.
 */
export function clientIdUrlProblem(raw: string, allowInsecure: boolean): string | undefined {
  if (raw.length > MAX_CLIENT_ID_LENGTH) return `is longer than ${MAX_CLIENT_ID_LENGTH} characters`;
  const problem = urlProblem(raw, allowInsecure, INSECURE_SETTING);
  if (problem) return problem.charAt(0).toLowerCase() + problem.slice(1);
  const url = new URL(raw);
  if (url.pathname === '/') return 'must have a path (the document is not the site root)';
  if (url.href !== raw || /\/\.\.?(\/|$)/.test(url.pathname)) return `must be written in normal form (${url.href}), without dot segments`;
  return undefined;
}

/**
 * Seconds the document may be used before it is fetched again, from Cache-Control or Expires (RFC 9111),
 * but at least CLIENT_DOCUMENT_LIMITS.minLifetimeS (also for `no-store`) and at most a day.
 */
export function documentLifetimeS(headers: IncomingHttpHeaders, now: Date): number {
  return Math.max(CLIENT_DOCUMENT_LIMITS.minLifetimeS, statedLifetimeS(headers, now));
}

function statedLifetimeS(headers: IncomingHttpHeaders, now: Date): number {
  const cacheControl = String(headers['cache-control'] ?? '').toLowerCase();
  if (/(^|[\s,])(no-store|no-cache)\b/.test(cacheControl)) return 0;
  const maxAge = /(?:^|[\s,])max-age\s*=\s*"?(\d+)/.exec(cacheControl);
  if (maxAge) return Math.min(Number(maxAge[1]), MAX_LIFETIME_S);
  const expires = headers.expires ? Date.parse(headers.expires) : Number.NaN;
  if (!Number.isNaN(expires)) {
    const date = headers.date ? Date.parse(headers.date) : Number.NaN;
    return Math.max(0, Math.min(Math.floor((expires - (Number.isNaN(date) ? now.getTime() : date)) / 1000), MAX_LIFETIME_S));
  }
  return DEFAULT_LIFETIME_S;
}

/**
 * The client metadata a document declares, validated as a registration would be, plus the draft's own
 * rules: `client_id` equal to the URL, and no shared secret (there is no way to agree on one), so the
 * client is public (`none`).
 */
export function parseClientDocument(url: string, text: string) {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new ClientDocumentError('The client metadata document is not valid JSON.');
  }
  if (!doc || typeof doc !== 'object' || Array.isArray(doc)) throw new ClientDocumentError('The client metadata document must be a JSON object.');
  const { client_id: clientId, ...rest } = doc as Record<string, unknown>;
  if (clientId !== url) throw new ClientDocumentError(`The client metadata document's client_id must be exactly its own URL (${url}).`);
  if ('client_secret' in rest || 'client_secret_expires_at' in rest) throw new ClientDocumentError('A client metadata document must not contain a client secret.');
  const method = rest.token_endpoint_auth_method ?? 'none';
  if (method !== 'none') {
    throw new ClientDocumentError(`token_endpoint_auth_method "${String(method)}" is not supported for a client metadata document: only "none" (no shared secret can be set up this way).`);
  }
  try {
    return parseRegistration({ ...rest, token_endpoint_auth_method: 'none' });
  } catch (err) {
    throw new ClientDocumentError(`The client metadata document is invalid: ${(err as { description?: string }).description ?? (err as Error).message}`);
  }
}

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;

/** Fetches, validates and stores the document of a URL client_id; throws ClientDocumentError. */
async function refresh(db: DbOrTx, clientId: string, policy: ClientDocumentPolicy, clock: Clock): Promise<Client> {
  const problem = clientIdUrlProblem(clientId, policy.allowInsecure);
  if (problem) throw new ClientDocumentError(`The client_id URL ${problem}.`);
  let fetched;
  try {
    fetched = await outboundRequest(clientId, {
      method: 'GET',
      headers: { accept: 'application/json', 'user-agent': 'Switchboard/1' },
      allowInsecure: policy.allowInsecure,
      insecureSetting: INSECURE_SETTING,
      timeoutMs: policy.timeoutMs ?? CLIENT_DOCUMENT_TIMEOUT_MS,
      maxBytes: CLIENT_DOCUMENT_MAX_BYTES,
      overflow: 'fail',
    });
  } catch (err) {
    if (!(err instanceof OutboundProblem)) throw err;
    throw new ClientDocumentError(`The client metadata document at ${clientId} could not be fetched: ${err.message}.`);
  }
  if (fetched.status !== 200) throw new ClientDocumentError(`The client metadata document at ${clientId} answered HTTP ${fetched.status}, not 200.`);
  if (!JSON_TYPE.test(String(fetched.headers['content-type'] ?? ''))) throw new ClientDocumentError('The client metadata document must be served as application/json.');
  const metadata = parseClientDocument(clientId, fetched.body);
  const now = clock();
  const values = {
    secretHash: null,
    ...clientColumns(metadata),
    metadata: { client_id: clientId, ...metadata },
    documentExpiresAt: new Date(now.getTime() + documentLifetimeS(fetched.headers, now) * 1000),
  };
  // Several processes may fetch the same document at once: the last answer wins, every one is valid.
  const [row] = await db
    .insert(oauthClients)
    .values({ id: clientId, createdAt: now, ...values })
    .onConflictDoUpdate({ target: oauthClients.id, set: values })
    .returning();
  return row!;
}

/**
 * Looks a client up by `client_id`: registered clients in the table, document clients fetched when stale.
 * `ip` is the address of the request that needs the lookup; fetches are counted against it.
 */
export type ClientLookup = (clientId: string, ip?: string) => Promise<Client | undefined>;

export function createClientLookup(db: DbOrTx, policy: ClientDocumentPolicy, clock: Clock, redis?: Redis): ClientLookup {
  const limits = CLIENT_DOCUMENT_LIMITS;
  const perIp = createLimiter({ name: 'client-document-fetch', points: limits.fetchesPerIpPerMinute, durationSeconds: 60 }, redis);
  /** Recent failures by URL: the error and until when it is answered without a fetch. */
  const failures = new LRUCache<string, { error: ClientDocumentError; until: number }>({ max: 10_000 });
  /** Fetches under way in this process, by URL: a second request for the same document waits for the first. */
  const inFlight = new Map<string, Promise<Client>>();

  async function fetchOnce(clientId: string, ip: string | undefined): Promise<Client> {
    const failed = failures.get(clientId);
    if (failed && failed.until > clock().getTime()) throw failed.error;
    const running = inFlight.get(clientId);
    if (running) return running;
    if (ip !== undefined) {
      const allowed = await perIp.consume(ip);
      if (!allowed.allowed) {
        throw new ClientDocumentError(`Too many client metadata documents were fetched for your address; try again in ${allowed.retryAfter} s.`, 429, allowed.retryAfter);
      }
    }
    // Checked again after the wait above: another request may have started the same fetch meanwhile.
    const started = inFlight.get(clientId);
    if (started) return started;
    if (inFlight.size >= limits.maxConcurrentFetches) {
      throw new ClientDocumentError('This server is fetching other client metadata documents right now; try again in a moment.', 503, 1);
    }
    const fetching = refresh(db, clientId, policy, clock)
      .catch((err: unknown) => {
        if (err instanceof ClientDocumentError) failures.set(clientId, { error: err, until: clock().getTime() + limits.failureCacheS * 1000 });
        throw err;
      })
      .finally(() => inFlight.delete(clientId));
    inFlight.set(clientId, fetching);
    return fetching;
  }

  return async (clientId, ip) => {
    if (!policy.enabled || !isDocumentClientId(clientId)) return findClient(db, clientId);
    const row = await findClient(db, clientId);
    if (row?.documentExpiresAt && row.documentExpiresAt > clock()) return row;
    return fetchOnce(clientId, ip);
  };
}
