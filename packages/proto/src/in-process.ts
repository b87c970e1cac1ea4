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
  type DescMethod,
  type DescService,
  type MessageInitShape,
  type MessageShape,
} from '@bufbuild/protobuf';
import * as grpc from '@grpc/grpc-js';
import type {
  CallInfo,
  CallOptions,
  ClientBidi,
  ClientHooks,
  ServerBidi,
  ServerHooks,
  ServiceClient,
  ServiceImpl,
} from './rpc-types.ts';

export const IN_PROCESS_SCHEME = 'in-process:';

/**
 * The metadata key an in-process client names its service under (channel option
 * `IN_PROCESS_CALLER_OPTION`); read only for calls that are in-process (`CallInfo.inProcess`),
 * ignored over the network, where the peer's certificate says who it is.
 */
export const IN_PROCESS_CALLER_METADATA_KEY = 'relayplane-in-process-caller';
export const IN_PROCESS_CALLER_OPTION = 'relayplane.in_process_caller';

export function isInProcessAddress(address: string): boolean {
  return address.startsWith(IN_PROCESS_SCHEME);
}

/** Messages a bidi handler may have queued for the client before `send` waits (as over gRPC). */
const BIDI_MAX_BUFFERED = 4096;
/** grpc-js's object-mode stream buffer: a client `send` answers false beyond it, a server stream waits. */
const STREAM_HIGH_WATER = 16;

/**
 * The async context every server call starts in: the one of this module's evaluation, with
 * no request's AsyncLocalStorage stores in it (a network call starts on a socket event).
 */
const ROOT_CONTEXT = new AsyncResource('relayplane.in-process');

const servers = new Map<string, InProcessServer>();

/** A status as grpc-js hands it to a client: an Error with code, details and metadata. */
function statusError(code: grpc.status, details: string, metadata = new grpc.Metadata()): grpc.ServiceError {
  return Object.assign(new Error(`${code} ${grpc.status[code]}: ${details}`), { code, details, metadata });
}

function fromStatusObject(status: grpc.StatusObject): grpc.ServiceError {
  return statusError(status.code, status.details, status.metadata);
}

function servicePath(service: DescService, method: DescMethod): string {
  return `/${service.typeName}/${method.name}`;
}

type AnyHandler = (...args: never[]) => unknown;

interface Registered {
  method: DescMethod;
  handler: AnyHandler;
  hooks: ServerHooks;
}

/** One call as the server side sees it. */
class ServerCall {
  readonly #controller = new AbortController();
  readonly info: CallInfo;
  /** Fails the client's side of the call with a status (set by the call's kind). */
  onForce: (err: grpc.ServiceError) => void = () => {};

  constructor(method: DescMethod, metadata: grpc.Metadata) {
    this.info = {
      method: method.name,
      metadata,
      signal: this.#controller.signal,
      peerCertificate: () => undefined,
      inProcess: true,
    };
  }

  abort(reason: string): void {
    if (!this.#controller.signal.aborted) this.#controller.abort(new Error(reason));
  }
}

/** The handlers of one server, reachable at an `in-process:` address once it listens. */
export class InProcessServer {
  readonly #methods = new Map<string, Registered>();
  readonly #calls = new Set<ServerCall>();
  #name: string | undefined;
  #closing = false;
  #idle: (() => void) | undefined;

