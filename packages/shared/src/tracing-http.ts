/**
 * HTTP server spans (docs/tracing.md), for the gateway's Fastify hooks (plugins/tracing.ts).
 */
import {
  type Context,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import { activeTracer } from './tracing.ts';

/**
 * A SERVER span for an HTTP request, continuing the W3C `traceparent` among `headers`, if any,
 * and the context to run the request in when the span is recorded. An unsampled request gets a
 * non-recording span (its ids, for the request's log lines) and no context: nothing it calls
 * would make a span or propagate one (storage, signing, batch and gRPC spans are made under
 * recorded spans only), so it runs as it would with tracing off (docs/tracing.md, Cost).
 */
export function startHttpServerSpan(
  method: string,
  route: string | undefined,
  headers: Readonly<Record<string, string | string[] | undefined>>,
): { span: Span; context: Context | undefined } | undefined {
  const tracer = activeTracer();
  if (!tracer) return undefined;
  const parent = propagation.extract(ROOT_CONTEXT, headers);
  const span = tracer.startSpan(route ? `${method} ${route}` : method, { kind: SpanKind.SERVER }, parent);
  if (!span.isRecording()) return { span, context: undefined };
  span.setAttribute('http.request.method', method);
  if (route) span.setAttribute('http.route', route);
  return { span, context: trace.setSpan(parent, span) };
}

/** `trace_id` and `span_id` of `span`, as log lines carry them. */
export function spanLogFields(span: Span): { trace_id: string; span_id: string } {
  const { traceId, spanId } = span.spanContext();
  return { trace_id: traceId, span_id: spanId };
}

/** Ends an HTTP server span with the answer's status (5xx: failed). */
export function endHttpServerSpan(span: Span, status: number): void {
  if (span.isRecording()) {
    span.setAttribute('http.response.status_code', status);
    if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end();
}
