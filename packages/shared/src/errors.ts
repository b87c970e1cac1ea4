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

export class AppError extends Error {
  override readonly name = 'AppError';
  readonly code: ErrorCode;
  readonly retryAfterSeconds: number | undefined;

  constructor(code: ErrorCode, message: string, options: AppErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.retryAfterSeconds = options.retryAfterSeconds;
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

/** Message for 5xx: nothing internal leaks. */
export const INTERNAL_MESSAGE = 'internal error';

export function httpStatusOf(code: ErrorCode): number {
  return ERROR_CODES[code].http;
}

/** The public error body. */
export function errorBody(message: string): { error: string } {
  return { error: message };
}
