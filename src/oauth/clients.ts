import { forbiddenKeysIn } from '../core/schemas.js';
import { isLoopbackHost } from '../core/secrets.js';
import { eq } from 'drizzle-orm';
import { z } from 'zod';
import type { Clock } from '../core/clock.js';
import { randomToken, safeEqual, sha256 } from '../core/secrets.js';
import type { DbOrTx } from '../db/client.js';
import { oauthClients } from '../db/schema.js';
import { OAuthError } from './errors.js';
import { TOKEN_ENDPOINT_AUTH_METHODS } from './metadata.js';

export type Client = typeof oauthClients.$inferSelect;

/** Schemes that can run code or read local data in a browser: never a redirect target. */
const REFUSED_SCHEMES = new Set(['javascript', 'data', 'file', 'vbscript', 'blob', 'about', 'filesystem', 'view-source', 'jar', 'ws', 'wss', 'ftp', 'mailto', 'tel', 'sms']);
const MAX_REDIRECT_URIS = 10;
const MAX_URI_LENGTH = 2000;

/**
 * Why a redirect URI is refused, or undefined when it is acceptable: https anywhere, http only on a
 * loopback host (RFC 8252 §7.3), or a native app's private-use scheme (`cursor://…`, `com.example.app:/cb`,
 * RFC 8252 §7.1). No fragments (RFC 6749 §3.1.2), no user info.
 */
