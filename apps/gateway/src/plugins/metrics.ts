/**
 * HTTP request metrics (docs/metrics.md): `relayplane_http_requests_total{method,route,status}`
 * and `relayplane_http_request_duration_seconds{method,route}`. The route is the matched
 * route pattern (`/api/v1/credentials/:jti`) or `unmatched`, never the raw URL, so the label
 * sets stay bounded by the routes the gateway serves.
 */
import {
  type Counter,
  type CounterChild,
  counter,
  type Histogram,
  type HistogramChild,
  histogram,
  type Registry,
} from '@relayplane/shared/metrics';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/** The route label of a request no route matched (404s of unknown paths, malformed URLs). */
const UNMATCHED_ROUTE = 'unmatched';

/** Methods kept as they are; anything else is counted as `other`. */
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

interface RouteMetrics {
  readonly duration: HistogramChild;
  /** By status code, bound on first use. */
  readonly requests: Map<number, CounterChild>;
  readonly method: string;
  readonly route: string;
}

export class HttpMetrics {
  readonly #requests: Counter<'method' | 'route' | 'status'>;
  readonly #duration: Histogram<'method' | 'route'>;
  /** route → method → pre-bound children: no label object or key string per request. */
  readonly #byRoute = new Map<string, Map<string, RouteMetrics>>();

  constructor(registry: Registry) {
    this.#requests = counter(registry, {
      name: 'relayplane_http_requests_total',
      help: 'HTTP requests answered by the gateway, by method, route pattern and status code.',
      labelNames: ['method', 'route', 'status'],
    });
    this.#duration = histogram(registry, {
      name: 'relayplane_http_request_duration_seconds',
      help: 'Time from receiving an HTTP request to finishing its answer, by method and route pattern, in seconds.',
      labelNames: ['method', 'route'],
    });
  }

  /**
   * Counts every request `app` answers. A matched route observes through its own onResponse
   * hook, bound to the route's metrics when the route is added: no lookup per request
   * (`request.routeOptions` builds a new object on every read). Routes added before this call
   * are not counted: call it before adding any.
   */
  register(app: FastifyInstance): void {
    app.addHook('onRoute', (route) => {
      const methods = [route.method].flat();
      const byMethod = new Map(methods.map((method) => [method, this.#metricsOf(method, route.url)]));
      const only = methods.length === 1 ? byMethod.get(methods[0] as string) : undefined;
      const hook = (request: FastifyRequest, reply: FastifyReply, done: () => void): void => {
        const m = only ?? byMethod.get(request.method);
        if (m) this.#observe(m, reply.statusCode, reply.elapsedTime / 1000);
        done();
      };
      route.onResponse = [...[route.onResponse ?? []].flat(), hook];
    });
    // Requests no route matched answer through the 404 handler, which has no route hooks.
    app.addHook('onResponse', (request: FastifyRequest, reply: FastifyReply, done) => {
      if (request.is404) this.unrouted(request.method, reply.statusCode, reply.elapsedTime / 1000);
      done();
    });
  }

  /**
   * Counts a request answered without a route: the 404 handler's, and those Fastify refuses
   * before routing (a malformed URL), which run no hooks and are counted by their handler.
   */
  unrouted(method: string, status: number, seconds: number): void {
    this.#observe(this.#metricsOf(method, UNMATCHED_ROUTE), status, seconds);
  }

  #metricsOf(method: string, route: string): RouteMetrics {
    // Unknown methods share one entry: the map stays as bounded as the label.
    const key = METHODS.has(method) ? method : 'other';
    let byMethod = this.#byRoute.get(route);
    if (!byMethod) {
      byMethod = new Map();
      this.#byRoute.set(route, byMethod);
    }
    let m = byMethod.get(key);
    if (!m) {
      m = { duration: this.#duration.labels(key, route), requests: new Map(), method: key, route };
      byMethod.set(key, m);
    }
    return m;
  }

  #observe(m: RouteMetrics, status: number, seconds: number): void {
    m.duration.observe(seconds);
    let child = m.requests.get(status);
    if (!child) {
      child = this.#requests.labels(m.method, m.route, String(status));
      m.requests.set(status, child);
    }
    child.inc();
  }
}
