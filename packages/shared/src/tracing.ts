/**
 * OpenTelemetry traces (docs/tracing.md).
 *
 * Off unless an OTLP endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT` or
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) and `OTEL_SDK_DISABLED` is not `true`. Off, the SDK is
 * never imported, and every helper here returns at its first test: no span, no context, no
 * attribute object on the hot path. On, `@opentelemetry/sdk-node` is configured by the standard
 * `OTEL_*` variables alone (exporter protocol, sampler, resource attributes, propagators), with the
 * service's own name (`relayplane-gateway`, …) unless `OTEL_SERVICE_NAME` or a `service.name`
 * resource attribute says otherwise.
 *
 * Spans are made by hand at the choke points rather than by auto-instrumentation: the apps run
 * as native ESM, where require hooks see nothing, and gRPC goes through our own bridge.
 * - Entry points start or continue traces: the gateway's HTTP requests (an incoming W3C
 *   `traceparent` is continued). A gRPC server continues the trace its call's metadata carries
 *   and starts none (probes and background calls make no traces of their own).
 * - Storage spans (PostgreSQL, Redis) and internal ones (signing) are made only under a span
 *   that is recorded: background work (bus, job polling) and unsampled requests make none.
 * - Work done for many requests at once (the issuance stream's messages, the slot script, the
 *   credential INSERT) gets one span with a link to each sampled request's span, parented on the
 *   first of them: it is sampled when any of its requests is (under a parent-based sampler), and
 *   none is made when none is.
 * - Attributes never carry values: statement kinds and command names, route templates (never a
 *   path, which may be a capability URL), method names and status codes, error types (never an
 *   error message, which may quote a value).
 *
 * The tracer provider is process-wide by OpenTelemetry's design (the API's global), so the state
 * here is too: `startTracing` once per process, before the service is created (main.ts).
 */
