/**
 * Issuance over one long-lived bidirectional gRPC stream to the issuer: requests are
 * multiplexed by id, so a credential costs a stream message (~20 µs of CPU) instead of a
 * unary round trip (~130 µs). If the stream breaks, pending requests fail with 503 and the
 * next request opens a new stream.
 */
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { IssueCredentialRequestSchema, IssueCredentialResponse } from '@relayplane/proto/issuer';
import { AppError, isErrorCode } from '@relayplane/shared/errors';
import type { Logger } from '@relayplane/shared/logger';
import type { GatewayClients } from './clients.ts';

type Request = MessageInitShape<typeof IssueCredentialRequestSchema>;
type Stream = ReturnType<GatewayClients['issuer']['issueCredentials']>;

interface Pending {
  stream: Stream;
  resolve: (res: IssueCredentialResponse) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

export class IssuanceClient {
  readonly #issuer: GatewayClients['issuer'];
  readonly #timeoutMs: number;
  readonly #logger: Logger;
  readonly #pending = new Map<bigint, Pending>();
  #nextId = 1n;
  #stream: Stream | undefined;
  #closed = false;

  constructor(issuer: GatewayClients['issuer'], timeoutMs: number, logger: Logger) {
    this.#issuer = issuer;
    this.#timeoutMs = timeoutMs;
    this.#logger = logger;
  }

  issue(request: Request): Promise<IssueCredentialResponse> {
    if (this.#closed)
      return Promise.reject(
        new AppError('unavailable', 'the gateway is shutting down', { retryAfterSeconds: 1 }),
      );
    const stream = this.#open();
    const requestId = this.#nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(requestId);
        reject(new AppError('unavailable', 'the issuer did not answer in time', { retryAfterSeconds: 1 }));
      }, this.#timeoutMs);
      this.#pending.set(requestId, { stream, resolve, reject, timer });
      stream.send({ requestId, request });
    });
  }

  #open(): Stream {
    if (this.#stream) return this.#stream;
    const stream = this.#issuer.issueCredentials();
    this.#stream = stream;
    (async () => {
      try {
        for await (const res of stream.responses) {
          const pending = this.#pending.get(res.requestId);
          if (!pending) continue;
          this.#pending.delete(res.requestId);
          clearTimeout(pending.timer);
          if (res.result.case === 'credential') pending.resolve(res.result.value);
          else if (res.result.case === 'error') {
            const e = res.result.value;
            pending.reject(
              new AppError(isErrorCode(e.code) ? e.code : 'internal', e.message, {
                retryAfterSeconds: e.retryAfterSeconds > 0 ? e.retryAfterSeconds : undefined,
              }),
            );
          } else pending.reject(new AppError('internal', 'empty answer from the issuer'));
        }
        this.#fail(
          stream,
          new AppError('unavailable', 'the issuer closed the stream', { retryAfterSeconds: 1 }),
        );
      } catch (err) {
        if (!this.#closed)
          this.#logger.warn({ err: { message: (err as Error).message } }, 'issuance stream broke');
        this.#fail(
          stream,
          err instanceof AppError
            ? err
            : new AppError('unavailable', 'the issuer is unavailable', { retryAfterSeconds: 1 }),
        );
      }
    })();
    return stream;
  }

  /** The stream is gone: everything waiting on it fails; the next request opens a new one. */
  #fail(stream: Stream, err: Error): void {
    if (this.#stream === stream) this.#stream = undefined;
    for (const [id, p] of this.#pending) {
      if (p.stream !== stream) continue;
      clearTimeout(p.timer);
      p.reject(err);
      this.#pending.delete(id);
    }
  }

  close(): void {
    this.#closed = true;
    this.#stream?.end();
    this.#stream?.cancel();
  }
}
