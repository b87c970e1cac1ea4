/**
 * gRPC policy shared by every service: errors cross as a gRPC status plus a stable code
 * in metadata, every client call has a deadline, the request id travels in metadata, and
 * every server serves the standard health protocol. With mutual TLS (`grpc-tls.ts`) every
 * link is authenticated both ways and a server admits a call only from the services the
 * matrix (`rpc-authz.ts`) lists for its method.
 */
import type { DescMethod, DescService } from '@bufbuild/protobuf';
import {
  addService,
  type CallInfo,
  type CallOptions,
  type ClientHooks,
  createClient,
  grpc,
  IN_PROCESS_CALLER_METADATA_KEY,
  IN_PROCESS_CALLER_OPTION,
  InProcessServer,
  isInProcessAddress,
  type ServerHooks,
  type ServiceClient,
  type ServiceImpl,
} from '@relayplane/proto/grpc';
import type { ServiceName } from './contract.ts';
import {
  AppError,
  DEFAULT_RETRY_AFTER_SECONDS,
  dependencyFailure,
  ERROR_CODE_METADATA_KEY,
  ERROR_CODES,
  type ErrorCode,
  errorSummary,
  INTERNAL_MESSAGE,
  isErrorCode,
  RETRY_AFTER_METADATA_KEY,
  toAppError,
} from './errors.ts';
import { type ClientTls, countRefusedReloads, type GrpcTls } from './grpc-tls.ts';
import { HealthService, healthImpl } from './health.ts';
import type { Logger } from './logger.ts';
import {
  type Counter,
  type CounterChild,
  counter,
  type Histogram,
  type HistogramChild,
  histogram,
  type Registry,
} from './metrics.ts';
import {
  ACTOR_METADATA_KEY,
  actorFrom,
  actorToMetadata,
  CLIENT_IP_METADATA_KEY,
  clientIpFrom,
  currentRequestContext,
  REQUEST_ID_METADATA_KEY,
  type RequestContext,
  requestIdFrom,
  runWithRequestContext,
  USER_AGENT_METADATA_KEY,
  userAgentFrom,
} from './request-context.ts';
import { ANY_PEER, callersOf, methodName } from './rpc-authz.ts';
import { isTracingEnabled } from './tracing.ts';
import { startRpcClientSpan, traceRpcServer } from './tracing-rpc.ts';

const GRPC_TO_CODE: Partial<Record<number, ErrorCode>> = {
  [grpc.status.DEADLINE_EXCEEDED]: 'unavailable',
  [grpc.status.UNAVAILABLE]: 'unavailable',
  [grpc.status.CANCELLED]: 'unavailable',
};

/** gRPC status names by number (`OK`, `CANCELLED`, …): the `code` label of the server metrics. */
const STATUS_NAMES: readonly string[] = Array.from({ length: 17 }, (_, i) => grpc.status[i] ?? String(i));

/** The pre-bound children of one method. */
interface MethodMetrics {
  readonly seconds: HistogramChild;
  /** By status number, bound on first use. */
  readonly handled: (CounterChild | undefined)[];
}

/**
 * `relayplane_grpc_server_handled_total{service,method,code}` and
 * `relayplane_grpc_server_handling_seconds{service,method}`: every call counted once when it
 * ends (a stream at its end), with the status it ended with.
 */
export class GrpcServerMetrics {
  readonly #handled: Counter<'service' | 'method' | 'code'>;
  readonly #seconds: Histogram<'service' | 'method'>;
  readonly #unauthorized: Counter<'method' | 'peer'>;
  readonly #methods = new Map<DescMethod, MethodMetrics>();

  constructor(registry: Registry) {
    this.#handled = counter(registry, {
      name: 'relayplane_grpc_server_handled_total',
      help: 'gRPC calls completed by the server, by service, method and status code.',
      labelNames: ['service', 'method', 'code'],
    });
    this.#seconds = histogram(registry, {
      name: 'relayplane_grpc_server_handling_seconds',
      help: 'Time from the start of a gRPC call to its end (whole stream for streaming calls), in seconds.',
      labelNames: ['service', 'method'],
    });
    this.#unauthorized = counter(registry, {
      name: 'relayplane_grpc_server_unauthorized_total',
      help: 'gRPC calls refused with PERMISSION_DENIED because the peer (mutual TLS identity: gateway, issuer, admin, billing, other or none) may not call the method.',
      labelNames: ['method', 'peer'],
    });
  }

  /** Counts one call refused by the authorization matrix; `peer` is bounded (an app, `other` or `none`). */
  unauthorized(method: string, peer: string): void {
    this.#unauthorized.labels(method, peer).inc();
  }

  #of(method: DescMethod): MethodMetrics {
    let m = this.#methods.get(method);
    if (!m) {
      m = { seconds: this.#seconds.labels(method.parent.typeName, method.name), handled: [] };
      this.#methods.set(method, m);
    }
    return m;
  }

  /** Records one finished call: `code` is a gRPC status number, `startedAt` from `performance.now()`. */
  record(method: DescMethod, code: number, startedAt: number): void {
    const m = this.#of(method);
    m.seconds.observe((performance.now() - startedAt) / 1000);
    let handled = m.handled[code];
    if (!handled) {
      handled = this.#handled.labels(method.parent.typeName, method.name, STATUS_NAMES[code] ?? String(code));
      m.handled[code] = handled;
    }
    handled.inc();
  }
}

