/**
 * gRPC policy shared by every service: errors cross as a gRPC status plus a stable code
 * in metadata, every client call has a deadline, the request id travels in metadata, and
 * every server serves the standard health protocol. With mutual TLS (`grpc-tls.ts`) every
 * link is authenticated both ways and a server admits a call only from the services the
 * matrix (`rpc-authz.ts`) lists for its method.
 */
import type { DescMethod, DescService } from '@bufbuild/protobuf';
import type { ServiceName } from '@relayplane/contract/contract';
import {
  AppError,
  DEFAULT_RETRY_AFTER_SECONDS,
  ERROR_CODE_METADATA_KEY,
  ERROR_CODES,
  type ErrorCode,
  INTERNAL_MESSAGE,
  isErrorCode,
  RETRY_AFTER_METADATA_KEY,
} from '@relayplane/contract/errors';
import {
  addService,
  type CallOptions,
  type ClientHooks,
  createClient,
  grpc,
  IN_PROCESS_CALLER_OPTION,
  InProcessServer,
  isInProcessAddress,
  type ServerHooks,
  type ServiceClient,
  type ServiceImpl,
} from '@relayplane/proto/grpc';
import { type ClientTls, countRefusedReloads, type GrpcTls } from './grpc-tls.ts';
import { HealthService, healthImpl } from './health.ts';
import type { Logger } from './logger.ts';
import type { Registry } from './metrics.ts';
import {
  ACTOR_METADATA_KEY,
  actorFrom,
  actorToMetadata,
  CLIENT_IP_METADATA_KEY,
  clientIpFrom,
  currentRequestContext,
  REQUEST_ID_METADATA_KEY,
  requestIdFrom,
  USER_AGENT_METADATA_KEY,
  userAgentFrom,
} from './request-context.ts';
import { callersOf, methodName } from './rpc-authz.ts';
import { authorizer, GrpcServerMetrics, serverHooks } from './rpc-server-hooks.ts';
import { isTracingEnabled } from './tracing.ts';
import { startRpcClientSpan } from './tracing-rpc.ts';

export { reportFailure } from './rpc-server-hooks.ts';

const GRPC_TO_CODE: Partial<Record<number, ErrorCode>> = {
  [grpc.status.DEADLINE_EXCEEDED]: 'unavailable',
  [grpc.status.UNAVAILABLE]: 'unavailable',
  [grpc.status.CANCELLED]: 'unavailable',
};

/** Errors from a downstream service become AppErrors again, with the same code and message. */
function fromStatus(err: grpc.ServiceError, method: DescMethod): Error {
  const code = err.metadata?.get(ERROR_CODE_METADATA_KEY)[0];
  if (isErrorCode(code)) {
    const retry = Number(err.metadata.get(RETRY_AFTER_METADATA_KEY)[0]);
    return new AppError(code, err.details, {
      retryAfterSeconds: Number.isFinite(retry) && retry > 0 ? retry : undefined,
      cause: err,
    });
  }
  const mapped = GRPC_TO_CODE[err.code] ?? 'internal';
  return new AppError(
    mapped,
    mapped === 'unavailable' ? `${method.parent.name} is unavailable` : INTERNAL_MESSAGE,
    { cause: err, retryAfterSeconds: mapped === 'unavailable' ? DEFAULT_RETRY_AFTER_SECONDS : undefined },
  );
}

export interface RpcClientOptions {
  /** Default deadline for calls that set none. */
  timeoutMs?: number;
  /**
   * Shortest time between two DNS resolutions of a `dns:` target (default 5 s). grpc-js
   * re-resolves when a connection closes, e.g. at a server's max connection age, so a new
   * replica behind the name is found within about that age plus this interval.
   */
  dnsMinIntervalMs?: number;
  /**
   * Whether unary calls answered UNAVAILABLE are tried again (see serviceConfig); default
   * true. Tests of a service's own failure answers turn it off to see them unmasked.
   */
  retries?: boolean;
  /**
   * Mutual TLS to this service (`GrpcTls.client(<app>)`): the server must prove that identity;
   * absent: plaintext.
   */
  tls?: ClientTls;
  /**
   * For an `in-process:` address: the service this client calls as (the composition root's
   * word, what a certificate says over the network). Ignored for network addresses.
   */
  caller?: ServiceName;
}

