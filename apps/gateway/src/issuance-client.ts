/**
 * Issuance over long-lived bidirectional gRPC streams to the issuers: requests are
 * multiplexed by id, so a credential costs a stream message (~20 µs of CPU) instead of a
 * unary round trip (~130 µs).
 *
 * Spreading over replicas: the channel balances round-robin per *call*, and a stream is one
 * call, so the client keeps `streams` lanes, each its own stream opened on the next ready
 * replica, and sends requests round-robin over the lanes. A lane's stream is replaced after
 * `maxAgeMs` × 0.5–1 (jittered so lanes do not all move at once): a replica that joined (the
 * channel learns of it when it re-resolves DNS, see RpcServerOptions.maxConnectionAgeMs)
 * gets lanes within about one max age. A replaced stream is half-closed: it keeps answering
 * what was sent on it, then ends.
 *
 * Failures: a request whose stream broke (the replica died, its connection dropped) is sent
 * once more on another lane, i.e. another stream opened on a ready replica; if that fails too
 * it answers 503. Errors the issuer answered (402, 503 for Redis, …) are final. A request
 * that timed out is not retried: it may still complete on the issuer.
 *
 * A retried request gets a new jti from the next replica, so if the first replica had
 * already reserved a concurrency slot before dying, that slot stays taken until the lost
 * credential's expiry: the cap errs on the side of fewer credentials, never more.
 */
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { IssueCredentialRequestSchema, IssueCredentialResponse } from '@relayplane/proto/issuer';
import { AppError, isErrorCode } from '@relayplane/shared/errors';
import type { Logger } from '@relayplane/shared/logger';
import type { GatewayClients } from './clients.ts';

type Request = MessageInitShape<typeof IssueCredentialRequestSchema>;
type Stream = ReturnType<GatewayClients['issuer']['issueCredentials']>;

export interface IssuanceClientOptions {
  /** Deadline of one issuance (both attempts together), in ms. */
  timeoutMs: number;
  /** Streams kept open (lanes). Default 8. */
  streams?: number;
  /** A stream is replaced after maxAgeMs × 0.5–1. Default 60 s. */
  maxAgeMs?: number;
  /** Replaceable for tests: 0 ≤ random() < 1. */
  random?: () => number;
  now?: () => number;
}

interface Lane {
  stream: Stream;
  retireAt: number;
}

interface Pending {
  lane: Lane;
  request: Request;
  retried: boolean;
  timedOut: boolean;
  resolve: (res: IssueCredentialResponse) => void;
  reject: (err: Error) => void;
  timer?: NodeJS.Timeout;
}

export class IssuanceClient {
  readonly #issuer: GatewayClients['issuer'];
  readonly #timeoutMs: number;
  readonly #maxAgeMs: number;
  readonly #random: () => number;
  readonly #now: () => number;
  readonly #logger: Logger;
  readonly #lanes: (Lane | undefined)[];
  readonly #pending = new Map<bigint, Pending>();
  #nextLane = 0;
  #nextId = 1n;
  #closed = false;
  /** Streams opened and requests sent a second time, for tests and logs. */
  readonly stats = { streamsOpened: 0, retries: 0 };

  constructor(issuer: GatewayClients['issuer'], options: IssuanceClientOptions, logger: Logger) {
    this.#issuer = issuer;
    this.#timeoutMs = options.timeoutMs;
    this.#maxAgeMs = options.maxAgeMs ?? 60_000;
    this.#random = options.random ?? Math.random;
    this.#now = options.now ?? Date.now;
    this.#lanes = new Array<Lane | undefined>(Math.max(1, options.streams ?? 8)).fill(undefined);
    this.#logger = logger;
  }