/** The status a failed call ends with (as `toStatus` answers it), or CANCELLED when the caller left. */
function failedStatus(err: unknown, signal: AbortSignal): number {
  if (signal.aborted) return grpc.status.CANCELLED;
  return toAppError(err).grpcStatus;
}

/**
 * What a failed call answers (`toAppError`: a dependency that is away becomes `unavailable`,
 * anything unexpected `internal`), logged on the server that failed: a bug at error level with
 * the whole error; an outage at warn with its cause's name, code and message only, since
 * during an outage every request logs one.
 */
export function reportFailure(logger: Logger, err: unknown, rpc: string): AppError {
  const failure = toAppError(err);
  if (failure.code === 'internal') {
    // An AppError the code threw says what failed; anything else is a bug in the handler.
    const message = err instanceof AppError ? err.message : 'unhandled error in rpc handler';
    logger.error({ err: failure.cause ?? failure, rpc }, message);
  } else if (failure.code === 'unavailable') {
    const dependency = dependencyFailure(failure.cause);
    logger.warn(
      { rpc, ...(dependency ? { dependency } : {}), err: errorSummary(failure.cause) },
      failure.message,
    );
  }
  return failure;
}

/** The request context a call's metadata carries (what the gateway learned of the client). */
function contextFrom(metadata: grpc.Metadata): RequestContext {
  const context: RequestContext = { requestId: requestIdFrom(metadata.get(REQUEST_ID_METADATA_KEY)[0]) };
  const clientIp = clientIpFrom(metadata.get(CLIENT_IP_METADATA_KEY)[0]);
  if (clientIp) context.clientIp = clientIp;
  const userAgent = userAgentFrom(metadata.get(USER_AGENT_METADATA_KEY)[0]);
  if (userAgent) context.userAgent = userAgent;
  const actor = actorFrom(metadata.get(ACTOR_METADATA_KEY)[0]);
  if (actor) context.actor = actor;
  return context;
}

/** Refuses a call whose peer may not call its method: the error it fails with, or undefined to go on. */
type Authorize = (method: DescMethod, call: CallInfo) => AppError | undefined;

/**
 * The per-call check of mutual TLS: the peer's SPIFFE identity must be one the matrix lists
 * for the method (the health service: anyone past the handshake). A refusal is logged at warn
 * with the peer's full identity and counted with a bounded `peer` label.
 */
function authorizer(tls: GrpcTls, logger: Logger, metrics: GrpcServerMetrics | undefined): Authorize {
  return (method, call) => {
    const callers = callersOf(method);
    if (callers === ANY_PEER) return undefined;
    const peer = tls.identityOf(call.peerCertificate?.());
    if (peer.app && callers?.includes(peer.app)) return undefined;
    const name = methodName(method);
    logger.warn(
      { peer: peer.id ?? 'none', method: name },
      'gRPC call refused: this peer may not call this method',
    );
    metrics?.unauthorized(name, peer.app ?? (peer.id ? 'other' : 'none'));
    return new AppError('forbidden', `${peer.app ?? 'this peer'} may not call ${name}`);
  };
}

/**
 * Who the peer of a call is, when that is known: an in-process call's caller as its composition
 * root named it; else the SPIFFE app of the mutual-TLS certificate; over plaintext, nobody.
 */
function peerAppOf(call: CallInfo, tls: GrpcTls | undefined): string | undefined {
  if (call.inProcess) return call.metadata.get(IN_PROCESS_CALLER_METADATA_KEY)[0]?.toString();
  return tls?.identityOf(call.peerCertificate?.()).app;
}

function serverHooks(
  logger: Logger,
  metrics: GrpcServerMetrics | undefined,
  authorize: Authorize | undefined,
  tls?: GrpcTls,
): ServerHooks {
  return {
    around(method, call, run) {
      const context = contextFrom(call.metadata);
      const peerApp = peerAppOf(call, tls);
      if (peerApp) context.peerApp = peerApp;
      const authorized = authorize
        ? () => {
            const denied = authorize(method, call);
            return denied ? Promise.reject(denied) : run();
          }
        : run;
      // With tracing on, a call carrying a trace context runs in a server span continuing it (tracing.ts).
      const admitted = isTracingEnabled()
        ? () =>
            traceRpcServer(method.parent.typeName, method.name, call.metadata, authorized, (err) =>
              failedStatus(err, call.signal),
            )
        : authorized;
      if (!metrics) return runWithRequestContext(context, admitted);
      const startedAt = performance.now();
      return runWithRequestContext(context, admitted).then(
        (result) => {
          metrics.record(method, call.signal.aborted ? grpc.status.CANCELLED : grpc.status.OK, startedAt);
          return result;
        },
        (err: unknown) => {
          metrics.record(method, failedStatus(err, call.signal), startedAt);
          throw err;
        },
      );
    },
    toStatus(err, method) {
      const failure = reportFailure(logger, err, method.name);
      const metadata = new grpc.Metadata();
      metadata.set(ERROR_CODE_METADATA_KEY, failure.code);
      if (failure.retryAfterSeconds !== undefined) {
        metadata.set(RETRY_AFTER_METADATA_KEY, String(failure.retryAfterSeconds));
      }
      return { code: failure.grpcStatus, details: failure.message, metadata };
    },
  };
}

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
