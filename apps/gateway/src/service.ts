import type { Bus } from '@relayplane/shared/bus';
import { SERVICES } from '@relayplane/shared/contract';
import { type Coordination, connectCoordination } from '@relayplane/shared/coordination';
import { countRefusedReloads, grpcTls } from '@relayplane/shared/grpc-tls';
import { createLogger, type Logger } from '@relayplane/shared/logger';
import { createRegistry, type MetricsServer, type Registry, serveMetrics } from '@relayplane/shared/metrics';
import { deferringSubscriptions } from '@relayplane/shared/redis';
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.ts';
import { closeClients, connectClients, type GatewayClients } from './clients.ts';
import type { GatewayConfig } from './config.ts';

export interface GatewayOverrides {
  logger?: Logger;
  clients?: GatewayClients;
  /** Embedded mode passes the in-process bus it shares with the issuer. */
  bus?: Bus;
}

/** The public HTTP gateway. */
export class GatewayService {
  readonly config: GatewayConfig;
  readonly logger: Logger;
  readonly app: FastifyInstance;
  /** This service's Prometheus metrics (served on `config.metricsAddress` when set). */
  readonly metrics: Registry;
  readonly #clients: GatewayClients;
  /** The bus this gateway made (none when given one, or without Redis): closed by destroy. */
  readonly #owned: Coordination | undefined;
  #metricsServer: MetricsServer | undefined;
  #url = '';

  private constructor(
    config: GatewayConfig,
    logger: Logger,
    app: FastifyInstance,
    metrics: Registry,
    clients: GatewayClients,
    owned: Coordination | undefined,
  ) {
    this.config = config;
    this.logger = logger;
    this.app = app;
    this.metrics = metrics;
    this.#clients = clients;
    this.#owned = owned;
  }

  static async create(config: GatewayConfig, overrides: GatewayOverrides = {}): Promise<GatewayService> {
    const logger = overrides.logger ?? createLogger({ level: config.logLevel, service: SERVICES.gateway });
    const metrics = createRegistry({ defaultMetrics: config.metricsAddress !== undefined });
    const tls = overrides.clients ? undefined : grpcTls(config.grpcTls, logger);
    countRefusedReloads(metrics, tls);
    const clients =
      overrides.clients ??
      connectClients(config.services, config.rpcTimeoutMs, config.grpcDnsMinIntervalMs, tls);
    const coordination =
      !overrides.bus && config.redis
        ? connectCoordination(config.redis, logger, {
            name: SERVICES.gateway,
            busPrefix: config.redis.prefix,
          })
        : undefined;
    // buildApp subscribes (JWKS, API key and plan invalidations): that must not wait for Redis.
    const owned = coordination && {
      ...coordination,
      bus: deferringSubscriptions(coordination.bus, coordination.connections, logger),
    };
    const bus = overrides.bus ?? owned?.bus;
    const { app } = await buildApp({ config, clients, logger, bus, metrics });
    return new GatewayService(config, logger, app, metrics, clients, owned);
  }

  async start(): Promise<void> {
    this.#url = await this.app.listen({ host: this.config.host, port: this.config.port });
    const { headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs, maxConnections } = this.config;
    this.logger.info(
      { url: this.#url, headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs, maxConnections },
      'gateway listening',
    );
    if (this.config.metricsAddress !== undefined) {
      this.#metricsServer = await serveMetrics(this.config.metricsAddress, this.metrics, this.logger);
    }
  }

  /** Port of the metrics listener; undefined when there is none. */
  get metricsPort(): number | undefined {
    return this.#metricsServer?.port;
  }

  /** Base URL once started, e.g. http://127.0.0.1:8080. */
  get url(): string {
    return this.#url;
  }

  /** Stops accepting, lets in-flight requests finish, closes downstream channels. */
  async destroy(): Promise<void> {
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
    closeClients(this.#clients);
    await this.#owned?.bus.close();
    for (const connection of this.#owned?.connections ?? []) connection.disconnect();
    // Last: metrics stay scrapable while the gateway drains.
    await this.#metricsServer?.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.destroy();
  }
}
