/**
 * The one bridge between protobuf-es service descriptors and @grpc/grpc-js.
 *
 * Generated descriptors carry every method's path, kind and message schemas, so the
 * bridge derives the grpc-js service definition and a typed client from them: nobody
 * writes serializers or loads .proto files at run time. Policy (errors, deadlines,
 * request ids, logging) is plugged in through hooks by `@relayplane/shared/rpc`.
 */

import {
  create,
  type DescMessage,
  type DescMethod,
  type DescService,
  fromBinary,
  type MessageInitShape,
  type MessageShape,
  toBinary,
} from '@bufbuild/protobuf';
import * as grpc from '@grpc/grpc-js';
import { createInProcessClient, isInProcessAddress } from './in-process.ts';
import type {
  AnyMethod,
  CallInfo,
  CallOptions,
  ClientBidi,
  ClientHooks,
  ServerBidi,
  ServerHooks,
  ServiceClient,
  ServiceImpl,
} from './rpc-types.ts';

export type {
  CallInfo,
  CallOptions,
  ClientBidi,
  ClientHooks,
  ServerBidi,
  ServerHooks,
  ServiceClient,
  ServiceImpl,
} from './rpc-types.ts';

function path(service: DescService, method: DescMethod): string {
  return `/${service.typeName}/${method.name}`;
}

function serializer<D extends DescMessage>(schema: D) {
  return (msg: MessageShape<D>): Buffer => {
    const bytes = toBinary(schema, msg);
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  };
}

function deserializer<D extends DescMessage>(schema: D) {
  return (buf: Buffer): MessageShape<D> => fromBinary(schema, buf);
}

function callInfo(method: DescMethod, call: grpc.ServerUnaryCall<unknown, unknown>): CallInfo {
  const controller = new AbortController();
  call.once('cancelled', () => controller.abort(new Error('call cancelled')));
  return {
    method: method.name,
    metadata: call.metadata,
    signal: controller.signal,
    peerCertificate: () => call.getAuthContext().sslPeerCertificate,
  };
}

/**
 * The requests of a bidi call, for a handler to iterate. A handler that leaves the loop early
 * (it failed, or it is done) must not destroy the call: a destroyed duplex drops the status
 * the handler's failure is about to send, and the client would wait for it forever.
 */
function requestsOf<T>(call: AsyncIterable<T>): AsyncIterable<T> {
  return {
    [Symbol.asyncIterator]() {
      const iterator = call[Symbol.asyncIterator]();
      return {
        next: () => iterator.next(),
        return: async () => ({ value: undefined, done: true }),
      };
    },
  };
}

/** Messages a bidi handler may have queued for the network before `send` waits. */
const BIDI_MAX_BUFFERED = 4096;

/** Registers `impl` for `service` on a grpc-js server. */
export function addService<S extends DescService>(
  server: grpc.Server,
  service: S,
  impl: ServiceImpl<S>,
  hooks: ServerHooks,
): void {
  const definition: Record<
    string,
    grpc.MethodDefinition<MessageShape<DescMessage>, MessageShape<DescMessage>>
  > = {};
  const handlers: grpc.UntypedServiceImplementation = {};
  for (const method of service.methods) {
    const kind = method.methodKind;
    if (kind !== 'unary' && kind !== 'server_streaming' && kind !== 'bidi_streaming') {
      throw new Error(`${service.typeName}.${method.name}: ${kind} methods are not supported by the bridge`);
    }
    const handler = (impl as Record<string, unknown>)[method.localName];
    if (typeof handler !== 'function') {
      throw new Error(`${service.typeName}.${method.name} has no implementation`);
    }
    definition[method.localName] = {
      path: path(service, method),
      requestStream: kind === 'bidi_streaming',
      responseStream: kind !== 'unary',
      requestSerialize: serializer(method.input),
      requestDeserialize: deserializer(method.input),
      responseSerialize: serializer(method.output),
      responseDeserialize: deserializer(method.output),
      originalName: method.localName,
    };
    if (kind === 'unary') {
      handlers[method.localName] = (
        call: grpc.ServerUnaryCall<MessageShape<DescMessage>, MessageShape<DescMessage>>,
        callback: grpc.sendUnaryData<MessageShape<DescMessage>>,
      ) => {
        const info = callInfo(method, call);
        hooks
          .around(method, info, async () =>
            create(
              method.output,
              await (handler as (r: unknown, c: CallInfo) => Promise<never>)(call.request, info),
            ),
          )
          .then(
            (res) => callback(null, res),
            (err: unknown) => callback(hooks.toStatus(err, method)),
          );
      };
    } else if (kind === 'bidi_streaming') {
      handlers[method.localName] = (
        call: grpc.ServerDuplexStream<MessageShape<DescMessage>, MessageShape<DescMessage>>,
      ) => {
        const info = callInfo(method, call as unknown as grpc.ServerUnaryCall<unknown, unknown>);
        const stream: ServerBidi<MessageShape<DescMessage>, MessageInitShape<DescMessage>> = {
          requests: requestsOf(call),
          async send(res) {
            if (info.signal.aborted) return;
            call.write(create(method.output, res));
            // The object-mode buffer says "full" after 16 messages; waiting for 'drain' at that
            // point would serialise a multiplexed stream. Push back only when far behind.
            if (call.writableLength > BIDI_MAX_BUFFERED) {
              await new Promise((resolve) => call.once('drain', resolve));
            }
          },
        };
        hooks
          .around(method, info, () =>
            (handler as (s: typeof stream, c: CallInfo) => Promise<void>)(stream, info),
          )
          .then(
            () => call.end(),
            (err: unknown) => {
              if (!info.signal.aborted) {
                const status = hooks.toStatus(err, method);
                call.emit('error', Object.assign(new Error(status.details), status));
              }
            },
          );
      };
    } else {
      handlers[method.localName] = (
        call: grpc.ServerWritableStream<MessageShape<DescMessage>, MessageShape<DescMessage>>,
      ) => {
        const info = callInfo(method, call);
        hooks
          .around(method, info, async () => {
            const stream = (handler as (r: unknown, c: CallInfo) => AsyncIterable<never>)(call.request, info);
            for await (const msg of stream) {
              if (info.signal.aborted) break;
              if (!call.write(create(method.output, msg))) {
                await new Promise((resolve) => call.once('drain', resolve));
              }
            }
          })
          .then(
            () => call.end(),
            (err: unknown) => {
              // grpc-js turns an 'error' event into the trailing status; destroy() would drop it
              // and leave the client waiting for its deadline.
              if (!info.signal.aborted) {
                const status = hooks.toStatus(err, method);
                call.emit('error', Object.assign(new Error(status.details), status));
              }
            },
          );
      };
    }
  }
  server.addService(definition as grpc.ServiceDefinition, handlers);
}

