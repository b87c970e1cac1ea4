/**
 * Prometheus metrics (docs/metrics.md). Every service owns one `Registry` — never
 * prom-client's global one — so tests and the embedded mode, which run several services in
 * one process, never collide. Metrics are created once per registry with fixed label names;
 * hot paths keep pre-bound children (`labels(...)`) and only call `inc()` / `observe()`.
 *
 * Labels never carry secrets, tokens, ids or any other unbounded value.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { Logger } from './logger.ts';

export { Counter, Gauge, Histogram, Registry };

/** Prefix of every metric this platform defines (process and Node.js metrics keep their usual names). */
export const METRICS_PREFIX = 'relayplane_';

/** Buckets of request/call duration histograms, in seconds (1 ms to 5 min: unary calls and streams). */
export const DURATION_BUCKETS: readonly number[] = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300,
];

export interface RegistryOptions {
  /**
   * Adds prom-client's process and Node.js metrics (CPU, memory, event loop lag, GC, …).
   * They start process-wide observers that are never released, so services turn them on
   * only when they serve their metrics.
   */
  defaultMetrics?: boolean;
}

/** A fresh registry for one service. */
export function createRegistry(options: RegistryOptions = {}): Registry {
  const registry = new Registry();
  if (options.defaultMetrics) collectDefaultMetrics({ register: registry });
  return registry;
}

interface MetricConfig<L extends string> {
  name: string;
  help: string;
  labelNames?: readonly L[];
}

/**
 * The counter `name` of `registry`, created on first use: two components sharing a
 * registry (or one created twice) share the metric instead of failing on a duplicate.
 */
export function counter<L extends string = never>(registry: Registry, config: MetricConfig<L>): Counter<L> {
  const existing = registry.getSingleMetric(config.name);
  if (existing instanceof Counter) return existing as Counter<L>;
  return new Counter<L>({ ...config, labelNames: config.labelNames ?? [], registers: [registry] });
}

/** The gauge `name` of `registry`, created on first use. */
export function gauge<L extends string = never>(registry: Registry, config: MetricConfig<L>): Gauge<L> {
  const existing = registry.getSingleMetric(config.name);
  if (existing instanceof Gauge) return existing as Gauge<L>;
  return new Gauge<L>({ ...config, labelNames: config.labelNames ?? [], registers: [registry] });
}

/** The histogram `name` of `registry` (default buckets: `DURATION_BUCKETS`), created on first use. */
export function histogram<L extends string = never>(
  registry: Registry,
  config: MetricConfig<L> & { buckets?: readonly number[] },
): Histogram<L> {
  const existing = registry.getSingleMetric(config.name);
  if (existing instanceof Histogram) return existing as Histogram<L>;
  return new Histogram<L>({
    ...config,
    labelNames: config.labelNames ?? [],
    buckets: [...(config.buckets ?? DURATION_BUCKETS)],
    registers: [registry],
  });
}

/** A running metrics listener. */
export interface MetricsServer {
  /** The bound port (the chosen one when the address asked for port 0). */
  readonly port: number;
  /** Stops listening; idle keep-alive connections close at once, a scrape in flight gets 2 s. */
  close(): Promise<void>;
}

const JSON_TYPE = 'application/json; charset=utf-8';

function answer(res: ServerResponse, status: number, error: string, headers: Record<string, string> = {}) {
  const body = JSON.stringify({ error });
  res.writeHead(status, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(body), ...headers });
  res.end(body);
}

/** Splits a validated host:port (`EnvReader.address`); brackets around an IPv6 host are dropped. */
function splitAddress(address: string): { host: string; port: number } {
  const colon = address.lastIndexOf(':');
  const port = Number(address.slice(colon + 1));
  const host = address.slice(0, colon).replace(/^\[(.*)\]$/, '$1');
  if (colon <= 0 || !Number.isInteger(port) || port < 0 || port > 65535 || host === '') {
    throw new Error(`metrics address must be host:port (got "${address}")`);
  }
  return { host, port };
}

/**
 * Serves `registry` on `address` (host:port; port 0 picks a free one) with a plain HTTP
 * server: `GET /metrics` answers the text exposition format; any other path answers 404,
 * any other method on /metrics 405 (HEAD is answered like GET, without a body).
 */
export async function serveMetrics(
  address: string,
  registry: Registry,
  logger: Logger,
): Promise<MetricsServer> {
  const { host, port } = splitAddress(address);
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = req.url ?? '';
    const query = url.indexOf('?');
    const path = query === -1 ? url : url.slice(0, query);
    if (path !== '/metrics') return answer(res, 404, 'not found');
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      return answer(res, 405, 'method not allowed', { allow: 'GET, HEAD' });
    }
    registry.metrics().then(
      (text) => {
        res.writeHead(200, {
          'content-type': registry.contentType,
          'content-length': Buffer.byteLength(text),
          'cache-control': 'no-store',
        });
        res.end(req.method === 'HEAD' ? undefined : text);
      },
      (err: unknown) => {
        logger.error({ err }, 'could not collect metrics');
        if (!res.headersSent) answer(res, 500, 'internal error');
        else res.destroy();
      },
    );
  });
  // A scraper that stops talking must not hold a socket forever.
  server.requestTimeout = 10_000;
  server.headersTimeout = 10_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', (err) => logger.error({ err }, 'metrics listener error'));
  const bound = server.address();
  const boundPort = typeof bound === 'object' && bound ? bound.port : port;
  logger.info({ host, port: boundPort }, 'metrics listening');
  let closing: Promise<void> | undefined;
  return {
    port: boundPort,
    close() {
      closing ??= new Promise<void>((resolve) => {
        const force = setTimeout(() => server.closeAllConnections(), 2_000);
        force.unref();
        server.close(() => {
          clearTimeout(force);
          resolve();
        });
        server.closeIdleConnections();
      });
      return closing;
    },
  };
}
