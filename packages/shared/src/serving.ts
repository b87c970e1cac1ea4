/**
 * The last step of every gRPC service's start(): keep its health in step with its database,
 * listen, and serve its metrics. destroy() undoes it in the order that keeps a draining service
 * observable: the database watch first, the metrics listener last.
 */
import type { Logger } from './logger.ts';
import { type MetricsServer, type Registry, serveMetrics } from './metrics.ts';
import { type Pingable, watchDatabase } from './readiness.ts';
import type { RpcServer } from './rpc.ts';

export interface ServeOptions {
  rpc: RpcServer;
  /** The gRPC service's full name (its health status follows the database). */
  serviceName: string;
  database: Pingable;
  listen: string;
  metrics: Registry;
  /** Where to serve `metrics`; undefined: not served. */
  metricsAddress: string | undefined;
  logger: Logger;
  /** Logged as `<name> listening`, with `fields`. */
  name: string;
  fields?: Record<string, unknown>;
}

export interface Serving {
  readonly port: number;
  /** Undefined when metrics are not served. */
  readonly metricsPort: number | undefined;
  /** Stops following the database (first in destroy()). */
  stopWatching(): void;
  /** Closes the metrics listener (last in destroy()). */
  closeMetrics(): Promise<void>;
}

export async function serve(o: ServeOptions): Promise<Serving> {
  const watch = watchDatabase(o.rpc.health, [o.serviceName], o.database, o.logger);
  await watch.check();
  let port: number;
  let metricsServer: MetricsServer | undefined;
  try {
    port = await o.rpc.listen(o.listen);
    o.logger.info({ port, ...o.fields }, `${o.name} listening`);
    if (o.metricsAddress !== undefined)
      metricsServer = await serveMetrics(o.metricsAddress, o.metrics, o.logger);
  } catch (err) {
    // The caller's destroy() never sees a Serving: stop the watch here.
    watch.stop();
    throw err;
  }
  return {
    port,
    metricsPort: metricsServer?.port,
    stopWatching: () => watch.stop(),
    closeMetrics: async () => metricsServer?.close(),
  };
}