/** Runs `cancel` when `signal` aborts, including when it already has. */
function onAbort(signal: AbortSignal | undefined, cancel: () => void): void {
  if (!signal) return;
  if (signal.aborted) cancel();
  else signal.addEventListener('abort', cancel, { once: true });
}

/**
 * Creates a typed client for `service` at `address`: a gRPC target (plaintext unless
 * `credentials` say otherwise), or `in-process:<name>` for a server in this process
 * (`in-process.ts`: same hooks and retry policy, no network; `credentials` do not apply).
 */
export function createClient<S extends DescService>(
  service: S,
  address: string,
  hooks: ClientHooks,
  channelOptions: grpc.ChannelOptions = {},
  credentials: grpc.ChannelCredentials = grpc.credentials.createInsecure(),
): ServiceClient<S> {
  if (isInProcessAddress(address)) return createInProcessClient(service, address, hooks, channelOptions);
  const channel = new grpc.Client(address, credentials, channelOptions);
  const client: Record<string, unknown> = {
    close: () => channel.close(),
  };
  for (const method of service.methods) {
    const p = path(service, method);
    const serialize = serializer(method.input);
    const deserialize = deserializer(method.output);
    const prepare = (opts: CallOptions | undefined) => {
      const metadata = hooks.outgoingMetadata();
      if (opts?.metadata) metadata.merge(opts.metadata);
      const deadline = opts?.deadline ?? new Date(Date.now() + hooks.defaultTimeoutMs);
      return { metadata, options: { deadline } satisfies grpc.CallOptions };
    };
    if (method.methodKind === 'unary') {
      client[method.localName] = (req: MessageInitShape<DescMessage>, opts?: CallOptions) =>
        new Promise((resolve, reject) => {
          const { metadata, options } = prepare(opts);
          const call = channel.makeUnaryRequest(
            p,
            serialize,
            deserialize,
            create(method.input, req),
            metadata,
            options,
            (err, res) => (err ? reject(hooks.fromStatus(err, method)) : resolve(res)),
          );
          onAbort(opts?.signal, () => call.cancel());
        });
    } else if (method.methodKind === 'server_streaming') {
      client[method.localName] = (req: MessageInitShape<DescMessage>, opts?: CallOptions) => {
        const { metadata, options } = prepare(opts);
        const call = channel.makeServerStreamRequest(
          p,
          serialize,
          deserialize,
          create(method.input, req),
          metadata,
          options,
        );
        onAbort(opts?.signal, () => call.cancel());
        return (async function* () {
          try {
            for await (const msg of call) yield msg as MessageShape<DescMessage>;
          } catch (err) {
            throw hooks.fromStatus(err as grpc.ServiceError, method);
          }
        })();
      };
    } else if (method.methodKind === 'bidi_streaming') {
      client[method.localName] = (opts?: CallOptions) => {
        const metadata = hooks.outgoingMetadata();
        if (opts?.metadata) metadata.merge(opts.metadata);
        // A long-lived stream: no deadline unless the caller sets one.
        const call = channel.makeBidiStreamRequest(p, serialize, deserialize, metadata, {
          deadline: opts?.deadline ?? Number.POSITIVE_INFINITY,
        });
        onAbort(opts?.signal, () => call.cancel());
        return {
          send: (req: MessageInitShape<DescMessage>) => call.write(create(method.input, req)),
          end: () => call.end(),
          cancel: () => call.cancel(),
          responses: (async function* () {
            try {
              for await (const msg of call) yield msg as MessageShape<DescMessage>;
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

export {
  IN_PROCESS_CALLER_METADATA_KEY,
  IN_PROCESS_CALLER_OPTION,
  IN_PROCESS_SCHEME,
  InProcessServer,
  isInProcessAddress,
} from './in-process.ts';
export type { AnyMethod };
export { grpc };
