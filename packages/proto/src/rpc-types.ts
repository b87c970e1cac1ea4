/**
 * The types of the grpc-js bridge (grpc.ts): what handlers, clients and hooks look like. Apart
 * from grpc.ts so that the in-process transport (in-process.ts), which grpc.ts dispatches to,
 * takes them without importing grpc.ts back: no import circle. grpc.ts re-exports them.
 */
import type { PeerCertificate } from 'node:tls';
import type {
  DescMessage,
  DescMethod,
  DescService,
  MessageInitShape,
  MessageShape,
} from '@bufbuild/protobuf';
import type * as grpc from '@grpc/grpc-js';

export type AnyMethod = { methodKind: string; input: DescMessage; output: DescMessage };
export type Methods<S extends DescService> = S extends { method: infer M } ? M : never;

/** Per-call information handed to a handler. */
export interface CallInfo {
  readonly method: string;
  readonly metadata: grpc.Metadata;
  /** Aborted when the client cancels or the deadline passes. */
  readonly signal: AbortSignal;
  /**
   * The certificate the client presented (mutual TLS); undefined over plaintext. Read when
   * asked. Absent on a CallInfo made by hand (a test calling a handler directly).
   */
  peerCertificate?(): PeerCertificate | undefined;
  /**
   * The call came from a client in this process (`in-process:` address): its caller is the
   * composition root's word (`IN_PROCESS_CALLER_METADATA_KEY`), trusted like the process itself.
   */
  readonly inProcess?: boolean;
}

type HandlerFor<M> = M extends { methodKind: 'unary'; input: infer I; output: infer O }
  ? I extends DescMessage
    ? O extends DescMessage
      ? (req: MessageShape<I>, call: CallInfo) => Promise<MessageInitShape<O>>
      : never
    : never
  : M extends { methodKind: 'server_streaming'; input: infer I; output: infer O }
    ? I extends DescMessage
      ? O extends DescMessage
        ? (req: MessageShape<I>, call: CallInfo) => AsyncIterable<MessageInitShape<O>>
        : never
      : never
    : M extends { methodKind: 'bidi_streaming'; input: infer I; output: infer O }
      ? I extends DescMessage
        ? O extends DescMessage
          ? (stream: ServerBidi<MessageShape<I>, MessageInitShape<O>>, call: CallInfo) => Promise<void>
          : never
        : never
      : never;

/** A bidirectional stream as a server handler sees it: requests in, `send` out (with backpressure). */
export interface ServerBidi<Req, ResInit> {
  readonly requests: AsyncIterable<Req>;
  send(res: ResInit): Promise<void>;
}

/** A bidirectional stream as a client sees it. */
export interface ClientBidi<ReqInit, Res> {
  send(req: ReqInit): boolean;
  /** Half-closes: no more requests; responses keep arriving. */
  end(): void;
  cancel(): void;
  readonly responses: AsyncIterable<Res>;
}

/** What a server implements for a generated service. */
export type ServiceImpl<S extends DescService> = {
  [K in keyof Methods<S>]: HandlerFor<Methods<S>[K]>;
};

export interface CallOptions {
  /** Absolute deadline; the client hooks set a default when absent. */
  deadline?: Date;
  metadata?: grpc.Metadata;
  signal?: AbortSignal;
}

type ClientMethodFor<M> = M extends { methodKind: 'unary'; input: infer I; output: infer O }
  ? I extends DescMessage
    ? O extends DescMessage
      ? (req: MessageInitShape<I>, opts?: CallOptions) => Promise<MessageShape<O>>
      : never
    : never
  : M extends { methodKind: 'server_streaming'; input: infer I; output: infer O }
    ? I extends DescMessage
      ? O extends DescMessage
        ? (req: MessageInitShape<I>, opts?: CallOptions) => AsyncIterable<MessageShape<O>>
        : never
      : never
    : M extends { methodKind: 'bidi_streaming'; input: infer I; output: infer O }
      ? I extends DescMessage
        ? O extends DescMessage
          ? (opts?: CallOptions) => ClientBidi<MessageInitShape<I>, MessageShape<O>>
          : never
        : never
      : never;

/** A typed client for a generated service. */
export type ServiceClient<S extends DescService> = {
  [K in keyof Methods<S>]: ClientMethodFor<Methods<S>[K]>;
} & { readonly close: () => void };

export interface ServerHooks {
  /** Runs the handler; lets the caller set up context (request id, logging). */
  around<T>(method: DescMethod, call: CallInfo, run: () => Promise<T>): Promise<T>;
  /** Turns anything a handler threw into a gRPC status. */
  toStatus(err: unknown, method: DescMethod): grpc.StatusObject;
}

export interface ClientHooks {
  /** Default deadline in milliseconds for calls that do not set one. */
  defaultTimeoutMs: number;
  /** Metadata added to every outgoing call (request id propagation). */
  outgoingMetadata(): grpc.Metadata;
  /** Turns a failed call into the error thrown to the caller. */
  fromStatus(err: grpc.ServiceError, method: DescMethod): Error;
}
