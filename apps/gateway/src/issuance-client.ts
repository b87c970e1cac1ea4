/**
 * Issuance over long-lived bidirectional gRPC streams to the issuers: requests are
 * multiplexed by id, so a credential costs a share of a stream message instead of a unary
 * round trip (~130 µs of CPU).
 *
 * Spreading over replicas: the channel balances round-robin per *call*, and a stream is one
 * call, so the client keeps `streams` lanes, each its own stream opened on the next ready
 * replica, and sends requests round-robin over the lanes. A lane's stream is replaced after
 * `maxAgeMs` × 0.5–1 (jittered so lanes do not all move at once): a replica that joined (the
 * channel learns of it when it re-resolves DNS, see RpcServerOptions.maxConnectionAgeMs)
 * gets lanes within about one max age. A replaced stream is half-closed: it keeps answering
 * what was sent on it, then ends.
 *
 * Batching: requests asked in the same turn of the event loop (the HTTP requests parsed by one
 * poll of the sockets) leave together, as one IssueCredentialBatches message on the next lane,
 * once that turn's I/O callbacks have run (setImmediate); the issuer likewise answers together
 * what completes together. An issuer that predates the batched method answers UNIMPLEMENTED:
 * the requests on that stream go again (they were never worked on), and for
 * `BATCHES_RETRY_AFTER_MS` new lanes use the one-request-per-message IssueCredentials.
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
import { AppError, isErrorCode } from '@relayplane/contract/errors';
import { grpc } from '@relayplane/proto/grpc';
import type {
  IssueCredentialRequestSchema,
  IssueCredentialResponse,
  IssueCredentialsRequestSchema,
  IssueCredentialsResponse,
} from '@relayplane/proto/issuer';
import type { Logger } from '@relayplane/shared/logger';
import {
  inBatchSpan,
  outsideAnyTrace,
  type SpanContext,
  sampledSpanContext,
  toTraceparent,
} from '@relayplane/shared/tracing';
import type { IssuerClient } from './clients.ts';

type Request = MessageInitShape<typeof IssueCredentialRequestSchema>;
type Item = MessageInitShape<typeof IssueCredentialsRequestSchema>;

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
  /** Sends requests on the lane's stream (one message, or one each on a one-by-one stream). */
  send(items: Item[]): void;
  /** Half-close: the stream answers what it has, then ends. */
  end(): void;
  cancel(): void;
  retireAt: number;
}

interface Pending {
  lane: Lane | undefined;
  request: Request;
  retried: boolean;
  /** When it fails with "did not answer in time" (now() ms). */
  deadline: number;
  resolve: (res: IssueCredentialResponse) => void;
  reject: (err: Error) => void;
  /** The request's span when it is traced and sampled: its item carries it, the message's span links to it. */
  trace: SpanContext | undefined;
}

/** Requests per batch message at most. */
const MAX_REQUESTS_PER_MESSAGE = 256;
/** After an issuer answered UNIMPLEMENTED to the batched method, how long new lanes do without it. */
const BATCHES_RETRY_AFTER_MS = 5 * 60_000;

export class IssuanceClient {
  readonly #issuer: IssuerClient;
  readonly #timeoutMs: number;
  readonly #maxAgeMs: number;
  readonly #random: () => number;
  readonly #now: () => number;
  readonly #logger: Logger;
  readonly #lanes: (Lane | undefined)[];
  readonly #pending = new Map<bigint, Pending>();
  /** Requests waiting for the end of the turn, to leave together. */
  #outbox: Pending[] = [];
  #flushScheduled = false;
  #nextLane = 0;
  #nextId = 1n;
  #closed = false;
  #batchesOffUntil = 0;
  readonly #sweeper: NodeJS.Timeout;
  /** Streams opened, requests sent a second time, and batch messages sent, for tests and logs. */
  readonly stats = { streamsOpened: 0, retries: 0, messages: 0, fallbacks: 0 };

