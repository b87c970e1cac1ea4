/**
 * The in-process transport: a client whose calls reach a server's handlers in the same
 * process directly — the same message objects, no socket, no HTTP/2, no binary encoding —
 * through the same hooks as over gRPC, so that neither side can tell:
 *
 * - the server runs every call through its `ServerHooks` (`around`: request context,
 *   metrics, authorization; `toStatus`: the status a failure answers), in a fresh async
 *   context as a network call would (nothing of the caller's AsyncLocalStorage leaks in),
 *   with the caller's metadata (a copy) and a signal that aborts on the deadline, a client
 *   cancellation or a forced shutdown;
 * - the client sends its hooks' metadata, applies their default deadline, and turns every
 *   failure into `ClientHooks.fromStatus` of a grpc-js-shaped `ServiceError` (code, details,
 *   metadata, message `<code> <NAME>: <details>`): the status a handler answered, or the one
 *   grpc-js would answer itself — DEADLINE_EXCEEDED, CANCELLED ("Cancelled on client"),
 *   UNAVAILABLE for a server that is not listening or is shutting down, UNIMPLEMENTED;
 * - the channel's retry policy (the `grpc.service_config` channel option: which methods,
 *   which codes, attempts, backoff with jitter, retry throttling) is applied to unary calls
 *   as grpc-js applies it;
 * - streams keep their flow control: a bidi handler's `send` waits when the client is far
 *   behind, a server-streaming handler waits for the reader, and the client's `send`
 *   answers false when the handler is behind.
 *
 * Addresses are `in-process:<name>`; a server takes one with `InProcessServer.listen`.
 * Names live in a process-wide registry, so the embedded composition gives each start its own.
 */

import { AsyncResource } from 'node:async_hooks';
import {
  create,
  type DescMessage,
  type DescService,
  type MessageInitShape,
  type MessageShape,
} from '@bufbuild/protobuf';
import * as grpc from '@grpc/grpc-js';
import { Pipe } from './in-process-pipe.ts';
import { RetryThrottle, retryPolicyOf, type ServiceConfig } from './in-process-retry.ts';
import {
  fromStatusObject,
  IN_PROCESS_CALLER_METADATA_KEY,
  IN_PROCESS_CALLER_OPTION,
  IN_PROCESS_SCHEME,
  lookup,
  servicePath,
  statusError,
} from './in-process-server.ts';
import type {
  CallInfo,
  CallOptions,
  ClientBidi,
  ClientHooks,
  ServerBidi,
  ServiceClient,
} from './rpc-types.ts';

export {
  IN_PROCESS_CALLER_METADATA_KEY,
  IN_PROCESS_CALLER_OPTION,
  IN_PROCESS_SCHEME,
  InProcessServer,
  isInProcessAddress,
} from './in-process-server.ts';

/** Messages a bidi handler may have queued for the client before `send` waits (as over gRPC). */
const BIDI_MAX_BUFFERED = 4096;
/** grpc-js's object-mode stream buffer: a client `send` answers false beyond it, a server stream waits. */
const STREAM_HIGH_WATER = 16;

/**
 * The async context every server call starts in: the one of this module's evaluation, with
 * no request's AsyncLocalStorage stores in it (a network call starts on a socket event).
 */
const ROOT_CONTEXT = new AsyncResource('relayplane.in-process');

/**
 * Runs a server call in the server's own async context, after the current task's synchronous
 * part (as a call arriving on a socket would): `start` must not throw.
 */
function dispatch(start: () => void): void {
  queueMicrotask(() => ROOT_CONTEXT.runInAsyncScope(start));
}

/** Aborted-signal and deadline plumbing shared by every call kind. */
function watchCall(
  deadline: number,
  signal: AbortSignal | undefined,
  onEnd: (err: grpc.ServiceError) => void,
): () => void {
  const timer =
    Number.isFinite(deadline) &&
    setTimeout(
      () => onEnd(statusError(grpc.status.DEADLINE_EXCEEDED, 'Deadline exceeded')),
      Math.max(0, deadline - Date.now()),
    );
  const onAbort = () => onEnd(statusError(grpc.status.CANCELLED, 'Cancelled on client'));
  signal?.addEventListener('abort', onAbort, { once: true });
  return () => {
    if (timer) clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
  };
}

