import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance } from 'fastify';
import { buildApp, type GatewayApp } from './app.ts';
import type { GatewayConfig } from './config.ts';
import { GatewayContext, type GatewayOverrides } from './context.ts';

export type { GatewayOverrides } from './context.ts';

/** The public HTTP gateway: its context (context.ts) and app (app.ts), started and stopped. */
export class GatewayService {
  readonly ctx: GatewayContext;
  readonly app: FastifyInstance;
  readonly #beginShutdown: () => void;
  #url = '';

  private constructor(ctx: GatewayContext, { app, beginShutdown }: GatewayApp) {
    this.ctx = ctx;
    this.app = app;
    this.#beginShutdown = beginShutdown;
    // Registered last, so closed first: stop accepting and finish in-flight requests before
    // anything they use closes.
    ctx.lifecycle.onClose('http server', () => this.#drain());
  }

  static async create(config: GatewayConfig, overrides: GatewayOverrides = {}): Promise<GatewayService> {
    const ctx = await GatewayContext.fromConfig(config, overrides);
    try {
      return new GatewayService(ctx, await buildApp(ctx));
    } catch (err) {
      await ctx.close();
      throw err;
    }
  }

  get config(): GatewayConfig {
    return this.ctx.config as GatewayConfig;
  }

  get logger() {
    return this.ctx.logger;
  }

  /** This service's Prometheus metrics (served on `config.metricsAddress` when set). */
  get metrics() {
    return this.ctx.metrics;
  }

  async start(): Promise<void> {
    this.#url = await this.app.listen({ host: this.config.host, port: this.config.port });
    const { headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs, maxConnections } = this.config;
    this.logger.info(
      { url: this.#url, headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs, maxConnections },
      'gateway listening',
    );
    await this.ctx.serveMetrics();
  }

  /** Port of the metrics listener; undefined when there is none. */
  get metricsPort(): number | undefined {
    return this.ctx.metricsPort;
  }

  /** Base URL once started, e.g. http://127.0.0.1:8080. */
  get url(): string {
    return this.#url;
  }

  /** Stops accepting, lets in-flight requests finish, then closes the context (reverse build order). */
  destroy(): Promise<void> {
    return this.ctx.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.destroy();
  }

  async #drain(): Promise<void> {
    // Not ready, still serving: load balancers (Kubernetes endpoints, a proxy's health checks)
    // take this gateway out while requests already on their way to it are answered, and each
    // answer closes its connection so the client's next request opens one elsewhere. Without
    // the delay, requests sent just before the balancer noticed would meet a closed listener.
    this.#beginShutdown();
    const delayMs = this.config.shutdownDelayMs;
    if (delayMs > 0) {
      this.logger.info({ delayMs }, 'gateway stopping: not ready, serving until load balancers take it out');
      await sleep(delayMs);
    }
    this.logger.info('gateway stopping: finishing in-flight requests');
    // Drain for a bounded time, then cut whatever connection is still open.
    const drain = setTimeout(() => {
      this.app.server.getConnections((_err, open) => {
        this.logger.warn(
          { open, drainMs: this.config.shutdownDrainMs },
          'drain time over: closing remaining connections',
        );
        this.app.server.closeAllConnections();
      });
    }, this.config.shutdownDrainMs);
    await this.app.close();
    clearTimeout(drain);
    this.logger.info('gateway stopped accepting; closing connections to services');
  }
}
