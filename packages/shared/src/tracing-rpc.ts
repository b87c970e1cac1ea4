/**
 * gRPC spans (docs/tracing.md), wired in by rpc.ts as client and server hooks, whatever the
 * transport: the client injects its span's context into the call's metadata, the server
 * continues the trace the metadata carries.
 */
import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  type TextMapGetter,
  type TextMapSetter,
  trace,
} from '@opentelemetry/api';
import type { grpc } from '@relayplane/proto/grpc';
import { activeTracer, recordingSpan } from './tracing.ts';

const metadataSetter: TextMapSetter<grpc.Metadata> = {
  set(carrier, key, value) {
    carrier.set(key, value);
  },
};

const metadataGetter: TextMapGetter<grpc.Metadata> = {
  get(carrier, key) {
    const values = carrier.get(key);
    if (values.length === 0) return undefined;
    return values.length === 1 ? String(values[0]) : values.map(String);
  },
  keys(carrier) {
    return Object.keys(carrier.getMap());
  },
};

/** One traced gRPC client call; `end` with the gRPC status number it ended with. */
export interface RpcClientSpan {
  end(code: number): void;
}

/**
 * The client side of a gRPC call made while a recorded span is active: a CLIENT span
 * `<package.Service>/<Method>` whose context is injected into `metadata` (W3C `traceparent`, by
 * the propagators OTEL_PROPAGATORS chooses). Undefined, and `metadata` untouched, otherwise.
 */
export function startRpcClientSpan(
  service: string,
  method: string,
  metadata: grpc.Metadata,
): RpcClientSpan | undefined {
  const tracer = activeTracer();
  if (!tracer) return undefined;
  const parent = context.active();
  if (!recordingSpan(parent)) return undefined;
  const span = tracer.startSpan(
    `${service}/${method}`,
    {
      kind: SpanKind.CLIENT,
      attributes: { 'rpc.system': 'grpc', 'rpc.service': service, 'rpc.method': method },
    },
    parent,
  );
  propagation.inject(trace.setSpan(parent, span), metadata, metadataSetter);
  return {
    end(code) {
      span.setAttribute('rpc.grpc.status_code', code);
      if (code !== 0) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    },
  };
}

/**
 * Runs a gRPC server handler (`run`) in a SERVER span continuing the trace the call's `metadata`
 * carries; a call that carries none (a probe, a caller not traced) runs as it is. `statusOf`
 * gives the gRPC status number a failure answers.
 */
export function traceRpcServer<T>(
  service: string,
  method: string,
  metadata: grpc.Metadata,
  run: () => Promise<T>,
  statusOf: (err: unknown) => number,
): Promise<T> {
  const tracer = activeTracer();
  if (!tracer || metadata.get('traceparent').length === 0) return run();
  const parent = propagation.extract(ROOT_CONTEXT, metadata, metadataGetter);
  if (!trace.getSpan(parent)) return run();
  const span = tracer.startSpan(
    `${service}/${method}`,
    {
      kind: SpanKind.SERVER,
      attributes: { 'rpc.system': 'grpc', 'rpc.service': service, 'rpc.method': method },
    },
    parent,
  );
  const end = (code: number) => {
    span.setAttribute('rpc.grpc.status_code', code);
    if (code !== 0) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();
  };
  return context.with(trace.setSpan(parent, span), run).then(
    (value) => {
      end(0);
      return value;
    },
    (err: unknown) => {
      end(statusOf(err));
      throw err;
    },
  );
}