export function redirectUriProblem(raw: string): string | undefined {
  if (raw.length > MAX_URI_LENGTH) return `is longer than ${MAX_URI_LENGTH} characters`;
  if (raw.includes('#')) return 'must not contain a fragment';
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'is not an absolute URI';
  }
  const scheme = url.protocol.slice(0, -1);
  if (REFUSED_SCHEMES.has(scheme)) return `uses the refused scheme "${scheme}:"`;
  if (url.username || url.password) return 'must not contain user information';
  // URL parsing forgives `https:///cb`, `https:cb` and backslashes (it reads a host "cb"); a registered URI must say what it means.
  if ((scheme === 'https' || scheme === 'http') && !/^https?:\/\/[^/\\?#]/i.test(raw)) return 'is not a well-formed URL (scheme://host/path)';
  if (scheme === 'https') return url.hostname ? undefined : 'has no host';
  if (scheme === 'http') return isLoopbackHost(url.hostname) ? undefined : 'uses http on a host that is not loopback (127.0.0.1, [::1] or localhost); use https';
  return /^[a-z][a-z0-9+.-]*$/.test(scheme) ? undefined : 'has an invalid scheme';
}

/**
 * Whether `given` names one of the client's registered redirect URIs: exact string match, except that a
 * loopback http URI may use any port (RFC 8252 §7.3: native apps listen on an ephemeral port).
 */
export function redirectUriMatches(registered: string[], given: string): boolean {
  if (registered.includes(given)) return true;
  let url: URL;
  try {
    url = new URL(given);
  } catch {
    return false;
  }
  if (url.protocol !== 'http:' || !isLoopbackHost(url.hostname) || url.hash || given.includes('#')) return false;
  return registered.some((r) => {
    try {
      const reg = new URL(r);
      return reg.protocol === 'http:' && reg.hostname === url.hostname && reg.pathname === url.pathname && reg.search === url.search && !url.username && !url.password;
    } catch {
      return false;
    }
  });
}

const WebUrl = z
  .string()
  .max(MAX_URI_LENGTH)
  .refine((v) => /^https?:\/\//i.test(v) && URL.canParse(v), 'must be an http(s) URL');
const Text = z.string().max(200);

/** RFC 7591 client metadata we understand. Others are ignored (RFC 7591 §2); `null` counts as absent. */
const RegistrationRequest = z.object({
  redirect_uris: z.array(z.string()).min(1, 'at least one redirect URI is required').max(MAX_REDIRECT_URIS, `at most ${MAX_REDIRECT_URIS} redirect URIs`),
  token_endpoint_auth_method: z.enum(TOKEN_ENDPOINT_AUTH_METHODS).nullish(),
  grant_types: z.array(z.enum(['authorization_code', 'refresh_token'])).min(1).nullish(),
  response_types: z.array(z.literal('code')).min(1).nullish(),
  client_name: Text.nullish(),
  client_uri: WebUrl.nullish(),
  logo_uri: WebUrl.nullish(),
  tos_uri: WebUrl.nullish(),
  policy_uri: WebUrl.nullish(),
  scope: z.string().max(1000).nullish(),
  contacts: z.array(z.string().max(320)).max(10).nullish(),
  software_id: Text.nullish(),
  software_version: Text.nullish(),
});

const OPTIONAL_FIELDS = ['client_name', 'client_uri', 'logo_uri', 'tos_uri', 'policy_uri', 'scope', 'contacts', 'software_id', 'software_version'] as const;

/** Validates RFC 7591 metadata into what is stored and echoed; throws `invalid_redirect_uri` / `invalid_client_metadata`. */
export function parseRegistration(body: unknown) {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new OAuthError('invalid_client_metadata', 'The body must be a JSON object of client metadata');
  }
  const forbidden = forbiddenKeysIn(body);
  if (forbidden.length) throw new OAuthError('invalid_client_metadata', `Unrecognized key: "${forbidden[0]}"`);
  const parsed = RegistrationRequest.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const field = issue.path.join('.') || 'body';
    throw new OAuthError(issue.path[0] === 'redirect_uris' ? 'invalid_redirect_uri' : 'invalid_client_metadata', `${field}: ${issue.message}`);
  }
  const m = parsed.data;
  for (const uri of m.redirect_uris) {
    const problem = redirectUriProblem(uri);
    if (problem) throw new OAuthError('invalid_redirect_uri', `Redirect URI ${JSON.stringify(uri.slice(0, 200))} ${problem}`);
  }
  // Omitted grant types mean both: clients that leave them out still expect a refresh token for offline_access.
  const grantTypes = [...new Set(m.grant_types ?? ['authorization_code', 'refresh_token'])];
  if (!grantTypes.includes('authorization_code')) {
    throw new OAuthError('invalid_client_metadata', 'grant_types must include "authorization_code" (the only way to obtain tokens here)');
  }
  const metadata: Record<string, string | string[]> = {
    redirect_uris: [...new Set(m.redirect_uris)],
    // RFC 7591 §2: the default method is client_secret_basic.
    token_endpoint_auth_method: m.token_endpoint_auth_method ?? 'client_secret_basic',
    grant_types: grantTypes,
    response_types: ['code'],
  };
  for (const field of OPTIONAL_FIELDS) {
    const value = m[field];
    if (value !== null && value !== undefined) metadata[field] = value;
  }
  return metadata as {
    redirect_uris: string[];
    token_endpoint_auth_method: (typeof TOKEN_ENDPOINT_AUTH_METHODS)[number];
    grant_types: string[];
    response_types: string[];
  } & Partial<Record<(typeof OPTIONAL_FIELDS)[number], string>>;
}

/** The columns of a client row that its validated metadata decides (registration and metadata documents alike). */
export function clientColumns(metadata: ReturnType<typeof parseRegistration>) {
  return {
    tokenEndpointAuthMethod: metadata.token_endpoint_auth_method,
    redirectUris: metadata.redirect_uris,
    grantTypes: metadata.grant_types,
    responseTypes: metadata.response_types,
    clientName: metadata.client_name ?? null,
    clientUri: metadata.client_uri ?? null,
    logoUri: metadata.logo_uri ?? null,
    scope: metadata.scope ?? null,
  };
}

