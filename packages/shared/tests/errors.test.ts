import { connect, createServer, type Server, type Socket } from 'node:net';
import {
  AppError,
  DEFAULT_RETRY_AFTER_SECONDS,
  DEPENDENCY_UNAVAILABLE_MESSAGE,
  dependencyFailure,
  ERROR_CODES,
  type ErrorCode,
  errorBody,
  httpStatusOf,
  INTERNAL_MESSAGE,
  isErrorCode,
  toAppError,
} from '@relayplane/contract/errors';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

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

  it('an unavailable AppError always carries a retry hint: the one given, else the default', () => {
    expect(new AppError('unavailable', 'later').retryAfterSeconds).toBe(DEFAULT_RETRY_AFTER_SECONDS);
    expect(new AppError('unavailable', 'later', { retryAfterSeconds: 5 }).retryAfterSeconds).toBe(5);
    expect(new AppError('internal', 'bug').retryAfterSeconds).toBeUndefined();
  });

  it('the public body is exactly {"error": message}', () => {
    expect(JSON.stringify(errorBody('project not found'))).toBe('{"error":"project not found"}');
  });
});

/** Nothing listens on port 1 (privileged, unused): connections to it are refused. */
const REFUSED = { host: '127.0.0.1', port: 1 };

/** What pg's protocol parser makes of an ErrorResponse with this SQLSTATE. */
function sqlError(code: string, message: string): pg.DatabaseError {
  return Object.assign(new pg.DatabaseError(message, 0, 'error'), { code, severity: 'FATAL' });
}

/** Expects `err` to be answered as a dependency outage, labelled `label`. */
function expectUnavailable(err: unknown, label: string): void {
  expect(dependencyFailure(err)).toBe(label);
  const failure = toAppError(err);
  expect(failure).toMatchObject({
    code: 'unavailable',
    message: DEPENDENCY_UNAVAILABLE_MESSAGE,
    retryAfterSeconds: DEFAULT_RETRY_AFTER_SECONDS,
  });
  expect(failure.cause).toBe(err);
}

