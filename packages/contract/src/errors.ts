/**
 * The one error type that crosses layers, and the one table that maps it.
 *
 * Handlers throw `AppError` with a stable `code`; the code crosses gRPC in metadata
 * (`x-relayplane-error-code`) next to the matching gRPC status, and the gateway turns
 * it into an HTTP status with `httpStatus`. Public bodies are `{"error": message}`.
 */

export const ERROR_CODES = {
  invalid_request: { http: 400, grpc: 3 /* INVALID_ARGUMENT */ },
  unauthenticated: { http: 401, grpc: 16 /* UNAUTHENTICATED */ },
  payment_required: { http: 402, grpc: 9 /* FAILED_PRECONDITION */ },
  forbidden: { http: 403, grpc: 7 /* PERMISSION_DENIED */ },
  not_found: { http: 404, grpc: 5 /* NOT_FOUND */ },
  method_not_allowed: { http: 405, grpc: 12 /* UNIMPLEMENTED */ },
  conflict: { http: 409, grpc: 6 /* ALREADY_EXISTS */ },
  payload_too_large: { http: 413, grpc: 3 /* INVALID_ARGUMENT */ },
  unsupported_media_type: { http: 415, grpc: 3 /* INVALID_ARGUMENT */ },
  unprocessable: { http: 422, grpc: 9 /* FAILED_PRECONDITION */ },
  rate_limited: { http: 429, grpc: 8 /* RESOURCE_EXHAUSTED */ },
  internal: { http: 500, grpc: 13 /* INTERNAL */ },
  unavailable: { http: 503, grpc: 14 /* UNAVAILABLE */ },
} as const satisfies Record<string, { http: number; grpc: number }>;

export type ErrorCode = keyof typeof ERROR_CODES;

export const ERROR_CODE_METADATA_KEY = 'x-relayplane-error-code';
export const RETRY_AFTER_METADATA_KEY = 'x-relayplane-retry-after';

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERROR_CODES, value);
}

export interface AppErrorOptions {
  /** Seconds after which a retry may succeed (429, 503). */
  retryAfterSeconds?: number;
  cause?: unknown;
}

/** The retry hint of an `unavailable` error that names none: every 503 says when to try again. */
export const DEFAULT_RETRY_AFTER_SECONDS = 1;

export class AppError extends Error {
  override readonly name = 'AppError';
  readonly code: ErrorCode;
  readonly retryAfterSeconds: number | undefined;

  constructor(code: ErrorCode, message: string, options: AppErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.retryAfterSeconds =
      options.retryAfterSeconds ?? (code === 'unavailable' ? DEFAULT_RETRY_AFTER_SECONDS : undefined);
  }

  get httpStatus(): number {
    return ERROR_CODES[this.code].http;
  }

  get grpcStatus(): number {
    return ERROR_CODES[this.code].grpc;
  }
}

/** The message a caller sees for a bad, expired or unknown bearer token (contract wording). */
export const INVALID_TOKEN_MESSAGE = 'invalid or expired token';
/** A member of a tenant that requires a second factor, without one: refused by the gateway and by admin alike. */
export const MFA_ENROLMENT_REQUIRED_MESSAGE =
  'this tenant requires a second factor: enrol one first (POST /admin/v1/auth/mfa/totp)';

/** Message for 5xx: nothing internal leaks. */
export const INTERNAL_MESSAGE = 'internal error';

/** Message of a 503 caused by a dependency (database, Redis) being away: what the caller may do, nothing internal. */
export const DEPENDENCY_UNAVAILABLE_MESSAGE = 'temporarily unavailable; retry shortly';

export function httpStatusOf(code: ErrorCode): number {
  return ERROR_CODES[code].http;
}

/** The public error body. */
export function errorBody(message: string): { error: string } {
  return { error: message };
}

// ------------------------------------------------------------------ dependency failures
//
// A handler that meets a database or Redis that is away throws whatever the driver throws.
// Those errors mean "not done, try again" and must reach the caller as UNAVAILABLE / 503 +
// Retry-After; every other unexpected error is a bug and stays INTERNAL / 500, visible.
// The drivers give no common type, so the list below names what they do give: node's socket
// error codes, PostgreSQL's SQLSTATEs (pg's `code`), and the few fixed messages pg, pg-pool
// and ioredis use for their own timeouts and closed connections. Matching is exact (code,
// name, or a message's fixed start), never a search through free text, so a bug whose
// message happens to mention a connection stays a 500.

/** Socket errors: the peer refused, reset, vanished or could not be resolved. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
]);

/** SQLSTATE classes whose every code is the server being unreachable or out of resources. */
const SQLSTATE_CLASSES = new Set([
  '08', // connection exception
  '53', // insufficient resources: too many connections (53300), out of memory, disk full
]);

