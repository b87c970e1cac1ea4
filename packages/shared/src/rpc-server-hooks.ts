/**
 * What every gRPC server call runs through (rpc.ts's RpcServer): the request context from the
 * call's metadata, the caller's authorization under mutual TLS (rpc-authz.ts), a SERVER span when
 * traced, the call metrics, and the status a failure answers (logged once, nothing internal leaked).
 */
import type { DescMethod } from '@bufbuild/protobuf';
import {
  AppError,
  dependencyFailure,
  ERROR_CODE_METADATA_KEY,
  errorSummary,
  RETRY_AFTER_METADATA_KEY,
  toAppError,
} from '@relayplane/contract/errors';
import {
  type CallInfo,
  grpc,
  IN_PROCESS_CALLER_METADATA_KEY,
  type ServerHooks,
} from '@relayplane/proto/grpc';
import type { GrpcTls } from './grpc-tls.ts';
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
  CLIENT_IP_METADATA_KEY,
  clientIpFrom,
  REQUEST_ID_METADATA_KEY,
  type RequestContext,
  requestIdFrom,
  runWithRequestContext,
  USER_AGENT_METADATA_KEY,
  userAgentFrom,
} from './request-context.ts';
import { ANY_PEER, callersOf, methodName } from './rpc-authz.ts';
import { isTracingEnabled } from './tracing.ts';
import { traceRpcServer } from './tracing-rpc.ts';

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
export function authorizer(tls: GrpcTls, logger: Logger, metrics: GrpcServerMetrics | undefined): Authorize {
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

export function serverHooks(
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