  issue(request: Request): Promise<IssueCredentialResponse> {
    if (this.#closed) return Promise.reject(shuttingDown());
    return new Promise((resolve, reject) => {
      const requestId = this.#nextId++;
      const pending: Pending = {
        lane: this.#lane(),
        request,
        retried: false,
        timedOut: false,
        resolve,
        reject,
      };
      pending.timer = setTimeout(() => {
        pending.timedOut = true;
        for (const [id, p] of this.#pending) {
          if (p !== pending) continue;
          this.#pending.delete(id);
          break;
        }
        reject(new AppError('unavailable', 'the issuer did not answer in time', { retryAfterSeconds: 1 }));
      }, this.#timeoutMs);
      this.#send(requestId, pending);
    });
  }

  #send(requestId: bigint, pending: Pending): void {
    this.#pending.set(requestId, pending);
    pending.lane.stream.send({ requestId, request: pending.request });
  }

  /** The next lane round-robin, with a fresh stream if it has none or its stream is too old. */
  #lane(): Lane {
    const index = this.#nextLane;
    this.#nextLane = (index + 1) % this.#lanes.length;
    const current = this.#lanes[index];
    if (current && this.#now() < current.retireAt) return current;
    if (current) current.stream.end(); // half-close: it answers what it has, then ends
    const lane = this.#open();
    this.#lanes[index] = lane;
    return lane;
  }

  #open(): Lane {
    const stream = this.#issuer.issueCredentials();
    this.stats.streamsOpened++;
    const lane: Lane = { stream, retireAt: this.#now() + this.#maxAgeMs * (0.5 + this.#random() / 2) };
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
        this.#broken(
          lane,
          new AppError('unavailable', 'the issuer closed the stream', { retryAfterSeconds: 1 }),
        );
      } catch (err) {
        if (!this.#closed)
          this.#logger.warn(
            {
              err: {
                message: (err as Error).message,
                // The gRPC status detail (e.g. "Connection dropped") says why; it never holds a secret.
                cause: ((err as Error).cause as { details?: string } | undefined)?.details,
              },
            },
            'issuance stream broke',
          );
        // Whatever ended the stream (UNAVAILABLE, or INTERNAL "RST_STREAM without status"
        // when the replica's process died), it is not an answer to any request on it.
        this.#broken(
          lane,
          new AppError('unavailable', 'the issuer is unavailable', { retryAfterSeconds: 1 }),
        );
      }
    })();
    return lane;
  }

  /**
   * The lane's stream is gone: its lane gets a new stream on next use, and every request
   * still waiting on it goes once more on another lane (or fails if it already did).
   */
  #broken(lane: Lane, err: AppError): void {
    const index = this.#lanes.indexOf(lane);
    if (index >= 0) this.#lanes[index] = undefined;
    const retryable = err.code === 'unavailable' && !this.#closed;
    const again: Pending[] = [];
    for (const [id, p] of this.#pending) {
      if (p.lane !== lane) continue;
      this.#pending.delete(id);
      if (retryable && !p.retried) again.push(p);
      else {
        clearTimeout(p.timer);
        p.reject(this.#closed ? shuttingDown() : err);
      }
    }
    if (again.length === 0) return;
    // After a short pause: the other streams of a replica that died break meanwhile, and the
    // channel has taken that replica out of its round-robin (or reconnected, if the
    // connection only dropped).
    setTimeout(() => {
      for (const p of again) {
        if (p.timedOut) continue;
        if (this.#closed) {
          clearTimeout(p.timer);
          p.reject(shuttingDown());
          continue;
        }
        this.stats.retries++;
        p.retried = true;
        p.lane = this.#lane();
        this.#send(this.#nextId++, p);
      }
    }, RETRY_PAUSE_MS);
  }

  close(): void {
    this.#closed = true;
    for (const lane of this.#lanes) {
      lane?.stream.end();
      lane?.stream.cancel();
    }
    this.#lanes.fill(undefined);
  }
}

/** Pause before a request whose stream broke is sent again. */
const RETRY_PAUSE_MS = 50;

function shuttingDown(): AppError {
  return new AppError('unavailable', 'the gateway is shutting down', { retryAfterSeconds: 1 });
}
