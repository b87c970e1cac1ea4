/**
 * How every gRPC service starts and stops serving, whatever its dependencies are doing.
 *
 * start() listens first: the whole server ('') reports SERVING (alive, so Kubernetes' startup
 * and liveness probes pass) and the service's own name NOT_SERVING (not ready, so it gets no
 * traffic). Every call of the service answers UNAVAILABLE (`guard`) until start-up is done,
 * never an error from a half-migrated database. Then the parts of start-up that need
 * PostgreSQL run in order, each retried with capped backoff until it succeeds (`step`), so a
 * service started before its database simply waits for it; only a configuration error ends
 * the wait, and stop() (SIGTERM) abandons it. ready() ends start-up: calls are answered and
 * the service's health follows its database from then on.
 *
 * destroy() undoes it in the order that keeps a draining service observable: stop() first
 * (start-up abandoned, the database no longer followed), the metrics listener last.
 */
import type { DescService } from '@bufbuild/protobuf';
import { AppError } from '@relayplane/contract/errors';
import { ServingStatus } from './health.ts';
import type { Logger } from './logger.ts';
import { type MetricsServer, type Registry, serveMetrics } from './metrics.ts';
import { type Pingable, retryUntilDone, watchDatabase } from './readiness.ts';
import type { RpcServer, ServiceImpl } from './rpc.ts';

export interface ServingOptions {
  rpc: RpcServer;
  /** The gRPC service's full name: its health status is the service's readiness. */
  serviceName: string;
  database: Pingable;
  listen: string;
  metrics: Registry;
  /** Where to serve `metrics`; undefined: not served. */
  metricsAddress: string | undefined;
  logger: Logger;
  /** Logged as `<name> listening` and `<name> ready`. */
  name: string;
}

export class Serving {
  readonly #o: ServingOptions;
  readonly #stopping = new AbortController();
  #ready = false;
  #port = 0;
  #metricsServer: MetricsServer | undefined;
  #watch: { stop: () => void } | undefined;

  constructor(o: ServingOptions) {
    this.#o = o;
  }

  /**
   * `impl` answering UNAVAILABLE ("starting", retry in 1 s) until ready(): what the service
   * registers on its server, so nothing runs against a database start-up has not prepared.
   */
  guard<S extends DescService>(service: S, impl: ServiceImpl<S>): ServiceImpl<S> {
    const source = impl as Record<string, (...args: never[]) => unknown>;
    const guarded: Record<string, unknown> = {};
    const admit = () => {
      if (!this.#ready) {
        throw new AppError('unavailable', `${this.#o.name} is starting; retry shortly`, {
          retryAfterSeconds: 1,
        });
      }
    };
    for (const method of service.methods) {
      const handler = source[method.localName];
      if (typeof handler !== 'function') continue; // addService names what is missing
      guarded[method.localName] =
        method.methodKind === 'server_streaming'
          ? async function* (...args: never[]) {
              admit();
              yield* handler.apply(impl, args) as AsyncIterable<unknown>;
            }
          : async (...args: never[]) => {
              admit();
              return handler.apply(impl, args);
            };
    }
    return guarded as ServiceImpl<S>;
  }

  /**
   * Binds the port and serves metrics: the server is alive ('' SERVING), the service not
   * ready (NOT_SERVING) until ready().
   */
  async listen(): Promise<void> {
    const { rpc, serviceName, logger } = this.#o;
    rpc.health.set(serviceName, ServingStatus.NOT_SERVING);
    this.#port = await rpc.listen(this.#o.listen);
    logger.info({ port: this.#port }, `${this.#o.name} listening`);
    if (this.#o.metricsAddress !== undefined) {
      this.#metricsServer = await serveMetrics(this.#o.metricsAddress, this.#o.metrics, logger);
    }
  }

  /**
   * One part of start-up, run until it succeeds: retried with capped backoff while a
   * dependency is away (`retryUntilDone`), abandoned by stop(). A part that must not run
   * twice cleans up after its own failure before it throws.
   */
  step<T>(what: string, run: () => Promise<T>): Promise<T> {
    return retryUntilDone(what, run, { logger: this.#o.logger, signal: this.#stopping.signal });
  }

  /** Aborted by stop(): for start-up work that waits on its own (it then gives up). */
  get signal(): AbortSignal {
    return this.#stopping.signal;
  }

  /**
   * Start-up is done: the service's calls are answered and its health follows the database.
   * `fields` go on the `<name> ready` line.
   */
  async ready(fields: Record<string, unknown> = {}): Promise<void> {
    this.#stopping.signal.throwIfAborted();
    const { rpc, serviceName, database, logger } = this.#o;
    const watch = watchDatabase(rpc.health, [serviceName], database, logger);
    this.#watch = watch;
    this.#ready = true;
    await watch.check();
    logger.info({ port: this.#port, ...fields }, `${this.#o.name} ready`);
  }

  get port(): number {
    return this.#port;
  }

  /** Undefined when metrics are not served. */
  get metricsPort(): number | undefined {
    return this.#metricsServer?.port;
  }

  /** First in destroy(): abandons a start-up still waiting and stops following the database. */
  stop(): void {
    this.#stopping.abort(new Error(`${this.#o.name} is stopping`));
    this.#watch?.stop();
  }

  /** Closes the metrics listener (last in destroy()). */
  async closeMetrics(): Promise<void> {
    await this.#metricsServer?.close();
  }
}