/** One attempt of a unary call. */
function unaryAttempt(
  name: string,
  path: string,
  request: unknown,
  metadata: grpc.Metadata,
  deadline: number,
  signal: AbortSignal | undefined,
): Promise<MessageShape<DescMessage>> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(statusError(grpc.status.CANCELLED, 'Cancelled on client'));
    const found = lookup(name, path);
    if (found instanceof Error) return reject(found);
    const { server, entry } = found;
    const call = server.begin(entry, metadata.clone());
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      unwatch();
      fn();
    };
    const unwatch = watchCall(deadline, signal, (err) => {
      call.abort(err.details);
      settle(() => reject(err));
    });
    call.onForce = (err) => settle(() => reject(err));
    dispatch(() => {
      entry.hooks
        .around(entry.method, call.info, async () =>
          create(
            entry.method.output,
            (await (entry.handler as (r: unknown, c: CallInfo) => Promise<never>)(
              request,
              call.info,
            )) as never,
          ),
        )
        .then(
          (res) => settle(() => resolve(res as MessageShape<DescMessage>)),
          (err: unknown) => {
            const status = fromStatusObject(entry.hooks.toStatus(err, entry.method));
            settle(() => reject(status));
          },
        )
        .finally(() => server.end(call));
    });
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Creates a client for `service` whose calls go to the in-process server at `address`. */
export function createInProcessClient<S extends DescService>(
  service: S,
  address: string,
  hooks: ClientHooks,
  channelOptions: grpc.ChannelOptions = {},
): ServiceClient<S> {
  const name = address.slice(IN_PROCESS_SCHEME.length);
  const caller = channelOptions[IN_PROCESS_CALLER_OPTION];
  const rawConfig = channelOptions['grpc.service_config'];
  const config: ServiceConfig = typeof rawConfig === 'string' ? JSON.parse(rawConfig) : {};
  const throttle = config.retryThrottling
    ? new RetryThrottle(config.retryThrottling.maxTokens, config.retryThrottling.tokenRatio)
    : undefined;
  let closed = false;
  const client: Record<string, unknown> = {
    close: () => {
      closed = true;
    },
  };
  const shutDown = () => statusError(grpc.status.UNAVAILABLE, 'Channel has been shut down');

  for (const method of service.methods) {
    const path = servicePath(service, method);
    const prepare = (opts: CallOptions | undefined, defaultDeadline: number) => {
      const metadata = hooks.outgoingMetadata();
      if (opts?.metadata) metadata.merge(opts.metadata);
      // Set last: the composition root's word for who calls wins over any metadata passed in.
      if (typeof caller === 'string') metadata.set(IN_PROCESS_CALLER_METADATA_KEY, caller);
      else metadata.remove(IN_PROCESS_CALLER_METADATA_KEY);
      const deadline = opts?.deadline ? opts.deadline.getTime() : defaultDeadline;
      return { metadata, deadline };
    };

    if (method.methodKind === 'unary') {
      const policy = retryPolicyOf(config, method);
      client[method.localName] = async (req: MessageInitShape<DescMessage>, opts?: CallOptions) => {
        const { metadata, deadline } = prepare(opts, Date.now() + hooks.defaultTimeoutMs);
        const request = create(method.input, req);
        let backoff = policy?.initialBackoffMs ?? 0;
        for (let attempt = 1; ; attempt++) {
          try {
            if (closed) throw shutDown();
            const res = await unaryAttempt(name, path, request, metadata, deadline, opts?.signal);
            throttle?.success();
            return res;
          } catch (err) {
            const status = err as grpc.ServiceError;
            const retryable = policy?.codes.has(status.code) ?? false;
            const allowed = retryable && (throttle ? throttle.failure() : true);
            const pause = Math.random() * backoff;
            if (!allowed || !policy || attempt >= policy.maxAttempts || Date.now() + pause >= deadline) {
              throw hooks.fromStatus(status, method);
            }
            await sleep(pause);
            backoff = Math.min(backoff * policy.multiplier, policy.maxBackoffMs);
          }
        }
      };
    } else if (method.methodKind === 'server_streaming') {
      client[method.localName] = (req: MessageInitShape<DescMessage>, opts?: CallOptions) => {
        const { metadata, deadline } = prepare(opts, Date.now() + hooks.defaultTimeoutMs);
        const responses = new Pipe<MessageShape<DescMessage>>();
        startServerStream(
          name,
          path,
          create(method.input, req),
          metadata,
          deadline,
          opts?.signal,
          responses,
          closed,
        );
        return (async function* () {
          try {
            yield* responses;
          } catch (err) {
            throw hooks.fromStatus(err as grpc.ServiceError, method);
          }
        })();
      };
    } else if (method.methodKind === 'bidi_streaming') {
      client[method.localName] = (opts?: CallOptions) => {
        const { metadata, deadline } = prepare(opts, Number.POSITIVE_INFINITY);
        const requests = new Pipe<MessageShape<DescMessage>>();
        const responses = new Pipe<MessageShape<DescMessage>>();
        const cancel = startBidi(name, path, metadata, deadline, opts?.signal, requests, responses, closed);
        return {
          send: (req: MessageInitShape<DescMessage>) => {
            requests.push(create(method.input, req));
            return requests.length < STREAM_HIGH_WATER;
          },
          end: () => requests.end(),
          cancel,
          responses: (async function* () {
            try {
              yield* responses;
            } catch (err) {
              throw hooks.fromStatus(err as grpc.ServiceError, method);
            }
          })(),
        } satisfies ClientBidi<MessageInitShape<DescMessage>, MessageShape<DescMessage>>;
      };
    }
  }
  return client as ServiceClient<S>;
}