export function connect<S extends DescService>(
  service: S,
  address: string,
  options: RpcClientOptions = {},
): ServiceClient<S> {
  const hooks: ClientHooks = {
    defaultTimeoutMs: options.timeoutMs ?? 5_000,
    outgoingMetadata() {
      const md = new grpc.Metadata();
      const ctx = currentRequestContext();
      // An id metadata cannot carry would make every call throw; the server then makes one up.
      if (!ctx) return md;
      if (requestIdFrom(ctx.requestId) === ctx.requestId) md.set(REQUEST_ID_METADATA_KEY, ctx.requestId);
      if (ctx.clientIp && clientIpFrom(ctx.clientIp)) md.set(CLIENT_IP_METADATA_KEY, ctx.clientIp);
      const userAgent = userAgentFrom(ctx.userAgent);
      if (userAgent) md.set(USER_AGENT_METADATA_KEY, userAgent);
      if (ctx.actor && actorFrom(actorToMetadata(ctx.actor)))
        md.set(ACTOR_METADATA_KEY, actorToMetadata(ctx.actor));
      return md;
    },
    fromStatus,
  };
  const client = createClient(
    service,
    address,
    hooks,
    {
      'grpc.service_config': JSON.stringify(serviceConfig(service, options.retries ?? true)),
      'grpc.keepalive_time_ms': 30_000,
      'grpc.keepalive_timeout_ms': 10_000,
      'grpc.keepalive_permit_without_calls': 1,
      'grpc.dns_min_time_between_resolutions_ms': options.dnsMinIntervalMs ?? 5_000,
      // grpc-js backs off reconnecting from 1 s up to 120 s by default: after a 30 s outage a
      // channel saw its service back after 12.6 s, 0.7 s with these (readiness, admin waiting for
      // billing, a gateway whose issuer channel was refused before the issuer listened).
      'grpc.initial_reconnect_backoff_ms': 100,
      'grpc.max_reconnect_backoff_ms': 1_000,
      ...options.tls?.options,
      ...(options.caller && isInProcessAddress(address)
        ? { [IN_PROCESS_CALLER_OPTION]: options.caller }
        : {}),
    },
    options.tls?.credentials,
  );
  return isTracingEnabled() ? tracedUnaryCalls(service, client) : client;
}

/**
 * `client` with a CLIENT span (method, status code) around each unary call made under a recorded
 * span, its context sent in the call's metadata so the server's span continues it (tracing.ts).
 * Streaming calls are left as they are: the issuance stream carries each request's context in
 * the request itself. Only when tracing is on.
 */
function tracedUnaryCalls<S extends DescService>(service: S, client: ServiceClient<S>): ServiceClient<S> {
  const traced: Record<string, unknown> = { ...client };
  for (const method of service.methods) {
    if (method.methodKind !== 'unary') continue;
    const call = traced[method.localName] as (req: unknown, opts?: CallOptions) => Promise<unknown>;
    traced[method.localName] = (req: unknown, opts?: CallOptions) => {
      const metadata = new grpc.Metadata();
      const span = startRpcClientSpan(service.typeName, method.name, metadata);
      if (!span) return call(req, opts);
      if (opts?.metadata) metadata.merge(opts.metadata);
      return call(req, { ...opts, metadata }).then(
        (res) => {
          span.end(grpc.status.OK);
          return res;
        },
        (err: unknown) => {
          const code = ((err as Error).cause as { code?: unknown } | undefined)?.code;
          span.end(typeof code === 'number' ? code : grpc.status.UNKNOWN);
          throw err;
        },
      );
    };
  }
  return traced as ServiceClient<S>;
}

/**
 * The client's gRPC service config:
 * - round-robin over every address the target resolves to (all replicas behind a headless
 *   Service or a static list);
 * - unary calls answered UNAVAILABLE are tried up to twice more, after 20–100 ms each (on
 *   the next replica, round-robin). This covers the race of a call sent on a connection the server is
 *   just closing at its max connection age (the server refuses it; grpc-js retries such a
 *   call only once by itself, which replicas closing at about the same time defeat) and a replica that
 *   died. UNAVAILABLE means "not done" across this platform, so a retry never doubles an
 *   effect. A token bucket (100 tokens, 0.1 back per success) stops retrying once failures
 *   outnumber successes for a while: an outage, not a race, so retries would only add load.
 *   Streaming calls are not retried by the channel: the issuance stream retries per request.
 */
function serviceConfig(service: DescService, retries: boolean): object {
  const streaming = service.methods
    .filter((m) => m.methodKind !== 'unary')
    .map((m) => ({ service: service.typeName, method: m.name }));
  if (!retries) return { loadBalancingConfig: [{ round_robin: {} }] };
  return {
    loadBalancingConfig: [{ round_robin: {} }],
    methodConfig: [
      {
        name: [{}],
        retryPolicy: {
          maxAttempts: 3,
          initialBackoff: '0.02s',
          maxBackoff: '0.1s',
          backoffMultiplier: 2,
          retryableStatusCodes: ['UNAVAILABLE'],
        },
      },
      ...(streaming.length ? [{ name: streaming }] : []),
    ],
    retryThrottling: { maxTokens: 100, tokenRatio: 0.1 },
  };
}

export type { ServiceClient, ServiceImpl };