/** Single SQLSTATEs that mean "not done, retry". */
const SQLSTATES = new Set([
  '57P01', // admin_shutdown: the server is shutting down (a restart, a failover)
  '57P02', // crash_shutdown: another backend crashed, the server restarts
  '57P03', // cannot_connect_now: the server is starting or in recovery
  '57014', // query_canceled: statement_timeout, or cancelled by an operator
  '25006', // read_only_sql_transaction: a write reached a replica during a failover
  '40001', // serialization_failure: the transaction rolled back, retrying succeeds
  '40P01', // deadlock_detected: one side rolled back, retrying succeeds
]);

/** pg, pg-pool and ioredis: errors for a lost connection or their own timeouts, by their fixed message. */
const DRIVER_MESSAGES = [
  // pg
  'Connection terminated', // … unexpectedly / … due to connection timeout (pool connect timeout)
  'Query read timeout', // query_timeout: the server did not answer in time (blackholed network)
  'Client has encountered a connection error and is not queryable',
  'Client was closed and is not queryable',
  'Cannot use a pool after calling end on the pool', // a request racing shutdown
  // pg-pool
  'timeout exceeded when trying to connect', // every connection busy for connectionTimeoutMillis
  // ioredis
  'Connection is closed.',
  "Stream isn't writeable and enableOfflineQueue options is false",
  'Command timed out', // commandTimeout
  'Socket timeout.', // socketTimeout
  'None of startup nodes is available',
  // ioredis' cluster client: the master of a key's slot cannot be reached (its retries spent),
  // and a command before the cluster is ready on a client without an offline queue
  'Too many Cluster redirections.',
  "Cluster isn't ready and enableOfflineQueue options is false",
];

/** ioredis error classes (by name) that only ever mean the server is away. */
const DRIVER_ERROR_NAMES = new Set(['MaxRetriesPerRequestError', 'ClusterAllFailedError']);

/** Redis error replies (their first word) of a server that cannot serve right now. */
const REDIS_REPLY_PREFIXES = new Set([
  'LOADING',
  'READONLY',
  'MASTERDOWN',
  'BUSY',
  'TRYAGAIN',
  'CLUSTERDOWN',
]);

const SQLSTATE = /^[0-9A-Z]{5}$/;

/** How deep the cause chain is followed (a cycle cannot loop forever). */
const MAX_CAUSE_DEPTH = 5;

/**
 * Why `err` is a dependency being away (a short label, safe to log: `ECONNREFUSED`,
 * `SQLSTATE 57P01`, `Query read timeout`), or undefined when it is not one. Follows
 * `cause` and an AggregateError's `errors` (node's connect to several addresses).
 */
export function dependencyFailure(err: unknown, depth = 0): string | undefined {
  if (typeof err !== 'object' || err === null || depth > MAX_CAUSE_DEPTH) return undefined;
  const { code, name, message } = err as { code?: unknown; name?: unknown; message?: unknown };
  if (typeof code === 'string') {
    if (NETWORK_CODES.has(code)) return code;
    if (SQLSTATE.test(code) && (SQLSTATES.has(code) || SQLSTATE_CLASSES.has(code.slice(0, 2))))
      return `SQLSTATE ${code}`;
  }
  if (typeof name === 'string' && DRIVER_ERROR_NAMES.has(name)) return name;
  if (typeof message === 'string') {
    const known = DRIVER_MESSAGES.find((m) => message.startsWith(m));
    if (known) return known;
    if (name === 'ReplyError' && REDIS_REPLY_PREFIXES.has(message.split(' ', 1)[0] ?? ''))
      return `Redis ${message.split(' ', 1)[0]}`;
  }
  const { cause, errors } = err as { cause?: unknown; errors?: unknown };
  for (const inner of [cause, ...(Array.isArray(errors) ? errors : [])]) {
    const found = dependencyFailure(inner, depth + 1);
    if (found) return found;
  }
  return undefined;
}

/**
 * What a caller is told about a failure: an AppError as it is; a dependency being away as
 * `unavailable` (retry hint `DEFAULT_RETRY_AFTER_SECONDS`); anything else as `internal` with
 * nothing internal in the message. The original is the `cause`, for the server's log.
 */
export function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  if (dependencyFailure(err) !== undefined)
    return new AppError('unavailable', DEPENDENCY_UNAVAILABLE_MESSAGE, { cause: err });
  return new AppError('internal', INTERNAL_MESSAGE, { cause: err });
}

/**
 * Name, code and message of an error, for a log line: enough to tell which dependency failed
 * how, without the stack, a query or its parameters (which a driver's error may carry).
 */
export function errorSummary(
  err: unknown,
): { name?: unknown; code?: unknown; message?: unknown } | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const { name, code, message } = err as { name?: unknown; code?: unknown; message?: unknown };
  return { name, code, message };
}