import {
  type Attributes,
  type Context,
  context,
  type Link,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import type { ServiceName } from '@relayplane/contract/contract';
// pino's type itself (logger.ts re-exports it): logger.ts imports this module, not the other way round.
import type { Logger } from 'pino';
import { ConfigError } from './config-error.ts';
import type { Runnable } from './process.ts';

export type { Context, Span, SpanContext };
export { SpanKind };

/** The instrumentation scope of every span the apps make. */
const TRACER_NAME = 'relayplane';

/** OTLP transports `OTEL_EXPORTER_OTLP_PROTOCOL` may name (the SDK's default: http/protobuf). */
const PROTOCOLS = ['http/protobuf', 'http/json', 'grpc'] as const;
export type OtlpProtocol = (typeof PROTOCOLS)[number];

/** What `startTracing` found in the environment: tracing is on. */
export interface TracingSettings {
  /** The traces endpoint variable that turned tracing on (its value is not kept: it may hold credentials). */
  endpointVariable: 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' | 'OTEL_EXPORTER_OTLP_ENDPOINT';
  protocol: OtlpProtocol;
  /** The service name the spans carry. */
  serviceName: string;
  /** Whether the name is the app's default (neither OTEL_SERVICE_NAME nor OTEL_RESOURCE_ATTRIBUTES set one). */
  defaultServiceName: boolean;
}

type Env = Readonly<Record<string, string | undefined>>;

const set = (v: string | undefined): v is string => v !== undefined && v.trim() !== '';

/** `service.name` in `OTEL_RESOURCE_ATTRIBUTES` (`key=value,…`, values percent-encoded), if any. */
function resourceServiceName(attributes: string | undefined): string | undefined {
  if (!set(attributes)) return undefined;
  for (const pair of attributes.split(',')) {
    const at = pair.indexOf('=');
    if (at > 0 && pair.slice(0, at).trim() === 'service.name') {
      try {
        return decodeURIComponent(pair.slice(at + 1).trim());
      } catch {
        return pair.slice(at + 1).trim();
      }
    }
  }
  return undefined;
}

/**
 * Whether tracing is on and how, from the standard variables; undefined when off (no endpoint,
 * `OTEL_SDK_DISABLED=true`, or `OTEL_TRACES_EXPORTER=none`). A protocol the SDK does not know is a
 * configuration error naming the variable (the SDK would only warn and export nothing).
 */
export function tracingSettings(env: Env, defaultServiceName: string): TracingSettings | undefined {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined;
  if (env.OTEL_TRACES_EXPORTER?.trim().toLowerCase() === 'none') return undefined;
  const endpointVariable = set(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
    ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'
    : set(env.OTEL_EXPORTER_OTLP_ENDPOINT)
      ? 'OTEL_EXPORTER_OTLP_ENDPOINT'
      : undefined;
  if (!endpointVariable) return undefined;
  let protocol: OtlpProtocol = 'http/protobuf';
  for (const variable of ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'OTEL_EXPORTER_OTLP_PROTOCOL'] as const) {
    const value = env[variable]?.trim();
    if (!value) continue;
    if (!(PROTOCOLS as readonly string[]).includes(value)) {
      throw new ConfigError(variable, `must be one of ${PROTOCOLS.join(', ')}, not "${value}"`);
    }
    protocol = value as OtlpProtocol;
    break;
  }
  const named = set(env.OTEL_SERVICE_NAME)
    ? env.OTEL_SERVICE_NAME.trim()
    : resourceServiceName(env.OTEL_RESOURCE_ATTRIBUTES);
  return {
    endpointVariable,
    protocol,
    serviceName: named ?? defaultServiceName,
    defaultServiceName: named === undefined,
  };
}

/** A started SDK. */
export interface Tracing {
  readonly settings: TracingSettings;
  /** Exports what is buffered and stops (SIGTERM path: after the service is destroyed). */
  shutdown(): Promise<void>;
}

export interface TracingOverrides {
  /**
   * Span processors to use instead of the exporter the variables choose (tests: an in-memory
   * exporter). The SDK is configured from the environment for everything else.
   */
  // biome-ignore lint/suspicious/noExplicitAny: the SDK's SpanProcessor type, not imported unless tracing is on
  spanProcessors?: any[];
}

let tracer: Tracer | undefined;

/** Whether spans are being made (a started SDK). The hot paths test this first. */
export function isTracingEnabled(): boolean {
  return tracer !== undefined;
}

/** The tracer while tracing is on (tracing-rpc.ts, tracing-redis.ts); else undefined. */
export function activeTracer(): Tracer | undefined {
  return tracer;
}

/**
 * Starts the OpenTelemetry SDK when the environment asks for it (see `tracingSettings`); answers
 * undefined, having loaded nothing, when it does not. `env` must be the process's environment:
 * the SDK reads the rest of the OTEL_* variables from there itself.
 */
export async function startTracing(
  env: Env,
  defaultServiceName: string,
  overrides: TracingOverrides = {},
): Promise<Tracing | undefined> {
  const settings = tracingSettings(env, defaultServiceName);
  if (!settings) return undefined;
  if (tracer) throw new Error('tracing is already started in this process');
  const { NodeSDK } = await import('@opentelemetry/sdk-node');
  const sdk = new NodeSDK({
    // Only when the environment names none: the SDK's own setting would override the variables.
    ...(settings.defaultServiceName ? { serviceName: settings.serviceName } : {}),
    ...(overrides.spanProcessors ? { spanProcessors: overrides.spanProcessors } : {}),
    // Traces only: no metric readers or log exporters (metrics are Prometheus', docs/metrics.md).
    metricReaders: [],
    logRecordProcessors: [],
    instrumentations: [],
  });
  sdk.start();
  tracer = trace.getTracer(TRACER_NAME);
  return {
    settings,
    async shutdown() {
      tracer = undefined;
      await sdk.shutdown();
    },
  };
}

/**
 * The service name spans carry unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES set one
 * (`embedded`: the four services in one process).
 */
export function defaultServiceName(service: ServiceName | 'embedded'): string {
  return `relayplane-${service}`;
}

/**
 * A service's process entry with tracing (main.ts): the SDK started from the environment before
 * the service is created (a bad OTEL_* value fails the start like any configuration error),
 * announced in the service's log (when it has one), and shut down, its last spans exported, after
 * the service is destroyed.
 */
export async function withTracing<S extends Runnable & { readonly logger?: Logger }>(
  env: Env,
  service: ServiceName | 'embedded',
  create: () => Promise<S>,
): Promise<Runnable> {
  const tracing = await startTracing(env, defaultServiceName(service));
  let created: S;
  try {
    created = await create();
  } catch (err) {
    await tracing?.shutdown();
    throw err;
  }
  if (tracing && created.logger) {
    const { protocol, serviceName, endpointVariable } = tracing.settings;
    created.logger.info(
      { protocol, serviceName, endpoint: endpointVariable },
      'tracing on: spans exported over OTLP',
    );
  }
  return {
    start: () => created.start(),
    async destroy() {
      try {
        await created.destroy();
      } finally {
        await tracing?.shutdown();
      }
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Spans

/** The active span if it is recorded (a child made now would be too); else undefined. */
export function recordingSpan(ctx: Context): Span | undefined {
  const span = trace.getSpan(ctx);
  return span?.isRecording() ? span : undefined;
}

/** Whether a child of the active span would be recorded (tracing on, a recorded span active). */
export function isRecording(): boolean {
  return tracer !== undefined && recordingSpan(context.active()) !== undefined;
}

/**
 * A child of the active span, when tracing is on and that span is recorded; else undefined and
 * nothing allocated. The caller sets attributes on it and ends it (`endSpan`).
 */
export function startChildSpan(name: string, kind: SpanKind): Span | undefined {
  if (!tracer) return undefined;
  const parent = context.active();
  if (!recordingSpan(parent)) return undefined;
  return tracer.startSpan(name, { kind }, parent);
}

/**
 * Ends `span`; with `error`, as failed, with `error.type` (a class name or an error code, never a
 * message: messages may quote values).
 */
export function endSpan(span: Span, error?: unknown, errorType?: string): void {
  if (error !== undefined) {
    span.setStatus({ code: SpanStatusCode.ERROR });
    span.setAttribute('error.type', errorType ?? errorTypeOf(error));
  }
  span.end();
}

/** A stable name for what failed: a code (SQLSTATE, AppError code, errno name) or the class name. */
function errorTypeOf(error: unknown): string {
  if (error !== null && typeof error === 'object') {
    const code = (error as { code?: unknown }).code;
    if (typeof code === 'string' && /^[A-Za-z0-9_.-]{1,64}$/.test(code)) return code;
    const name = (error as { name?: unknown }).name;
    if (typeof name === 'string' && /^[A-Za-z0-9_.-]{1,64}$/.test(name)) return name;
  }
  return 'Error';
}

/**
 * Runs `fn` in a child span of the active one (see `startChildSpan`), ended when `fn` returns or
 * throws; `attributes` is called only when the span is made. Without one, just `fn()`.
 */
export function inChildSpan<T>(name: string, attributes: ((span: Span) => void) | undefined, fn: () => T): T {
  const span = startChildSpan(name, SpanKind.INTERNAL);
  if (!span) return fn();
  attributes?.(span);
  return runEnding(span, trace.setSpan(context.active(), span), fn);
}

/** Sets an attribute on the active span when it is recorded (a hot-path decision, e.g. a cache hit). */
export function setActiveSpanAttribute(key: string, value: string | number | boolean): void {
  if (!tracer) return;
  recordingSpan(context.active())?.setAttribute(key, value);
}

// ---------------------------------------------------------------------------------------------
// Batches

/**
 * The active span's context when it is sampled: what a request hands to a batcher, which links
 * the batch's span to it. Undefined when tracing is off or the request is not sampled.
 */
export function sampledSpanContext(): SpanContext | undefined {
  if (!tracer) return undefined;
  const span = trace.getSpan(context.active());
  if (!span) return undefined;
  const sc = span.spanContext();
  return sc.traceFlags & TraceFlags.SAMPLED ? sc : undefined;
}

/**
 * Runs `fn`, the work done at once for `members` (requests, each with the span context it
 * handed over, see `sampledSpanContext`), in a span linked to each sampled member and parented on
 * the first of them, ended when `fn` returns (or the promise it returns settles). Storage spans
 * `fn` makes are its children, so every member's trace reaches them through its link. No sampled
 * member (or tracing off): just `fn()`, in the root context when tracing is on and a span is
 * active (the batch would otherwise continue whichever request happened to start it); without an
 * active span it runs where it is, no context entered (unsampled requests run in none: the usual case).
 */
export function inBatchSpan<M, T>(
  name: string,
  members: readonly M[],
  spanContextOf: (member: M) => SpanContext | undefined,
  attributes: ((span: Span) => void) | undefined,
  fn: () => T,
): T {
  if (!tracer) return fn();
  let parent: SpanContext | undefined;
  const links: Link[] = [];
  for (const member of members) {
    const sc = spanContextOf(member);
    if (!sc) continue;
    parent ??= sc;
    links.push({ context: sc });
  }
  if (!parent) return outsideAnyTrace(fn);
  const span = tracer.startSpan(
    name,
    { kind: SpanKind.INTERNAL, links, attributes: { 'relayplane.batch.size': members.length } },
    trace.setSpanContext(ROOT_CONTEXT, parent),
  );
  attributes?.(span);
  return runEnding(span, trace.setSpan(ROOT_CONTEXT, span), fn);
}

/** `fn()` in `ctx`, `span` ended when it returns or throws, or when the promise it returns settles. */
function runEnding<T>(span: Span, ctx: Context, fn: () => T): T {
  let result: T;
  try {
    result = context.with(ctx, fn);
  } catch (err) {
    endSpan(span, err);
    throw err;
  }
  if (result instanceof Promise) {
    return result.then(
      (value) => {
        endSpan(span);
        return value;
      },
      (err: unknown) => {
        endSpan(span, err);
        throw err;
      },
    ) as T;
  }
  endSpan(span);
  return result;
}

/**
 * Runs `fn` in the root context when tracing is on and a span is active: work that belongs to no
 * request (opening a long-lived stream, a batch of unsampled requests). Entering a context costs
 * an async-context frame, so where no span is active `fn` runs as it is: nothing it calls could
 * continue a trace from there.
 */
export function outsideAnyTrace<T>(fn: () => T): T {
  if (!tracer) return fn();
  const active = context.active();
  return active === ROOT_CONTEXT || trace.getSpan(active) === undefined
    ? fn()
    : context.with(ROOT_CONTEXT, fn);
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** A span context as a W3C `traceparent` (how one request's context rides in a batch message). */
export function toTraceparent(sc: SpanContext): string {
  return `00-${sc.traceId}-${sc.spanId}-${sc.traceFlags & TraceFlags.SAMPLED ? '01' : '00'}`;
}

/**
 * Runs `fn` in a span `name` continuing the trace of `traceparent` (a request's context carried
 * in a batch message); without one (or tracing off, or a malformed one), just `fn()` in the root
 * context.
 */
export function continueTrace<T>(
  name: string,
  traceparent: string | undefined,
  attributes: ((span: Span) => void) | undefined,
  fn: () => Promise<T>,
): Promise<T> {
  if (!tracer || !traceparent) return fn();
  const m = TRACEPARENT.exec(traceparent);
  if (!m || /^0+$/.test(m[1] as string) || /^0+$/.test(m[2] as string)) return fn();
  const parent = trace.setSpanContext(ROOT_CONTEXT, {
    traceId: m[1] as string,
    spanId: m[2] as string,
    traceFlags: Number.parseInt(m[3] as string, 16) & TraceFlags.SAMPLED,
    isRemote: true,
  });
  const span = tracer.startSpan(name, { kind: SpanKind.SERVER }, parent);
  attributes?.(span);
  return runEnding(span, trace.setSpan(parent, span), fn);
}

/** Runs `fn` in `ctx` (a span's context from this module). */
export function runInContext<T>(ctx: Context, fn: () => T): T {
  return context.with(ctx, fn);
}

// ---------------------------------------------------------------------------------------------
// Logs

/** `trace_id` and `span_id` of the active span, for a log line; undefined when there is none or tracing is off. */
export function traceLogFields(): { trace_id: string; span_id: string } | undefined {
  if (!tracer) return undefined;
  const span = trace.getSpan(context.active());
  if (!span) return undefined;
  const { traceId, spanId } = span.spanContext();
  if (traceId === '00000000000000000000000000000000') return undefined;
  return { trace_id: traceId, span_id: spanId };
}

export type { Attributes };