/** A gRPC server with the health service and a lifecycle. */
export interface RpcServerOptions {
  /**
   * Each client connection gets a GOAWAY after about this age (grpc-js adds ±10 % jitter) and
   * reconnects, re-resolving the service's DNS name: clients balancing over a headless
   * Service learn of new replicas this way. 0 or absent: connections live until closed.
   * Calls in flight get `graceMs` to finish on the old connection.
   */
  maxConnectionAgeMs?: number;
  maxConnectionAgeGraceMs?: number;
  /** Where the server's call metrics go (`GrpcServerMetrics`); absent: none are kept. */
  metrics?: Registry;
  /**
   * Mutual TLS: clients must present a certificate chained to the CA, and each call is checked
   * against the authorization matrix (`rpc-authz.ts`). Absent: plaintext, no checks.
   */
  tls?: GrpcTls;
  /**
   * host:port of a second, plaintext listener serving only grpc.health.v1, for probes that
   * cannot present a client certificate (Kubernetes' native gRPC probes). Absent: none.
   */
  healthListen?: string;
}

/** Binds `server` to `address` and answers the bound port. */
function bind(server: grpc.Server, address: string, credentials: grpc.ServerCredentials): Promise<number> {
  return new Promise<number>((resolve, reject) =>
    server.bindAsync(address, credentials, (err, port) => (err ? reject(err) : resolve(port))),
  );
}

/** Lets in-flight calls finish (up to `graceMs`), then closes `server`. */
function shutdown(server: grpc.Server, graceMs: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, graceMs);
    server.tryShutdown(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

export class RpcServer {
  readonly #server: grpc.Server;
  /** The same services for clients in this process (`in-process:` addresses: embedded mode). */
  readonly #inProcess = new InProcessServer();
  #listening: 'network' | 'in-process' | undefined;
  readonly #hooks: ServerHooks;
  readonly #tls: GrpcTls | undefined;
  readonly #health: { listen: string; hooks: ServerHooks; server?: grpc.Server; port: number } | undefined;
  readonly health = healthImpl();
  #port = 0;

  constructor(logger: Logger, options: RpcServerOptions = {}) {
    const age = options.maxConnectionAgeMs ?? 0;
    this.#server = new grpc.Server({
      'grpc.keepalive_permit_without_calls': 1,
      'grpc.keepalive_time_ms': 30_000,
      ...(age > 0
        ? {
            'grpc.max_connection_age_ms': age,
            'grpc.max_connection_age_grace_ms': options.maxConnectionAgeGraceMs ?? 90_000,
          }
        : {}),
    });
    const metrics = options.metrics ? new GrpcServerMetrics(options.metrics) : undefined;
    this.#tls = options.tls;
    if (options.metrics) countRefusedReloads(options.metrics, options.tls);
    this.#hooks = serverHooks(
      logger,
      metrics,
      this.#tls && authorizer(this.#tls, logger, metrics),
      this.#tls,
    );
    this.#health = options.healthListen
      ? { listen: options.healthListen, hooks: serverHooks(logger, metrics, undefined), port: 0 }
      : undefined;
    this.add(HealthService, this.health.impl);
  }

  /** Registers `service`; every one of its methods must have a line in the authorization matrix. */
  add<S extends DescService>(service: S, impl: ServiceImpl<S>): void {
    const undeclared = service.methods.filter((m) => callersOf(m) === undefined).map(methodName);
    if (undeclared.length > 0) {
      throw new Error(
        `${undeclared.join(', ')}: not in the RPC authorization matrix (packages/shared/src/rpc-authz.ts); declare which services may call it`,
      );
    }
    addService(this.#server, service, impl, this.#hooks);
    this.#inProcess.add(service, impl, this.#hooks);
  }

  /**
   * Binds to `address` (host:port; port 0 picks a free one), with mutual TLS when configured,
   * and the plaintext health listener when asked for; returns the bound port. An
   * `in-process:<name>` address serves clients in this process only, with no socket (no TLS,
   * no health listener: nothing outside the process can reach it); the port is then 0.
   */
  async listen(address: string): Promise<number> {
    if (isInProcessAddress(address)) {
      this.#inProcess.listen(address);
      this.#listening = 'in-process';
      return 0;
    }
    this.#listening = 'network';
    this.#port = await bind(
      this.#server,
      address,
      this.#tls?.serverCredentials() ?? grpc.ServerCredentials.createInsecure(),
    );
    if (this.#health && !this.#health.server) {
      const server = new grpc.Server({ 'grpc.keepalive_permit_without_calls': 1 });
      addService(server, HealthService, this.health.impl, this.#health.hooks);
      this.#health.server = server;
      this.#health.port = await bind(server, this.#health.listen, grpc.ServerCredentials.createInsecure());
    }
    return this.#port;
  }

  get port(): number {
    return this.#port;
  }

  /** Port of the plaintext health listener; undefined when there is none. */
  get healthPort(): number | undefined {
    return this.#health?.server ? this.#health.port : undefined;
  }

  /** Reports NOT_SERVING, lets in-flight calls finish (up to `graceMs`), then closes. */
  async close(graceMs = 10_000): Promise<void> {
    this.health.shutdown();
    if (this.#listening === 'in-process') await this.#inProcess.close(graceMs);
    await shutdown(this.#server, graceMs);
    // Last: probes see NOT_SERVING while the server drains, not a refused connection.
    if (this.#health?.server) await shutdown(this.#health.server, graceMs);
  }
}

export { ERROR_CODES };
