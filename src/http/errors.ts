import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, logServerError, toAppError } from '../core/errors.js';

/** Fastify's own errors (body parsing, limits) mapped to the error codes of the API. */
function fromFastify(err: FastifyError): AppError | undefined {
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new AppError('PAYLOAD_TOO_LARGE', 'The request body is larger than 1 MiB');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new AppError('BAD_REQUEST', 'Unsupported Content-Type: send the body as application/json');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new AppError('BAD_REQUEST', 'The body is empty although Content-Type is application/json');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new AppError('BAD_REQUEST', 'The body is not valid JSON');
    case 'FST_ERR_BAD_URL':
      return new AppError('BAD_REQUEST', 'The URL is not valid (bad percent-encoding)');
  }
  if (err instanceof SyntaxError || err.code?.startsWith('FST_ERR_CTP')) return new AppError('BAD_REQUEST', 'The body is not valid JSON');
  if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500 && !(err instanceof AppError)) {
    return new AppError('BAD_REQUEST', 'The request could not be read');
  }
  return undefined;
}

/** The one place an error becomes a response: `{ error: { code, message, details? } }`, never internals. */
export function sendError(err: unknown, req: FastifyRequest, reply: FastifyReply) {
  const appError = fromFastify(err as FastifyError) ?? toAppError(err);
  logServerError(req.log, appError, err);
  // Errors raised before the onRequest hooks (e.g. an unreadable URL) still carry the request id.
  reply.header('x-request-id', req.id);
  if (appError.retryAfter) reply.header('retry-after', String(appError.retryAfter));
  return reply.code(appError.status).type('application/json; charset=utf-8').send(appError.toBody());
}
