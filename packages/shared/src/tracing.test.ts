import { Writable } from 'node:stream';
import { grpc } from '@relayplane/proto/grpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HealthService } from './health.ts';
import { createLogger } from './logger.ts';
import { connect, RpcServer } from './rpc.ts';
import {
  continueTrace,
  inBatchSpan,
  inChildSpan,
  isRecording,
  isTracingEnabled,
  runInContext,
  type SpanContext,
  SpanKind,
  sampledSpanContext,
  startChildSpan,
  startTracing,
  type Tracing,
  toTraceparent,
} from './tracing.ts';
import { endHttpServerSpan, spanLogFields, startHttpServerSpan } from './tracing-http.ts';
import { traceRedis } from './tracing-redis.ts';
import { startRpcClientSpan, traceRpcServer } from './tracing-rpc.ts';

/** An error as ioredis rejects a command with (its class name is what a span keeps). */
class ReplyError extends Error {
  override name = 'ReplyError';
}

/** The fields of the SDK's ReadableSpan these tests read. */
interface FinishedSpan {
  name: string;
  kind: SpanKind;
  spanContext(): SpanContext;
  parentSpanContext?: SpanContext;
  attributes: Record<string, unknown>;
  links: { context: SpanContext }[];
}

const ENDPOINT = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' };

