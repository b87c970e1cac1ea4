/**
 * HTTP server spans (docs/tracing.md), registered only when tracing is on: off, the gateway has
 * no hook, decoration or log controller more than before.
 *
 * Every request but the probes (`/healthz`, `/readyz`: a trace per kubelet probe would only be
 * noise) gets a SERVER span `<METHOD> <route template>` continuing the W3C `traceparent` it came
 * with, started by the app's first onRequest hook, so every other hook, the guards, the handler
 * and everything they call run in it; ended when the answer is finished, with its status. The
 * span carries the route template, never the path (capability URLs, docs/security.md); a request
 * no route matched is named by its method alone.
 *
 * Fastify logs a request's `incoming request` line before any hook runs: with tracing on, that
 * line is written by the span's hook instead, in the span, and `request completed` is written in
 * it too, so both carry `trace_id` and `span_id` (logger.ts). Requests Fastify refuses before
 * routing (a malformed URL) run no hooks: their line is written as Fastify does.
 *
 * A request the sampler did not pick runs in no span context at all (entering one costs an
 * async-context frame and a context object per request, for a span nothing records): its
 * request logger is bound to the span's ids instead, so its lines name the trace all the same.
 */
import { type Context, isTracingEnabled, runInContext, type Span } from '@relayplane/shared/tracing';
import { endHttpServerSpan, spanLogFields, startHttpServerSpan } from '@relayplane/shared/tracing-http';
import { type FastifyInstance, type FastifyReply, type FastifyRequest, LogController } from 'fastify';
import { withBindings } from '../lazy-logger.ts';

/** Probes: not traced. */
const UNTRACED_ROUTES: ReadonlySet<string> = new Set(['/healthz', '/readyz']);

interface RequestTrace {
  span: Span;
  /** The span's context, when it is recorded (see the module comment). */
  context: Context | undefined;
}

declare module 'fastify' {
  interface FastifyRequest {
    otelTrace: RequestTrace | null;
  }
}

/**
 * Fastify's request log lines, moved into the request's span (see the module comment): `incoming
 * request` is left to the span's hook, `request completed` is written in the span's context.
 */
class TracedLogController extends LogController {
  override incomingRequest(request: FastifyRequest, reply: FastifyReply): void {
    // No params: a request refused before routing (frameworkErrors), which runs no hook.
    if (request.params === null) super.incomingRequest(request, reply);
  }

  override requestCompleted(error: Error | null, request: FastifyRequest, reply: FastifyReply): void {
    const ctx = request.otelTrace?.context;
    if (ctx) runInContext(ctx, () => super.requestCompleted(error, request, reply));
    else super.requestCompleted(error, request, reply);
  }
}

/** The `logController` option of the gateway's Fastify instance when tracing is on; else undefined (Fastify's own). */
export function tracingLogController(): LogController | undefined {
  return isTracingEnabled() ? new TracedLogController() : undefined;
}

/** Registers the span hooks; call it before any other onRequest hook. Nothing when tracing is off. */
export function registerTracing(app: FastifyInstance): void {
  if (!isTracingEnabled()) return;
  app.decorateRequest('otelTrace', null);
  const logController = new LogController();
  app.addHook('onRequest', (request, reply, done) => {
    const route = request.is404 ? undefined : request.routeOptions.url;
    const started =
      route !== undefined && UNTRACED_ROUTES.has(route)
        ? undefined
        : startHttpServerSpan(request.method, route, request.headers);
    if (!started) {
      logController.incomingRequest(request, reply);
      done();
      return;
    }
    request.otelTrace = started;
    if (!started.context) {
      // Not sampled: the ids ride the request's logger (Fastify's reply logs through the same one).
      const log = withBindings(request.log, spanLogFields(started.span));
      request.log = log;
      reply.log = log;
      logController.incomingRequest(request, reply);
      done();
      return;
    }
    runInContext(started.context, () => {
      logController.incomingRequest(request, reply);
      done();
    });
  });
  const end = (request: FastifyRequest, status: number, aborted: boolean) => {
    const traced = request.otelTrace;
    if (!traced) return;
    request.otelTrace = null;
    if (aborted) traced.span.setAttribute('error.type', 'aborted');
    endHttpServerSpan(traced.span, status);
  };
  app.addHook('onResponse', (request, reply, done) => {
    end(request, reply.statusCode, false);
    done();
  });
  app.addHook('onRequestAbort', (request, done) => {
    // The client went away before the answer: 499, as proxies log it.
    end(request, 499, true);
    done();
  });
}