function startServerStream(
  name: string,
  path: string,
  request: unknown,
  metadata: grpc.Metadata,
  deadline: number,
  signal: AbortSignal | undefined,
  responses: Pipe<MessageShape<DescMessage>>,
  closed: boolean,
): void {
  const refused = closed
    ? statusError(grpc.status.UNAVAILABLE, 'Channel has been shut down')
    : signal?.aborted
      ? statusError(grpc.status.CANCELLED, 'Cancelled on client')
      : undefined;
  const found = refused ?? lookup(name, path);
  if (found instanceof Error) {
    responses.fail(found);
    return;
  }
  const { server, entry } = found;
  const call = server.begin(entry, metadata.clone());
  const end = (err: grpc.ServiceError) => {
    unwatch();
    call.abort(err.details);
    responses.fail(err);
  };
  const unwatch = watchCall(deadline, signal, end);
  call.onForce = end;
  // The reader stopping early cancels the call, as destroying a grpc-js stream does.
  responses.onReturn = () => {
    unwatch();
    call.abort('Cancelled on client');
  };
  dispatch(() => {
    entry.hooks
      .around(entry.method, call.info, async () => {
        const stream = (entry.handler as (r: unknown, c: CallInfo) => AsyncIterable<never>)(
          request,
          call.info,
        );
        for await (const msg of stream) {
          if (call.info.signal.aborted) break;
          responses.push(create(entry.method.output, msg));
          if (responses.length >= STREAM_HIGH_WATER) await responses.drained(STREAM_HIGH_WATER);
        }
      })
      .then(
        () => {
          unwatch();
          responses.end();
        },
        (err: unknown) => {
          unwatch();
          if (!call.info.signal.aborted)
            responses.fail(fromStatusObject(entry.hooks.toStatus(err, entry.method)));
        },
      )
      .finally(() => server.end(call));
  });
}

/** Starts a bidi call; answers the client's cancel. */
function startBidi(
  name: string,
  path: string,
  metadata: grpc.Metadata,
  deadline: number,
  signal: AbortSignal | undefined,
  requests: Pipe<MessageShape<DescMessage>>,
  responses: Pipe<MessageShape<DescMessage>>,
  closed: boolean,
): () => void {
  const refuse = (err: grpc.ServiceError) => {
    requests.end();
    responses.fail(err);
    return () => {};
  };
  if (closed) return refuse(statusError(grpc.status.UNAVAILABLE, 'Channel has been shut down'));
  if (signal?.aborted) return refuse(statusError(grpc.status.CANCELLED, 'Cancelled on client'));
  const found = lookup(name, path);
  if (found instanceof Error) return refuse(found);
  const { server, entry } = found;
  const call = server.begin(entry, metadata.clone());
  const end = (err: grpc.ServiceError) => {
    unwatch();
    call.abort(err.details);
    requests.end();
    responses.fail(err);
  };
  const unwatch = watchCall(deadline, signal, end);
  call.onForce = end;
  responses.onReturn = () => end(statusError(grpc.status.CANCELLED, 'Cancelled on client'));
  const stream: ServerBidi<MessageShape<DescMessage>, MessageInitShape<DescMessage>> = {
    requests,
    async send(res) {
      if (call.info.signal.aborted) return;
      responses.push(create(entry.method.output, res));
      if (responses.length > BIDI_MAX_BUFFERED) await responses.drained(BIDI_MAX_BUFFERED);
    },
  };
  dispatch(() => {
    entry.hooks
      .around(entry.method, call.info, () =>
        (entry.handler as (s: typeof stream, c: CallInfo) => Promise<void>)(stream, call.info),
      )
      .then(
        () => {
          unwatch();
          requests.end();
          responses.end();
        },
        (err: unknown) => {
          unwatch();
          requests.end();
          if (!call.info.signal.aborted)
            responses.fail(fromStatusObject(entry.hooks.toStatus(err, entry.method)));
        },
      )
      .finally(() => server.end(call));
  });
  return () => end(statusError(grpc.status.CANCELLED, 'Cancelled on client'));
}
