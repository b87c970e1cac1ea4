/**
 * Redis spans on real connections from the shared factories (tracing.ts `traceRedis`): every
 * command ioredis sends under a recorded span, however it is sent (a plain command, a script, a
 * MULTI, a pipeline), is one CLIENT span named by the command, and nothing else is.
 */
import {
  createRedis,
  createRequestPathRedis,
  duplicateConnection,
  waitReady,
} from '@relayplane/shared/redis';
import {
  runInContext,
  type SpanContext,
  SpanKind,
  startTracing,
  type Tracing,
} from '@relayplane/shared/tracing';
import { endHttpServerSpan, startHttpServerSpan } from '@relayplane/shared/tracing-http';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testLogger } from '../../src/logger.ts';
import { createTestRedis } from '../../src/storage.ts';

/** The fields of the SDK's ReadableSpan read here. */
interface FinishedSpan {
  name: string;
  kind: SpanKind;
  spanContext(): SpanContext;
  parentSpanContext?: SpanContext;
  attributes: Record<string, unknown>;
}

const testRedis = createTestRedis('redis-tracing');
const logger = testLogger('redis-tracing');
const finished: FinishedSpan[] = [];
const connections: Redis[] = [];
let tracing: Tracing | undefined;

beforeAll(async () => {
  tracing = await startTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' }, 'relayplane-test', {
    spanProcessors: [
      {
        onStart() {},
        onEnd(span: FinishedSpan) {
          finished.push(span);
        },
        forceFlush: async () => {},
        shutdown: async () => {},
      },
    ],
  });
});

afterAll(async () => {
  await Promise.all(connections.splice(0).map((c) => c.quit()));
  await testRedis.clean();
  await tracing?.shutdown();
});

/** Runs `fn` in a recorded request span (as the gateway's sampled requests run); answers its span id. */
async function inRecordedRequest(fn: () => Promise<unknown>): Promise<string> {
  const started = startHttpServerSpan('POST', '/api/v1/credentials', {
    traceparent: `00-${'a1'.repeat(16)}-${'b2'.repeat(8)}-01`,
  });
  if (!started?.context) throw new Error('the request is not recorded');
  try {
    await runInContext(started.context, fn);
  } finally {
    endHttpServerSpan(started.span, 201);
  }
  return started.span.spanContext().spanId;
}

const redisSpans = (from: number) =>
  finished.slice(from).filter((s) => s.attributes['db.system.name'] === 'redis');

describe.each([
  ['createRedis', () => createRedis({ url: testRedis.url, prefix: testRedis.prefix }, logger, 'trace-test')],
  [
    'createRequestPathRedis',
    () =>
      createRequestPathRedis({ url: testRedis.url, prefix: testRedis.prefix }, logger, {
        name: 'trace-test-path',
        commandTimeoutMs: 1_000,
      }),
  ],
  [
    'duplicateConnection',
    () => {
      const base = createRedis({ url: testRedis.url, prefix: testRedis.prefix }, logger, 'trace-test-base');
      connections.push(base);
      return duplicateConnection(base, { connectionName: 'relayplane-trace-test-dup' });
    },
  ],
])('Redis spans on a %s connection (real Redis)', (_factory, connect) => {
  let redis: Redis;
  const secret = `redis-value-that-must-not-leak-${Math.random().toString(36).slice(2)}`;

  beforeAll(async () => {
    redis = connect();
    connections.push(redis);
    // A request-path connection has no offline queue: it takes commands once ready.
    expect(await waitReady(redis, 5_000)).toBe(true);
    redis.defineCommand('relayplaneTraceTest', {
      numberOfKeys: 1,
      lua: "return redis.call('SET', KEYS[1], ARGV[1])",
    });
  });

  it('a command outside a recorded span makes no span', async () => {
    const from = finished.length;
    await redis.set(`${testRedis.prefix}outside`, secret);
    expect(await redis.get(`${testRedis.prefix}outside`)).toBe(secret);
    expect(redisSpans(from)).toEqual([]);
  });

  it('each command under a recorded span is a span named by it, parented on the request, without arguments', async () => {
    const from = finished.length;
    const key = `${testRedis.prefix}inside`;
    const requestSpanId = await inRecordedRequest(async () => {
      await redis.set(key, secret);
      expect(await redis.get(key)).toBe(secret);
      // A script (EVALSHA, and EVAL when the server does not have it yet).
      await (
        redis as unknown as { relayplaneTraceTest(k: string, v: string): Promise<unknown> }
      ).relayplaneTraceTest(key, secret);
      await redis.multi().set(key, secret).get(key).exec();
      await redis.pipeline().get(key).del(key).exec();
    });
    const made = redisSpans(from);
    const names = made.map((s) => s.name);
    expect(names.slice(0, 2)).toEqual(['SET', 'GET']);
    expect(names).toContain('EVALSHA');
    expect(names.filter((n) => n !== 'EVALSHA' && n !== 'EVAL').slice(2)).toEqual([
      'MULTI',
      'SET',
      'GET',
      'EXEC',
      'GET',
      'DEL',
    ]);
    for (const span of made) {
      expect(span.kind).toBe(SpanKind.CLIENT);
      expect(span.parentSpanContext?.spanId).toBe(requestSpanId);
      expect(span.attributes).toEqual({
        'db.system.name': 'redis',
        'db.operation.name': span.name,
        'db.namespace': '0',
        'server.address': new URL(testRedis.url).hostname,
        'server.port': Number(new URL(testRedis.url).port || 6379),
      });
    }
    expect(JSON.stringify(finished.map((s) => s.attributes))).not.toContain(secret);
  });

  it('a command Redis refuses ends its span as failed, with the error class and not its message', async () => {
    const from = finished.length;
    const key = `${testRedis.prefix}a-list`;
    await inRecordedRequest(async () => {
      await redis.rpush(key, secret);
      await expect(redis.incr(key)).rejects.toThrow(/WRONGTYPE/);
      await redis.del(key);
    });
    const [incr] = redisSpans(from).filter((s) => s.name === 'INCR');
    expect(incr?.attributes['error.type']).toBe('ReplyError');
    expect(JSON.stringify(incr?.attributes)).not.toContain('WRONGTYPE');
  });
});