  /** Registers `impl` for `service` (addService has checked that every method has a handler). */
  add<S extends DescService>(service: S, impl: ServiceImpl<S>, hooks: ServerHooks): void {
    for (const method of service.methods) {
      const handler = (impl as Record<string, unknown>)[method.localName];
      if (typeof handler !== 'function') {
        throw new Error(`${service.typeName}.${method.name} has no implementation`);
      }
      this.#methods.set(servicePath(service, method), {
        method,
        handler: (handler as AnyHandler).bind(impl),
        hooks,
      });
    }
  }

  /** Takes `address` (`in-process:<name>`); a name already taken fails, as a bound port would. */
  listen(address: string): void {
    if (!isInProcessAddress(address)) throw new Error(`${address} is not an in-process address`);
    const name = address.slice(IN_PROCESS_SCHEME.length);
    if (!name) throw new Error('an in-process address needs a name');
    if (servers.has(name)) throw new Error(`in-process address ${address} is already in use`);
    servers.set(name, this);
    this.#name = name;
  }

  /**
   * Refuses new calls (UNAVAILABLE), lets the calls in flight finish for up to `graceMs`, then
   * ends the rest: their handlers' signals abort and their clients get UNAVAILABLE.
   */
  async close(graceMs: number): Promise<void> {
    this.#closing = true;
    if (this.#name !== undefined && servers.get(this.#name) === this) servers.delete(this.#name);
    if (this.#calls.size > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, graceMs);
        this.#idle = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#idle = undefined;
    }
    for (const call of [...this.#calls]) {
      call.abort('server shut down');
      call.onForce(statusError(grpc.status.UNAVAILABLE, 'Connection dropped'));
      this.#end(call);
    }
  }

  /** @internal The handler of `path`, or the status a client gets instead. */
  resolve(path: string): Registered | grpc.ServiceError {
    if (this.#closing) return statusError(grpc.status.UNAVAILABLE, 'the server is shutting down');
    return (
      this.#methods.get(path) ??
      statusError(grpc.status.UNIMPLEMENTED, `The server does not implement the method ${path}`)
    );
  }

  /** @internal */
  begin(entry: Registered, metadata: grpc.Metadata): ServerCall {
    const call = new ServerCall(entry.method, metadata);
    this.#calls.add(call);
    return call;
  }

  /** @internal */
  end(call: ServerCall): void {
    this.#end(call);
  }

  #end(call: ServerCall): void {
    if (this.#calls.delete(call) && this.#calls.size === 0) this.#idle?.();
  }
}

/** The server at `name`, or the status a call to it ends with. */
function lookup(
  name: string,
  path: string,
): { server: InProcessServer; entry: Registered } | grpc.ServiceError {
  const server = servers.get(name);
  if (!server) {
    return statusError(
      grpc.status.UNAVAILABLE,
      `No connection established: in-process server ${name} is not listening`,
    );
  }
  const entry = server.resolve(path);
  return entry instanceof Error ? entry : { server, entry };
}

/**
 * A FIFO of messages between the two sides of a stream, ended or failed by the producer and
 * read as an async iterator; `length` is what the reader has not taken yet.
 */
class Pipe<T> implements AsyncIterable<T> {
  readonly #items: T[] = [];
  #head = 0;
  #done = false;
  #error: unknown;
  #waiting: ((r: IteratorResult<T>) => void) | undefined;
  #failWaiting: ((err: unknown) => void) | undefined;
  #drains: (() => void)[] = [];
  /** Called when the reader stops early (break, return). */
  onReturn: () => void = () => {};

  get length(): number {
    return this.#items.length - this.#head;
  }

  get closed(): boolean {
    return this.#done;
  }

  push(item: T): void {
    if (this.#done) return;
    const waiting = this.#waiting;
    if (waiting) {
      this.#waiting = undefined;
      this.#failWaiting = undefined;
      waiting({ value: item, done: false });
      return;
    }
    this.#items.push(item);
  }

  end(): void {
    if (this.#done) return;
    this.#done = true;
    this.#settleWaiting();
    this.#wakeDrains();
  }

  fail(err: unknown): void {
    if (this.#done) return;
    this.#done = true;
    this.#error = err;
    this.#settleWaiting();
    this.#wakeDrains();
  }

  /** Resolves once the reader has taken enough that fewer than `below` remain (or the pipe is done). */
  drained(below: number): Promise<void> {
    if (this.length < below || this.#done) return Promise.resolve();
    return new Promise((resolve) => {
      const check = () => {
        if (this.length < below || this.#done) resolve();
        else this.#drains.push(check);
      };
      this.#drains.push(check);
    });
  }

  #settleWaiting(): void {
    if (this.length > 0) return;
    const waiting = this.#waiting;
    const failWaiting = this.#failWaiting;
    this.#waiting = undefined;
    this.#failWaiting = undefined;
    if (this.#error !== undefined) failWaiting?.(this.#error);
    else waiting?.({ value: undefined, done: true });
  }

  #wakeDrains(): void {
    if (this.#drains.length === 0) return;
    const drains = this.#drains;
    this.#drains = [];
    for (const check of drains) check();
  }

  #take(): T {
    const item = this.#items[this.#head] as T;
    this.#items[this.#head] = undefined as T;
    this.#head++;
    if (this.#head === this.#items.length) {
      this.#items.length = 0;
      this.#head = 0;
    } else if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
      this.#items.splice(0, this.#head);
      this.#head = 0;
    }
    this.#wakeDrains();
    return item;
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => {
        if (this.length > 0) return Promise.resolve({ value: this.#take(), done: false });
        if (this.#done) {
          return this.#error !== undefined
            ? Promise.reject(this.#error)
            : Promise.resolve({ value: undefined, done: true });
        }
        return new Promise<IteratorResult<T>>((resolve, reject) => {
          this.#waiting = resolve;
          this.#failWaiting = reject;
        });
      },
      return: () => {
        if (!this.#done) {
          this.#done = true;
          this.#items.length = 0;
          this.#head = 0;
          this.#wakeDrains();
          this.onReturn();
        }
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}

/** The retry policy grpc-js would apply to a method, read from the channel's service config. */
interface RetryPolicy {
  maxAttempts: number;
  initialBackoffMs: number;
  maxBackoffMs: number;
  multiplier: number;
  codes: Set<number>;
}

interface ServiceConfig {
  methodConfig?: {
    name?: { service?: string; method?: string }[];
    retryPolicy?: {
      maxAttempts: number;
      initialBackoff: string;
      maxBackoff: string;
      backoffMultiplier: number;
      retryableStatusCodes: (string | number)[];
    };
  }[];
  retryThrottling?: { maxTokens: number; tokenRatio: number };
}

const seconds = (value: string) => Number.parseFloat(value) * 1000;

/** The most specific methodConfig entry for the method (method > service > default), as gRPC chooses it. */
function retryPolicyOf(config: ServiceConfig, method: DescMethod): RetryPolicy | undefined {
  const service = method.parent.typeName;
  const entries = config.methodConfig ?? [];
  const match = (test: (n: { service?: string; method?: string }) => boolean) =>
    entries.find((entry) => (entry.name ?? []).some(test));
  const entry =
    match((n) => n.service === service && n.method === method.name) ??
    match((n) => n.service === service && !n.method) ??
    match((n) => !n.service && !n.method);
  const policy = entry?.retryPolicy;
  if (!policy || method.methodKind !== 'unary') return undefined;
  return {
    maxAttempts: Math.min(policy.maxAttempts, 5),
    initialBackoffMs: seconds(policy.initialBackoff),
    maxBackoffMs: seconds(policy.maxBackoff),
    multiplier: policy.backoffMultiplier,
    codes: new Set(
      policy.retryableStatusCodes.map((c) =>
        typeof c === 'number' ? c : (grpc.status[c as keyof typeof grpc.status] as number),
      ),
    ),
  };
}

/** gRPC retry throttling: retries stop while failures outnumber successes (tokens ≤ half). */
class RetryThrottle {
  readonly #maxTokens: number;
  readonly #ratio: number;
  #tokens: number;
  constructor(maxTokens: number, ratio: number) {
    this.#maxTokens = maxTokens;
    this.#ratio = ratio;
    this.#tokens = maxTokens;
  }
  success(): void {
    this.#tokens = Math.min(this.#maxTokens, this.#tokens + this.#ratio);
  }
  /** Records a retryable failure; answers whether a retry is allowed. */
  failure(): boolean {
    this.#tokens = Math.max(0, this.#tokens - 1);
    return this.#tokens > this.#maxTokens / 2;
  }
}

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
