import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { isDatabaseUnavailable, toAppError } from '../core/errors.js';

/**
 * An OAuth error answered as JSON `{ error, error_description }` (RFC 6749 §5.2, RFC 7591 §3.2.2).
 * The authorization server never uses the REST error shape: OAuth clients parse these codes.
 */
export class OAuthError extends Error {
  constructor(
    readonly error: string,
    readonly description: string,
    readonly status = 400,
    /** Extra response headers, e.g. `WWW-Authenticate` for `invalid_client` or `Retry-After`. */
    readonly headers: Record<string, string> = {},
  ) {
    super(description);
    this.name = 'OAuthError';
  }
}

/** Responses that carry credentials or one-time values must never be cached (RFC 6749 §5.1). */
export function noStore(reply: FastifyReply) {
  return reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
}

export function sendOAuthError(reply: FastifyReply, err: OAuthError) {
  for (const [name, value] of Object.entries(err.headers)) reply.header(name, value);
  return noStore(reply)
    .code(err.status)
    .type('application/json; charset=utf-8')
    .send({ error: err.error, error_description: err.description });
}

/**
 * Any error thrown under /oauth or /.well-known as an OAuth error: body-parser failures are the client's
 * `invalid_request` (or `invalid_client_metadata` at registration), a database outage is a 503
 * `temporarily_unavailable`, anything else a 500 `server_error` without internals.
 */
export function toOAuthError(err: unknown, req: FastifyRequest): OAuthError {
  if (err instanceof OAuthError) return err;
  const fe = err as Partial<FastifyError>;
  const badRequestCode = req.url.startsWith('/oauth/register') ? 'invalid_client_metadata' : 'invalid_request';
  if (fe.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return new OAuthError(badRequestCode, 'The request body is too large', 413);
  if (fe.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    return new OAuthError(badRequestCode, 'Unsupported Content-Type: send application/x-www-form-urlencoded or application/json', 415);
  }
  if (err instanceof SyntaxError || fe.code?.startsWith('FST_ERR_CTP')) return new OAuthError(badRequestCode, 'The request body could not be parsed');
  if (typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) return new OAuthError(badRequestCode, 'The request could not be read');
  if (isDatabaseUnavailable(err)) {
    return new OAuthError('temporarily_unavailable', 'The service is temporarily unavailable; try again shortly', 503, { 'retry-after': '2' });
  }
  // Values the database refuses (NUL bytes, bad encodings) are the client's input, not our fault.
  if (toAppError(err).code === 'BAD_REQUEST') return new OAuthError(badRequestCode, 'A value in the request cannot be stored or compared');
  req.log.error({ err }, 'unexpected error in the authorization server');
  return new OAuthError('server_error', 'An unexpected error occurred', 500);
}