describe('dependency failures: what the drivers throw while PostgreSQL or Redis is away answers unavailable', () => {
  // A server that accepts connections and never answers: a blackholed network.
  const held = new Set<Socket>();
  let blackhole: Server;
  let blackholePort = 0;
  beforeAll(async () => {
    blackhole = createServer((socket) => {
      held.add(socket);
      socket.on('error', () => {});
      socket.on('close', () => held.delete(socket));
    });
    await new Promise<void>((resolve) => blackhole.listen(0, '127.0.0.1', resolve));
    blackholePort = (blackhole.address() as { port: number }).port;
  });
  afterAll(async () => {
    for (const s of held) s.destroy();
    await new Promise<void>((resolve) => blackhole.close(() => resolve()));
  });

  it('a refused TCP connection (node)', async () => {
    const err = await new Promise<unknown>((resolve) => {
      connect(REFUSED.port, REFUSED.host).on('error', resolve);
    });
    expectUnavailable(err, 'ECONNREFUSED');
  });

  it('pg: a refused connection', async () => {
    const client = new pg.Client({ ...REFUSED, user: 'nobody', database: 'none' });
    const err = await client.connect().catch((e: unknown) => e);
    expectUnavailable(err, 'ECONNREFUSED');
  });

  it('pg-pool: a server that never answers the connection (connect timeout) and a pool whose connections are all taken', async () => {
    const pool = new pg.Pool({
      host: '127.0.0.1',
      port: blackholePort,
      user: 'nobody',
      database: 'none',
      max: 1,
      connectionTimeoutMillis: 150,
    });
    try {
      const [first, second] = await Promise.all([
        pool.connect().catch((e: unknown) => e),
        pool.connect().catch((e: unknown) => e),
      ]);
      expect((first as Error).message).toBe('Connection terminated due to connection timeout');
      expectUnavailable(first, 'Connection terminated');
      expect((second as Error).message).toBe('timeout exceeded when trying to connect');
      expectUnavailable(second, 'timeout exceeded when trying to connect');
    } finally {
      await pool.end();
    }
  });

  it('pg: a query the server never answers (query_timeout)', () => {
    // What pg's client rejects with when query_timeout passes (client.js); reaching it needs a
    // server that completes the startup handshake, so the e2e outage sweep covers the real one.
    expectUnavailable(new Error('Query read timeout'), 'Query read timeout');
  });

  it.each([
    ['08006', 'connection failure'],
    ['08001', 'could not connect'],
    ['57P01', 'terminating connection due to administrator command'],
    ['57P02', 'terminating connection because of crash of another server process'],
    ['57P03', 'the database system is starting up'],
    ['57014', 'canceling statement due to statement timeout'],
    ['53300', 'sorry, too many clients already'],
    ['25006', 'cannot execute INSERT in a read-only transaction'],
    ['40001', 'could not serialize access due to concurrent update'],
    ['40P01', 'deadlock detected'],
  ])('PostgreSQL SQLSTATE %s (%s)', (code, message) => {
    expectUnavailable(sqlError(code, message), `SQLSTATE ${code}`);
  });

  it('ioredis: a command while disconnected, without an offline queue', async () => {
    const redis = new Redis({ ...REFUSED, enableOfflineQueue: false, retryStrategy: () => 50 });
    redis.on('error', () => {});
    try {
      const err = await redis.get('k').catch((e: unknown) => e);
      expectUnavailable(err, "Stream isn't writeable and enableOfflineQueue options is false");
    } finally {
      redis.disconnect();
    }
  });

  it('ioredis: a queued command after its retries (MaxRetriesPerRequestError)', async () => {
    const redis = new Redis({ ...REFUSED, maxRetriesPerRequest: 0, retryStrategy: () => 50 });
    redis.on('error', () => {});
    try {
      const err = await redis.get('k').catch((e: unknown) => e);
      expectUnavailable(err, 'MaxRetriesPerRequestError');
    } finally {
      redis.disconnect();
    }
  });

  it('ioredis: a command the server never answers (commandTimeout), and one on a closed connection', async () => {
    const redis = new Redis({
      host: '127.0.0.1',
      port: blackholePort,
      commandTimeout: 100,
      enableReadyCheck: false,
      retryStrategy: () => null,
    });
    redis.on('error', () => {});
    const err = await redis.get('k').catch((e: unknown) => e);
    expectUnavailable(err, 'Command timed out');
    const ended = new Promise((resolve) => redis.once('end', resolve));
    redis.disconnect();
    await ended;
    const closed = await redis.get('k').catch((e: unknown) => e);
    expectUnavailable(closed, 'Connection is closed.');
  });

  it.each([
    [
      'Too many Cluster redirections. Last error: Error: Connection is closed.',
      'Too many Cluster redirections.',
    ],
    [
      "Cluster isn't ready and enableOfflineQueue options is false",
      "Cluster isn't ready and enableOfflineQueue options is false",
    ],
  ])('ioredis cluster client: "%s"', (message, label) => {
    expectUnavailable(new Error(message), label);
  });

  it.each([
    'LOADING Redis is loading the dataset in memory',
    "READONLY You can't write against a read only replica.",
    'MASTERDOWN Link with MASTER is down',
  ])('Redis error reply "%s"', (message) => {
    const reply = Object.assign(new Error(message), { name: 'ReplyError' });
    expectUnavailable(reply, `Redis ${message.split(' ')[0]}`);
  });

  it('is found in a cause chain and in an AggregateError (node connecting to several addresses)', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED ::1:5432'), { code: 'ECONNREFUSED' });
    expectUnavailable(
      new Error('slot rebuild failed', { cause: sqlError('57P01', 'terminating') }),
      'SQLSTATE 57P01',
    );
    expectUnavailable(new AggregateError([new Error('other'), refused]), 'ECONNREFUSED');
  });

  it('everything else stays internal, with nothing internal in the message: bugs must stay visible', () => {
    const cyclic: Error & { cause?: unknown } = new Error('loops');
    cyclic.cause = cyclic;
    for (const err of [
      new TypeError("Cannot read properties of undefined (reading 'id')"),
      // Free text that mentions a connection is not a driver's error.
      new Error('connect ECONNREFUSED 10.0.0.7:5432'),
      sqlError('23505', 'duplicate key value violates unique constraint'),
      sqlError('42P01', 'relation "widgets" does not exist'),
      sqlError('22P02', 'invalid input syntax for type uuid'),
      Object.assign(new Error('ERR wrong number of arguments'), { name: 'ReplyError' }),
      Object.assign(new Error('no such file'), { code: 'ENOENT' }),
      cyclic,
      'a string',
      undefined,
    ]) {
      expect(dependencyFailure(err), String(err)).toBeUndefined();
      expect(toAppError(err), String(err)).toMatchObject({ code: 'internal', message: INTERNAL_MESSAGE });
    }
  });

  it('an AppError is answered as it is', () => {
    const err = new AppError('payment_required', 'cap reached', { cause: sqlError('57P01', 'x') });
    expect(toAppError(err)).toBe(err);
  });
});
