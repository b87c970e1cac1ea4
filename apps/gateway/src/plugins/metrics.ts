/**
 * HTTP request metrics (docs/metrics.md): `relayplane_http_requests_total{method,route,status}`
 * and `relayplane_http_request_duration_seconds{method,route}`. The route is the matched
 * route pattern (`/api/v1/credentials/:jti`) or `unmatched`, never the raw URL, so the label
 * sets stay bounded by the routes the gateway serves.
 */
import { type Counter, counter, type Histogram, histogram, type Registry } from '@relayplane/shared/metrics';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/** The route label of a request no route matched (404s of unknown paths, malformed URLs). */
export const UNMATCHED_ROUTE = 'unmatched';

/** Methods kept as they are; anything else is counted as `other`. */
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

interface RouteMetrics {
  readonly duration: Histogram.Internal<'method' | 'route'>;
  /** By status code, bound on first use. */
  readonly requests: Map<number, Counter.Internal>;
  readonly method: string;
  readonly route: string;
}

export function registerHttpMetrics(app: FastifyInstance, registry: Registry): void {
  const requests = counter(registry, {
    name: 'relayplane_http_requests_total',
    help: 'HTTP requests answered by the gateway, by method, route pattern and status code.',
    labelNames: ['method', 'route', 'status'],
  });
  const duration = histogram(registry, {
    name: 'relayplane_http_request_duration_seconds',
    help: 'Time from receiving an HTTP request to finishing its answer, by method and route pattern, in seconds.',
    labelNames: ['method', 'route'],
  });
  // route → method → pre-bound children: no label object or key string per request.
  const byRoute = new Map<string, Map<string, RouteMetrics>>();

  const metricsOf = (method: string, route: string): RouteMetrics => {
    let byMethod = byRoute.get(route);
    if (!byMethod) {
      byMethod = new Map();
      byRoute.set(route, byMethod);
    }
    let m = byMethod.get(method);
    if (!m) {
      const label = METHODS.has(method) ? method : 'other';
      m = { duration: duration.labels(label, route), requests: new Map(), method: label, route };
      byMethod.set(method, m);
    }
    return m;
  };

  app.addHook('onResponse', (request: FastifyRequest, reply: FastifyReply, done) => {
    const route = request.is404 ? UNMATCHED_ROUTE : (request.routeOptions.url ?? UNMATCHED_ROUTE);
    // Unknown methods share one entry: the map stays as bounded as the label.
    const m = metricsOf(METHODS.has(request.method) ? request.method : 'other', route);
    m.duration.observe(reply.elapsedTime / 1000);
    const status = reply.statusCode;
    let child = m.requests.get(status);
    if (!child) {
      child = requests.labels(m.method, m.route, String(status));
      m.requests.set(status, child);
    }
    child.inc();
    done();
  });
}