  constructor(issuer: IssuerClient, options: IssuanceClientOptions, logger: Logger) {
    this.#issuer = issuer;
    this.#timeoutMs = options.timeoutMs;
    this.#maxAgeMs = options.maxAgeMs ?? 60_000;
    this.#random = options.random ?? Math.random;
    this.#now = options.now ?? Date.now;
    this.#lanes = new Array<Lane | undefined>(Math.max(1, options.streams ?? 8)).fill(undefined);
    this.#logger = logger;
    // One timer for every deadline (instead of one per request): a request fails at most a
    // quarter of the timeout (≤ 100 ms) after its deadline.
    this.#sweeper = setInterval(() => this.#expire(), Math.max(10, Math.min(100, this.#timeoutMs / 4)));
    this.#sweeper.unref();
  }

  issue(request: Request): Promise<IssueCredentialResponse> {
    if (this.#closed) return Promise.reject(shuttingDown());
    return new Promise((resolve, reject) => {
      this.#enqueue({
        lane: undefined,
        request,
        retried: false,
        deadline: this.#now() + this.#timeoutMs,
        resolve,
        reject,
        trace: sampledSpanContext(),
      });
    });
  }

  #enqueue(pending: Pending): void {
    this.#outbox.push(pending);
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    setImmediate(() => this.#flush());
  }

  /**
   * Sends what the turn asked for: one message per lane, the lanes taken round-robin. With
   * tracing on, each message is a span linked to the span of every sampled request in it, and
   * each such request's item carries its traceparent for the issuer (docs/tracing.md).
   */
  #flush(): void {
    this.#flushScheduled = false;
    const outbox = this.#outbox;
    this.#outbox = [];
    for (let i = 0; i < outbox.length; i += MAX_REQUESTS_PER_MESSAGE) {
      const batch = outbox.slice(i, i + MAX_REQUESTS_PER_MESSAGE);
      inBatchSpan(
        'IssueCredentialBatches send',
        batch,
        (p) => p.trace,
        undefined,
        () => this.#send(batch),
      );
    }
  }

  #send(batch: Pending[]): void {
    const lane = this.#lane();
    const items: Item[] = [];
    for (const pending of batch) {
      if (this.#closed) {
        pending.reject(shuttingDown());
        continue;
      }
      const requestId = this.#nextId++;
      pending.lane = lane;
      this.#pending.set(requestId, pending);
      items.push(
        pending.trace
          ? { requestId, request: pending.request, traceparent: toTraceparent(pending.trace) }
          : { requestId, request: pending.request },
      );
    }
    if (items.length === 0) return;
    this.stats.messages++;
    lane.send(items);
  }

  #expire(): void {
    const now = this.#now();
    for (const [id, p] of this.#pending) {
      if (now < p.deadline) continue;
      this.#pending.delete(id);
      p.reject(notAnsweredInTime());
    }
  }

  /** The next lane round-robin, with a fresh stream if it has none or its stream is too old. */
  #lane(): Lane {
    const index = this.#nextLane;
    this.#nextLane = (index + 1) % this.#lanes.length;
    const current = this.#lanes[index];
    if (current && this.#now() < current.retireAt) return current;
    current?.end();
    // A stream serves many requests: it belongs to none of their traces (its metadata carries none).
    const lane = outsideAnyTrace(() => this.#open());
    this.#lanes[index] = lane;
    return lane;
  }

  #open(): Lane {
    this.stats.streamsOpened++;
    const retireAt = this.#now() + this.#maxAgeMs * (0.5 + this.#random() / 2);
    if (this.#now() < this.#batchesOffUntil) {
      const stream = this.#issuer.issueCredentials();
      const lane: Lane = {
        send: (items) => {
          for (const item of items) stream.send(item);
        },
        end: () => stream.end(),
        cancel: () => stream.cancel(),
        retireAt,
      };
      this.#read(lane, stream.responses, (res) => [res], false);
      return lane;
    }
    const stream = this.#issuer.issueCredentialBatches();
    const lane: Lane = {
      send: (requests) => stream.send({ requests }),
      end: () => stream.end(),
      cancel: () => stream.cancel(),
      retireAt,
    };
    this.#read(lane, stream.responses, (res) => res.responses, true);
    return lane;
  }

  /** Settles the requests answered on the lane's stream until it ends or breaks. */
  #read<M>(
    lane: Lane,
    messages: AsyncIterable<M>,
    answers: (msg: M) => IssueCredentialsResponse[],
    batched: boolean,
  ): void {
    (async () => {
      try {
        for await (const msg of messages) for (const res of answers(msg)) this.#settle(res);
        this.#broken(
          lane,
          new AppError('unavailable', 'the issuer closed the stream', { retryAfterSeconds: 1 }),
        );
      } catch (err) {
        if (batched && !this.#closed && isUnimplemented(err)) {
          // An issuer from before IssueCredentialBatches: nothing sent on this stream was
          // worked on. Send it again, and do without batches for a while.
          this.stats.fallbacks++;
          this.#batchesOffUntil = this.#now() + BATCHES_RETRY_AFTER_MS;
          this.#logger.warn('the issuer does not know IssueCredentialBatches; using IssueCredentials');
          this.#broken(lane, undefined);
          return;
        }
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
  }

  #settle(res: IssueCredentialsResponse): void {
    const pending = this.#pending.get(res.requestId);
    if (!pending) return;
    this.#pending.delete(res.requestId);
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

  /**
   * The lane's stream is gone: its lane gets a new stream on next use, and every request
   * still waiting on it goes once more on another lane (or fails if it already did).
   * `err` undefined: nothing on the stream was worked on; all of it goes again, as new.
   */
  #broken(lane: Lane, err: AppError | undefined): void {
    const index = this.#lanes.indexOf(lane);
    if (index >= 0) this.#lanes[index] = undefined;
    const retryable = (err === undefined || err.code === 'unavailable') && !this.#closed;
    const again: Pending[] = [];
    for (const [id, p] of this.#pending) {
      if (p.lane !== lane) continue;
      this.#pending.delete(id);
      if (retryable && (err === undefined || !p.retried)) again.push(p);
      else p.reject(this.#closed ? shuttingDown() : (err ?? shuttingDown()));
    }
    if (again.length === 0) return;
    if (err === undefined) {
      for (const p of again) this.#enqueue(p);
      return;
    }
    // After a short pause: the other streams of a replica that died break meanwhile, and the
    // channel has taken that replica out of its round-robin (or reconnected, if the
    // connection only dropped).
    setTimeout(() => {
      for (const p of again) {
        if (this.#now() >= p.deadline) {
          p.reject(notAnsweredInTime());
          continue;
        }
        if (this.#closed) {
          p.reject(shuttingDown());
          continue;
        }
        this.stats.retries++;
        p.retried = true;
        this.#enqueue(p);
      }
    }, RETRY_PAUSE_MS);
  }

  close(): void {
    this.#closed = true;
    clearInterval(this.#sweeper);
    for (const lane of this.#lanes) {
      lane?.end();
      lane?.cancel();
    }
    this.#lanes.fill(undefined);
  }
}

/** Pause before a request whose stream broke is sent again. */
const RETRY_PAUSE_MS = 50;

function isUnimplemented(err: unknown): boolean {
  return ((err as Error)?.cause as { code?: number } | undefined)?.code === grpc.status.UNIMPLEMENTED;
}

function notAnsweredInTime(): AppError {
  return new AppError('unavailable', 'the issuer did not answer in time', { retryAfterSeconds: 1 });
}

function shuttingDown(): AppError {
  return new AppError('unavailable', 'the gateway is shutting down', { retryAfterSeconds: 1 });
}