describe('with tracing on', () => {
  /** Every span ended, as the SDK hands it to its processors (the exporter's input). */
  const finished: FinishedSpan[] = [];
  let tracing: Tracing | undefined;
  const spans = () => finished;
  const byName = (name: string) => spans().filter((s) => s.name === name);

  beforeAll(async () => {
    tracing = await startTracing(ENDPOINT, 'relayplane-test', {
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
    await tracing?.shutdown();
  });

  /** Runs `fn` in a recorded HTTP server span, as the gateway's requests do. */
  const inRequest = <T>(fn: () => T, traceparent?: string) => {
    const started = startHttpServerSpan('POST', '/api/v1/credentials', traceparent ? { traceparent } : {});
    if (!started) throw new Error('tracing is off');
    try {
      return { result: started.context ? runInContext(started.context, fn) : fn(), span: started.span };
    } finally {
      endHttpServerSpan(started.span, 201);
    }
  };

  it('is on, and a request continues the caller traceparent with its route template and status', () => {
    expect(isTracingEnabled()).toBe(true);
    const traceId = 'a'.repeat(32);
    inRequest(() => undefined, `00-${traceId}-${'b'.repeat(16)}-01`);
    const [span] = byName('POST /api/v1/credentials').filter((s) => s.spanContext().traceId === traceId);
    expect(span?.parentSpanContext?.spanId).toBe('b'.repeat(16));
    expect(span?.kind).toBe(SpanKind.SERVER);
    expect(span?.attributes).toMatchObject({
      'http.request.method': 'POST',
      'http.route': '/api/v1/credentials',
      'http.response.status_code': 201,
    });
  });

  it('an unsampled request gets ids for its log lines but no context to run in', () => {
    const traceId = 'e'.repeat(32);
    const started = startHttpServerSpan('GET', '/v1/plans', {
      traceparent: `00-${traceId}-${'f'.repeat(16)}-00`,
    });
    expect(started?.span.isRecording()).toBe(false);
    expect(started?.context).toBeUndefined();
    const fields = started && spanLogFields(started.span);
    expect(fields?.trace_id).toBe(traceId);
    expect(fields?.span_id).toMatch(/^[0-9a-f]{16}$/);
    expect(fields?.span_id).not.toBe('f'.repeat(16));
    // A sampled one gets its context.
    const sampled = startHttpServerSpan('GET', '/v1/plans', {});
    expect(sampled?.context).toBeDefined();
    if (sampled) endHttpServerSpan(sampled.span, 200);
  });

  it('makes child spans only under a recorded span', () => {
    expect(startChildSpan('orphan', SpanKind.CLIENT)).toBeUndefined();
    // A caller that decided not to sample: the request's span is not recorded, nor are its children.
    const { result } = inRequest(
      () => startChildSpan('unsampled child', SpanKind.CLIENT),
      `00-${'c'.repeat(32)}-${'d'.repeat(16)}-00`,
    );
    expect(result).toBeUndefined();
    const { span } = inRequest(() => inChildSpan('signing', undefined, () => 42));
    expect(byName('signing')[0]?.parentSpanContext?.spanId).toBe(span.spanContext().spanId);
  });

  it('a batch span links to every sampled member, is parented on the first, and parents the work', async () => {
    const members: { trace: SpanContext | undefined }[] = [];
    const a = inRequest(() => members.push({ trace: sampledSpanContext() })).span;
    members.push({ trace: undefined });
    inRequest(
      () => members.push({ trace: sampledSpanContext() }),
      `00-${'e'.repeat(32)}-${'f'.repeat(16)}-00`,
    );
    const b = inRequest(() => members.push({ trace: sampledSpanContext() })).span;
    expect(members.map((m) => m.trace !== undefined)).toEqual([true, false, false, true]);
    const value = await inBatchSpan(
      'reserve slots',
      members,
      (m) => m.trace,
      undefined,
      async () => {
        const child = startChildSpan('EVALSHA', SpanKind.CLIENT);
        if (child) child.end();
        return 7;
      },
    );
    expect(value).toBe(7);
    const [batch] = byName('reserve slots');
    expect(batch?.links.map((l) => l.context.spanId)).toEqual([
      a.spanContext().spanId,
      b.spanContext().spanId,
    ]);
    expect(batch?.parentSpanContext?.spanId).toBe(a.spanContext().spanId);
    expect(batch?.attributes['relayplane.batch.size']).toBe(4);
    expect(byName('EVALSHA')[0]?.parentSpanContext?.spanId).toBe(batch?.spanContext().spanId);

    // No sampled member: no span, and the work does not continue whichever request started it.
    const before = spans().length;
    await inBatchSpan(
      'record credentials',
      [{ trace: undefined }],
      (m) => m.trace,
      undefined,
      async () => {
        expect(startChildSpan('INSERT', SpanKind.CLIENT)).toBeUndefined();
      },
    );
    expect(spans().length).toBe(before);
    // Not even when it starts inside a recorded request's span.
    let inside: boolean | undefined;
    inRequest(() =>
      inBatchSpan(
        'record credentials',
        [{ trace: undefined }],
        (m) => m.trace,
        undefined,
        () => {
          inside = isRecording();
          startChildSpan('INSERT', SpanKind.CLIENT)?.end();
        },
      ),
    );
    expect(inside).toBe(false);
    expect(
      spans()
        .slice(before)
        .map((s) => s.name),
    ).toEqual(['POST /api/v1/credentials']);
  });

  it('a traceparent carried in a message continues the trace on the other side', async () => {
    const { result: traceparent, span } = inRequest(() => {
      const sc = sampledSpanContext();
      return sc && toTraceparent(sc);
    });
    expect(traceparent).toBe(`00-${span.spanContext().traceId}-${span.spanContext().spanId}-01`);
    await continueTrace('issue credential', traceparent, undefined, async () => undefined);
    expect(byName('issue credential')[0]?.parentSpanContext?.spanId).toBe(span.spanContext().spanId);
    // Malformed or absent: runs untraced.
    const before = spans().length;
    await continueTrace('issue credential', '00-zz-yy-01', undefined, async () => undefined);
    await continueTrace('issue credential', undefined, undefined, async () => undefined);
    expect(spans().length).toBe(before);
  });

  it('gRPC: the client span goes in the metadata, the server continues it with method and status code', async () => {
    const metadata = new grpc.Metadata();
    const { span } = inRequest(() => {
      const call = startRpcClientSpan('relayplane.admin.v1.AdminService', 'VerifyApiKey', metadata);
      call?.end(grpc.status.OK);
    });
    const [client] = byName('relayplane.admin.v1.AdminService/VerifyApiKey');
    expect(client?.parentSpanContext?.spanId).toBe(span.spanContext().spanId);
    expect(String(metadata.get('traceparent')[0])).toBe(
      `00-${span.spanContext().traceId}-${client?.spanContext().spanId}-01`,
    );
    await expect(
      traceRpcServer(
        'relayplane.admin.v1.AdminService',
        'VerifyApiKey',
        metadata,
        () => Promise.reject(new Error('boom')),
        () => grpc.status.UNAVAILABLE,
      ),
    ).rejects.toThrow('boom');
    const server = byName('relayplane.admin.v1.AdminService/VerifyApiKey').find(
      (s) => s.kind === SpanKind.SERVER,
    );
    expect(server?.parentSpanContext?.spanId).toBe(client?.spanContext().spanId);
    expect(server?.attributes).toMatchObject({
      'rpc.system': 'grpc',
      'rpc.method': 'VerifyApiKey',
      'rpc.grpc.status_code': grpc.status.UNAVAILABLE,
    });
    // A call without a trace context (a probe, an untraced caller) makes no server span.
    const before = spans().length;
    expect(
      await traceRpcServer(
        'grpc.health.v1.Health',
        'Check',
        new grpc.Metadata(),
        async () => 1,
        () => 2,
      ),
    ).toBe(1);
    expect(spans().length).toBe(before);
  });

  for (const transport of ['network', 'in-process'] as const) {
    it(`RpcServer and connect() over the ${transport} transport: a client span per unary call under a recorded span, the server continuing it`, async () => {
      const server = new RpcServer(createLogger({ level: 'silent', service: 'test' }));
      const port = await server.listen(transport === 'network' ? '127.0.0.1:0' : 'in-process:tracing-test');
      const client = connect(
        HealthService,
        transport === 'network' ? `127.0.0.1:${port}` : 'in-process:tracing-test',
      );
      try {
        const before = spans().length;
        // Outside any span: nothing traced, nothing sent.
        await client.check({ service: '' });
        expect(spans().length).toBe(before);
        const { result } = inRequest(() => client.check({ service: '' }));
        await result;
        const called = spans().filter((s) => s.name === 'grpc.health.v1.Health/Check');
        const clientSpan = called.find((s) => s.kind === SpanKind.CLIENT);
        const serverSpan = called.find((s) => s.kind === SpanKind.SERVER);
        expect(serverSpan?.parentSpanContext?.spanId).toBe(clientSpan?.spanContext().spanId);
        expect(clientSpan?.attributes['rpc.grpc.status_code']).toBe(grpc.status.OK);
        expect(serverSpan?.attributes['rpc.grpc.status_code']).toBe(grpc.status.OK);
        // A failing call: the status code on both sides.
        const failing = inRequest(() => client.check({ service: 'no.such.Service' })).result;
        await expect(failing).rejects.toThrow();
        const failed = spans().filter(
          (s) =>
            s.name === 'grpc.health.v1.Health/Check' &&
            s.attributes['rpc.grpc.status_code'] === grpc.status.NOT_FOUND,
        );
        expect(failed.map((s) => s.kind).sort()).toEqual([SpanKind.SERVER, SpanKind.CLIENT].sort());
      } finally {
        client.close();
        await server.close(1_000);
        finished.length = 0;
      }
    });
  }

  it('Redis: a command sent under a recorded span is a span named by the command, without its arguments', async () => {
    // The shape of an ioredis connection that traceRedis reads (real connections: packages/testing/tests/shared/redis-tracing.test.ts).
    const sent: { name: string; args: string[] }[] = [];
    const connection = {
      isCluster: false,
      options: { db: 2, host: '127.0.0.1', port: 6379 },
      sendCommand(command: { name: string; args: string[]; promise: Promise<unknown> }) {
        sent.push(command);
        return command.promise;
      },
    };
    traceRedis(connection);
    const command = (name: string, args: string[], reply: Promise<unknown>) => ({
      name,
      args,
      promise: reply,
    });
    const secret = 'redis-value-that-must-not-leak';
    const before = spans().length;

    // Outside a recorded span: sent as it is, no span.
    await connection.sendCommand(command('get', ['slots:{ten_1}'], Promise.resolve('1')));
    expect(spans().length).toBe(before);

    const set = command('set', ['slots:{ten_1}', secret], Promise.resolve('OK'));
    const failing = command('evalsha', ['abc', '1', secret], Promise.reject(new ReplyError('NOSCRIPT')));
    const { span } = inRequest(() => {
      void connection.sendCommand(set);
      void connection.sendCommand(failing).catch(() => {});
      // The same command sent again (a reconnect, a cluster's redirection): still one span.
      void connection.sendCommand(set);
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(sent.map((c) => c.name)).toEqual(['get', 'set', 'evalsha', 'set']);
    const made = spans().slice(before);
    expect(made.map((s) => s.name).sort()).toEqual(['EVALSHA', 'POST /api/v1/credentials', 'SET']);
    const [setSpan] = byName('SET');
    expect(setSpan?.kind).toBe(SpanKind.CLIENT);
    expect(setSpan?.parentSpanContext?.spanId).toBe(span.spanContext().spanId);
    expect(setSpan?.attributes).toEqual({
      'db.system.name': 'redis',
      'db.operation.name': 'SET',
      'db.namespace': '2',
      'server.address': '127.0.0.1',
      'server.port': 6379,
    });
    expect(byName('EVALSHA')[0]?.attributes['error.type']).toBe('ReplyError');
    expect(JSON.stringify(made.map((s) => s.attributes))).not.toContain(secret);
  });

  it('logs name the trace and the span they are written in, and only then', () => {
    const lines: Record<string, unknown>[] = [];
    const logger = createLogger(
      { level: 'info', service: 'test' },
      new Writable({
        write(chunk, _enc, done) {
          lines.push(JSON.parse(String(chunk)));
          done();
        },
      }),
    );
    logger.info('outside');
    const { span } = inRequest(() => logger.info('inside'));
    expect(lines[0]).not.toHaveProperty('trace_id');
    expect(lines[1]).toMatchObject({
      trace_id: span.spanContext().traceId,
      span_id: span.spanContext().spanId,
    });
  });
});
