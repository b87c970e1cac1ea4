/**
 * IssueCredentials and IssueCredentialBatches: the gateway's long-lived issuance streams.
 * Both multiplex requests over one stream: every request is answered with its request_id, in
 * completion order; a failing request answers a StreamError and the stream goes on. The batch
 * variant also packs the answers that complete together into one message.
 */
import type { MessageInitShape } from '@bufbuild/protobuf';
import { AppError } from '@relayplane/contract/errors';
import type { CallInfo } from '@relayplane/proto/grpc';
import type {
  IssueCredentialRequest,
  IssueCredentialsRequest,
  IssueCredentialsResponseSchema,
  IssuerService,
} from '@relayplane/proto/issuer';
import type { Logger } from '@relayplane/shared/logger';
import { reportFailure, type ServiceImpl } from '@relayplane/shared/rpc';
import { continueTrace, setActiveSpanAttribute } from '@relayplane/shared/tracing';
import type { IssuerDeps } from './deps.ts';
import { issueResponse } from './messages.ts';

/** The span of one request's issuance (continuing the gateway request's trace). */
const ISSUE_SPAN = 'issue credential';
/** Requests of one stream being worked on at once; more wait (backpressure). */
const MAX_IN_FLIGHT_PER_STREAM = 256;
/** Answers of one batch stream, at most this many per message. */
const MAX_ANSWERS_PER_MESSAGE = 256;

type StreamDeps = Pick<IssuerDeps, 'issuance' | 'logger' | 'metrics'>;
type StreamAnswer = MessageInitShape<typeof IssueCredentialsResponseSchema>;

/** IssueCredentials: one request per message, one answer per message. */
export function issueCredentials(deps: StreamDeps): ServiceImpl<typeof IssuerService>['issueCredentials'] {
  return (stream, call) =>
    serve(
      deps,
      (async function* () {
        for await (const msg of stream.requests) yield [msg];
      })(),
      (res) => stream.send(res),
      call,
    );
}

/**
 * IssueCredentialBatches: answers that complete in the same turn of the event loop (a slot
 * batch, then an insert batch, completes many at once) leave in one message, sent once the
 * turn's I/O callbacks have run (setImmediate).
 */
export function issueCredentialBatches(
  deps: StreamDeps,
): ServiceImpl<typeof IssuerService>['issueCredentialBatches'] {
  return async (stream, call) => {
    let outbox: StreamAnswer[] = [];
    let flushing: Promise<void> | undefined;
    let sent: Promise<void> = Promise.resolve();
    const flush = () => {
      flushing = undefined;
      while (outbox.length > 0) {
        const responses = outbox.splice(0, MAX_ANSWERS_PER_MESSAGE);
        sent = sent.then(() => stream.send({ responses }));
      }
      return sent;
    };
    try {
      await serve(
        deps,
        (async function* () {
          for await (const msg of stream.requests) yield msg.requests;
        })(),
        (res) => {
          outbox.push(res);
          flushing ??= new Promise<void>((resolve) => setImmediate(resolve)).then(flush);
          return flushing;
        },
        call,
      );
    } finally {
      await flush();
      outbox = [];
    }
  };
}

/** Works off the requests of one stream; `answer` delivers one answer (it may hold it back). */
async function serve(
  { issuance, logger, metrics }: StreamDeps,
  messages: AsyncIterable<readonly IssueCredentialsRequest[]>,
  answer: (res: StreamAnswer) => Promise<void>,
  call: CallInfo,
): Promise<void> {
  metrics?.streams.inc();
  const inFlight = new Set<Promise<void>>();
  // One line per stream (never per request): operators see how issuance spreads over replicas.
  const startedAt = Date.now();
  const counts = { issued: 0, refused: 0 };
  const one = async (requestId: bigint, req: IssueCredentialRequest | undefined) => {
    let res: StreamAnswer;
    try {
      if (!req) throw new AppError('invalid_request', 'request is required');
      const issued = await issuance.issue(req, call.signal);
      if (call.signal.aborted) {
        await issuance.abandon(issued.claims.tid, issued.jti);
        return;
      }
      res = { requestId, result: { case: 'credential', value: issueResponse(issued) } };
      counts.issued++;
    } catch (err) {
      const error = streamError(err, logger);
      setActiveSpanAttribute('error.type', error.code);
      res = { requestId, result: { case: 'error', value: error } };
      counts.refused++;
    }
    await answer(res);
  };
  try {
    for await (const msgs of messages) {
      for (const msg of msgs) {
        // A request the gateway traced carries its traceparent: its work here continues that trace.
        const issuing = msg.traceparent
          ? continueTrace(ISSUE_SPAN, msg.traceparent, undefined, () => one(msg.requestId, msg.request))
          : one(msg.requestId, msg.request);
        const p = issuing.catch((err: unknown) => {
          logger.warn({ err: { message: (err as Error).message } }, 'could not answer on an issuance stream');
        });
        inFlight.add(p);
        void p.finally(() => inFlight.delete(p));
      }
      while (inFlight.size >= MAX_IN_FLIGHT_PER_STREAM) await Promise.race(inFlight);
    }
  } finally {
    await Promise.all(inFlight);
    metrics?.streams.dec();
    logger.info({ ...counts, ms: Date.now() - startedAt }, 'issuance stream ended');
  }
}

/** What a unary call would have carried in its status (the same mapping and logging, see rpc.ts). */
function streamError(
  err: unknown,
  logger: Logger,
): { code: string; message: string; retryAfterSeconds: number } {
  const failure = reportFailure(logger, err, 'IssueCredentials');
  return { code: failure.code, message: failure.message, retryAfterSeconds: failure.retryAfterSeconds ?? 0 };
}