/** Stores a new client; the secret (confidential methods only) is returned once and kept as a SHA-256 hash. */
export async function registerClient(db: DbOrTx, body: unknown, clock: Clock) {
  const metadata = parseRegistration(body);
  const now = clock();
  const clientId = `sbc_${randomToken(16)}`;
  const secret = metadata.token_endpoint_auth_method === 'none' ? undefined : `sbcs_${randomToken(32)}`;
  await db.insert(oauthClients).values({
    id: clientId,
    createdAt: now,
    secretHash: secret ? sha256(secret) : null,
    ...clientColumns(metadata),
    metadata,
  });
  return {
    client_id: clientId,
    client_id_issued_at: Math.floor(now.getTime() / 1000),
    ...(secret ? { client_secret: secret, client_secret_expires_at: 0 } : {}),
    ...metadata,
  };
}

/** Registered ids are short; metadata-document ids are URLs of up to this many characters. */
export const MAX_CLIENT_ID_LENGTH = 1000;

export async function findClient(db: DbOrTx, clientId: string): Promise<Client | undefined> {
  if (clientId.length > MAX_CLIENT_ID_LENGTH || clientId.includes('\0')) return undefined;
  const [row] = await db.select().from(oauthClients).where(eq(oauthClients.id, clientId)).limit(1);
  return row;
}

/** Client credentials as sent: HTTP Basic (RFC 6749 §2.3.1, form-encoded parts) or body parameters. */
export interface PresentedCredentials {
  clientId: string | undefined;
  secret: string | undefined;
  basic: boolean;
}

export function readClientCredentials(authorization: string | undefined, body: Record<string, string>): PresentedCredentials {
  const match = authorization?.match(/^Basic\s+([A-Za-z0-9+/=._~-]+)\s*$/i);
  if (authorization && /^Basic\s/i.test(authorization)) {
    const decoded = match ? Buffer.from(match[1]!, 'base64').toString('utf8') : '';
    const colon = decoded.indexOf(':');
    if (colon < 0) throw new OAuthError('invalid_client', 'Malformed HTTP Basic credentials', 401, { 'www-authenticate': 'Basic realm="OAuth"' });
    const id = formDecode(decoded.slice(0, colon));
    const secret = formDecode(decoded.slice(colon + 1));
    if (body.client_id !== undefined && body.client_id !== id) throw new OAuthError('invalid_request', 'client_id in the body differs from the HTTP Basic credentials');
    return { clientId: id, secret, basic: true };
  }
  return { clientId: body.client_id, secret: body.client_secret, basic: false };
}

function formDecode(value: string): string {
  try {
    return decodeURIComponent(value.replace(/\+/g, ' '));
  } catch {
    return value;
  }
}

/**
 * The client the request authenticates as (RFC 6749 §2.3): public clients by `client_id`, confidential ones by
 * their secret (Basic or body, compared in constant time). Anything else is a 401 `invalid_client`.
 */
export async function authenticateClient(db: DbOrTx, creds: PresentedCredentials): Promise<Client> {
  const challenge = creds.basic ? { 'www-authenticate': 'Basic realm="OAuth"' } : undefined;
  if (!creds.clientId) throw new OAuthError('invalid_client', 'Client authentication is required (client_id)', 401, challenge);
  const client = await findClient(db, creds.clientId);
  if (!client) throw new OAuthError('invalid_client', 'Unknown client', 401, challenge);
  if (client.secretHash) {
    // The method the client registered is the only one it may use (RFC 7591 §2): a secret sent another way is refused.
    if (creds.secret && creds.basic !== (client.tokenEndpointAuthMethod === 'client_secret_basic')) {
      throw new OAuthError('invalid_client', `This client authenticates with ${client.tokenEndpointAuthMethod}, as it registered`, 401, challenge);
    }
    if (!creds.secret || !safeEqual(sha256(creds.secret), client.secretHash)) {
      throw new OAuthError('invalid_client', 'Client authentication failed', 401, challenge ?? (client.tokenEndpointAuthMethod === 'client_secret_basic' ? { 'www-authenticate': 'Basic realm="OAuth"' } : {}));
    }
  }
  return client;
}
