import { z } from 'zod';

/**
 * The closed list of error codes, each with its HTTP status. The REST adapter answers with
 * `{ error: { code, message, details? } }`; the MCP adapter returns an `isError` tool result with the same body.
 */
export const ERROR_STATUS = {
  /** The input failed its schema; `details` is the z.treeifyError tree. */
  VALIDATION_ERROR: 400,
  /** The request could not be read: malformed JSON, wrong content type. */
  BAD_REQUEST: 400,
  /** No API key, an unknown one or a revoked one. */
  UNAUTHORIZED: 401,
  /** The organization's credit balance does not cover the operation's cost. */
  INSUFFICIENT_CREDITS: 402,
  /** The API key lacks the permission the operation needs. */
  FORBIDDEN: 403,
  /** No such route, or the record does not exist, is soft-deleted or belongs to another organization. */
  NOT_FOUND: 404,
  /** The body is larger than the limit (1 MiB). */
  PAYLOAD_TOO_LARGE: 413,
  /** An `Idempotency-Key` already used with another request (method, path or body). */
  IDEMPOTENCY_KEY_REUSED: 400,
  /** The request conflicts with what another organization holds (a domain it verified); the other party is never named. */
  CONFLICT: 409,
  /** A request with the same `Idempotency-Key` is still running; `Retry-After` says when to try again. */
  IDEMPOTENCY_IN_PROGRESS: 409,
  /** The number opted out of texts from the channel (it texted STOP); nothing was sent. */
  RECIPIENT_OPTED_OUT: 409,
  /** Free-form WhatsApp text to a recipient who has not written in the last 24 hours; a template may be sent instead. Nothing reached Meta. */
  WHATSAPP_WINDOW_CLOSED: 409,
  /** Too many requests for this key in the current window; `Retry-After` says when to try again. */
  RATE_LIMITED: 429,
  /** A fault of ours; nothing about it is disclosed. */
  INTERNAL_ERROR: 500,
  /** A dependency (the database) is unreachable right now; retrying later works. */
  SERVICE_UNAVAILABLE: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;
export const ERROR_CODES = Object.keys(ERROR_STATUS) as [ErrorCode, ...ErrorCode[]];

/** The spec's validation details tree (`z.treeifyError`), arrays as `items`. */
export interface ErrorTree {
  errors: string[];
  properties?: Record<string, ErrorTree>;
  items?: (ErrorTree | null)[];
}

export class AppError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: ErrorTree,
    /** Seconds, sent as `Retry-After` (429, 503). */
    readonly retryAfter?: number,
  ) {
    super(message);
    this.name = 'AppError';
    this.status = ERROR_STATUS[code];
  }

  toBody() {
    return { error: { code: this.code, message: this.message, ...(this.details ? { details: this.details } : {}) } };
  }
}

/** The answer while the database cannot be reached or does not answer in time: 503 with `Retry-After: 2`. */
export const unavailable = () => new AppError('SERVICE_UNAVAILABLE', 'The service is temporarily unavailable; try again shortly', undefined, 2);

export const notFound = (what = 'Resource') => new AppError('NOT_FOUND', `${what} not found`);

export function validationError(error: z.ZodError, message = 'The request is invalid'): AppError {
  return new AppError('VALIDATION_ERROR', message, z.treeifyError(error) as ErrorTree);
}

/** A validation error about one field, shaped like the schema errors (`details.properties[field].errors`). */
export function fieldError(field: string, issue: string): AppError {
  return new AppError('VALIDATION_ERROR', 'The request is invalid', {
    errors: [],
    properties: { [field]: { errors: [issue] } },
  });
}

// node-postgres / PostgreSQL conditions that mean "the database is not reachable right now".
// 57014: a statement cancelled by statement_timeout; 55P03: lock_timeout (a lock held elsewhere too long).
const UNAVAILABLE_PG_CLASSES = ['08', '53', '57P', '57014', '55P03'];
const UNAVAILABLE_NODE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH']);
const UNAVAILABLE_MESSAGES = [/timeout exceeded when trying to connect/i, /Connection terminated/i, /Query read timeout/i, /connection is closed/i, /Client has encountered a connection error/i];

export function isDatabaseUnavailable(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') {
      if (UNAVAILABLE_NODE_CODES.has(code)) return true;
      if (UNAVAILABLE_PG_CLASSES.some((c) => code.startsWith(c))) return true;
    }
    const message = (e as { message?: unknown }).message;
    if (typeof message === 'string' && UNAVAILABLE_MESSAGES.some((re) => re.test(message))) return true;
  }
  return false;
}

/** SQLSTATE of a database error, looking through Drizzle's wrapping; undefined for any other error. */
export function pgErrorCode(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    // SQLSTATE: five digits or capitals, and no class begins with E (Node's EPIPE, EPERM, … do).
    if (typeof code === 'string' && /^[0-9A-DF-Z][0-9A-Z]{4}$/.test(code)) return code;
  }
  return undefined;
}

/** A unique index refused the write (SQLSTATE 23505). */
export const isUniqueViolation = (err: unknown): boolean => pgErrorCode(err) === '23505';

/**
 * Logs a failure of the service's own (5xx) with its cause, for whoever answers it (REST, an MCP tool);
 * client errors (4xx) are the client's and are not logged.
 */
export function logServerError(log: { error(obj: object, msg: string): void }, appError: AppError, err: unknown, context: Record<string, unknown> = {}) {
  if (appError.status < 500) return;
  log.error({ err, ...context }, appError.code === 'SERVICE_UNAVAILABLE' ? 'database unavailable' : 'unexpected error');
}

/** Any thrown value as an AppError; unknown faults become a bare INTERNAL_ERROR. */
export function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  if (err instanceof z.ZodError) return validationError(err);
  if (isDatabaseUnavailable(err)) return unavailable();
  const pgCode = pgErrorCode(err);
  // Values PostgreSQL refuses (out-of-range numbers, bad text encodings, ...) are the client's input.
  if (pgCode === '22003' || pgCode === '22021' || pgCode === '22P02' || pgCode === '22P05' || pgCode === '22007' || pgCode === '22008') {
    return new AppError('BAD_REQUEST', 'A value in the request cannot be stored');
  }
  return new AppError('INTERNAL_ERROR', 'An unexpected error occurred');
}
