import { describe, expect, it } from 'vitest';
import { AppError, ERROR_CODES, type ErrorCode, errorBody, httpStatusOf, isErrorCode } from './errors.ts';

const CODES = Object.keys(ERROR_CODES) as ErrorCode[];

// The status each code must map to: a sensible, conventional HTTP status.
const EXPECTED_HTTP: Record<ErrorCode, number> = {
  invalid_request: 400,
  unauthenticated: 401,
  payment_required: 402,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  unprocessable: 422,
  rate_limited: 429,
  internal: 500,
  unavailable: 503,
};

describe('errors', () => {
  it('maps every code to its conventional HTTP status', () => {
    expect(Object.fromEntries(CODES.map((c) => [c, httpStatusOf(c)]))).toEqual(EXPECTED_HTTP);
  });

  it('maps every code to a distinct HTTP status, so the status alone identifies the code', () => {
    const statuses = CODES.map(httpStatusOf);
    expect(new Set(statuses).size).toBe(CODES.length);
  });

  it('uses 5xx only for internal and unavailable, 4xx for every other code', () => {
    for (const code of CODES) {
      const status = httpStatusOf(code);
      if (code === 'internal' || code === 'unavailable') expect(status, code).toBeGreaterThanOrEqual(500);
      else expect([status >= 400, status < 500], code).toEqual([true, true]);
    }
  });

  it('maps every code to a real non-OK gRPC status (1..16)', () => {
    for (const code of CODES) {
      expect(ERROR_CODES[code].grpc, code).toBeGreaterThanOrEqual(1);
      expect(ERROR_CODES[code].grpc, code).toBeLessThanOrEqual(16);
    }
    // Codes a client retries on must be the gRPC statuses clients treat as retryable.
    expect(ERROR_CODES.unavailable.grpc).toBe(14);
    expect(ERROR_CODES.rate_limited.grpc).toBe(8);
    expect(ERROR_CODES.internal.grpc).toBe(13);
  });

  it('isErrorCode accepts exactly the listed codes, not prototype keys or other values', () => {
    for (const code of CODES) expect(isErrorCode(code)).toBe(true);
    for (const v of [
      'toString',
      'constructor',
      '__proto__',
      'hasOwnProperty',
      'NOT_FOUND',
      '',
      404,
      null,
      undefined,
      {},
    ]) {
      expect(isErrorCode(v), String(v)).toBe(false);
    }
  });

  it('AppError carries code, message, statuses, retry hint and cause', () => {
    const cause = new Error('db down');
    const err = new AppError('unavailable', 'try later', { retryAfterSeconds: 3, cause });
    expect(err).toBeInstanceOf(Error);
    expect(err.name).toBe('AppError');
    expect(err.code).toBe('unavailable');
    expect(err.message).toBe('try later');
    expect(err.httpStatus).toBe(503);
    expect(err.grpcStatus).toBe(14);
    expect(err.retryAfterSeconds).toBe(3);
    expect(err.cause).toBe(cause);
    const plain = new AppError('not_found', 'no such project');
    expect(plain.retryAfterSeconds).toBeUndefined();
    expect('cause' in plain).toBe(false);
  });

  it('the public body is exactly {"error": message}', () => {
    expect(JSON.stringify(errorBody('project not found'))).toBe('{"error":"project not found"}');
  });
});
