/**
 * The server side of the in-process transport (in-process.ts): the handlers of one server,
 * reachable at an `in-process:<name>` address in a process-wide registry once it listens.
 */
import type { DescMethod, DescService } from '@bufbuild/protobuf';
import * as grpc from '@grpc/grpc-js';
import type { CallInfo, ServerHooks, ServiceImpl } from './rpc-types.ts';

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

const servers = new Map<string, InProcessServer>();

/** A status as grpc-js hands it to a client: an Error with code, details and metadata. */
export function statusError(
  code: grpc.status,
  details: string,
  metadata = new grpc.Metadata(),
): grpc.ServiceError {
  return Object.assign(new Error(`${code} ${grpc.status[code]}: ${details}`), { code, details, metadata });
}

export function fromStatusObject(status: grpc.StatusObject): grpc.ServiceError {
  return statusError(status.code, status.details, status.metadata);
}

export function servicePath(service: DescService, method: DescMethod): string {
  return `/${service.typeName}/${method.name}`;
}

export type AnyHandler = (...args: never[]) => unknown;

export interface Registered {
  method: DescMethod;
  handler: AnyHandler;
  hooks: ServerHooks;
}

/** One call as the server side sees it. */
export class ServerCall {
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
export function lookup(
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
