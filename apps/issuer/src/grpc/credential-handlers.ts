import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { CallInfo, ServerBidi } from '@relayplane/proto/grpc';
import type {
  IssueCredentialBatchesRequest,
  IssueCredentialBatchesResponseSchema,
  IssueCredentialRequest,
  IssueCredentialResponseSchema,
  IssueCredentialsRequest,
  IssueCredentialsResponseSchema,
  IssuerService,
} from '@relayplane/proto/issuer';
import { AppError, INTERNAL_MESSAGE } from '@relayplane/shared/errors';
import type { Logger } from '@relayplane/shared/logger';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { Credentials, IssuedCredential, IssueInput } from '../credentials/credentials.ts';
import type { IssuerMetrics } from '../metrics.ts';
import { relayMessage } from '../relays/relay-handlers.ts';

/** Requests of one IssueCredentials stream being worked on at once; more wait (backpressure). */
export const MAX_IN_FLIGHT_PER_STREAM = 256;

type CredentialMethods =
  | 'issueCredential'
  | 'issueCredentials'
  | 'issueCredentialBatches'
  | 'revokeCredential'
  | 'introspectCredential'
  | 'listRevocations'
  | 'assignRelays';

type StreamAnswer = MessageInitShape<typeof IssueCredentialsResponseSchema>;

type IssueCredentialsHandler = (
  stream: ServerBidi<IssueCredentialsRequest, StreamAnswer>,
  call: CallInfo,
) => Promise<void>;

type IssueCredentialBatchesHandler = (
  stream: ServerBidi<
    IssueCredentialBatchesRequest,
    MessageInitShape<typeof IssueCredentialBatchesResponseSchema>
  >,
  call: CallInfo,
) => Promise<void>;

/** Answers of one batch stream, at most this many per message. */
export const MAX_ANSWERS_PER_MESSAGE = 256;

function issueInput(req: IssueCredentialRequest): IssueInput {
  return {
    tenantId: req.tenantId,
    projectId: req.projectId,
    apiKeyId: req.apiKeyId,
    mode: req.mode,
    scopes: req.scopes,
    ttlSeconds: req.ttlSeconds,
    region: req.region,
    maxConcurrentConnections: req.maxConcurrentConnections,
  };
}

function issueResponse(issued: IssuedCredential): MessageInitShape<typeof IssueCredentialResponseSchema> {
  return {
    token: issued.token,
    jti: issued.jti,
    expiresAt: timestampFromDate(issued.expiresAt),
    relays: issued.relays.map(relayMessage),
    fallback: issued.fallback,
  };
}

export function credentialHandlers(
  credentials: Credentials,
  logger: Logger,
  metrics?: IssuerMetrics,
): Pick<ServiceImpl<typeof IssuerService>, CredentialMethods> {
  /**
   * Multiplexed issuance over one stream: every request is answered with its request_id, in
   * completion order; a failing request answers a StreamError and the stream goes on. `answer`
   * delivers one answer (it may hold it back to send several together).
   */
  const serve = async (
    messages: AsyncIterable<readonly IssueCredentialsRequest[]>,
    answer: (res: StreamAnswer) => Promise<void>,
    call: CallInfo,
  ): Promise<void> => {
    metrics?.streams.inc();
    const inFlight = new Set<Promise<void>>();
    // One line per stream (never per request): operators see how issuance spreads over replicas.
    const startedAt = Date.now();
    const counts = { issued: 0, refused: 0 };
    const one = async (requestId: bigint, req: IssueCredentialRequest | undefined) => {
      let res: StreamAnswer;
      try {
        if (!req) throw new AppError('invalid_request', 'request is required');
        const issued = await credentials.issue(issueInput(req), call.signal);
        if (call.signal.aborted) {
          await credentials.abandon(issued.claims.tid, issued.jti);
          return;
        }
        res = { requestId, result: { case: 'credential', value: issueResponse(issued) } };
        counts.issued++;
      } catch (err) {
        res = { requestId, result: { case: 'error', value: streamError(err, logger) } };
        counts.refused++;
      }
      await answer(res);
    };
    try {
      for await (const msgs of messages) {
        for (const msg of msgs) {
          const p = one(msg.requestId, msg.request).catch((err: unknown) => {
            logger.warn(
              { err: { message: (err as Error).message } },
              'could not answer on an issuance stream',
            );
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
  };

  const issueCredentials: IssueCredentialsHandler = (stream, call) =>
    serve(
      (async function* () {
        for await (const msg of stream.requests) yield [msg];
      })(),
      (res) => stream.send(res),
      call,
    );

  /**
   * The batched stream: answers that complete in the same turn of the event loop (a slot batch,
   * then an insert batch, completes many at once) leave in one message, sent once the turn's
   * I/O callbacks have run (setImmediate).
   */
  const issueCredentialBatches: IssueCredentialBatchesHandler = async (stream, call) => {
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

  return {
    async issueCredential(req, call) {
      return issueResponse(await credentials.issue(issueInput(req), call.signal));
    },

    // The bridge serves bidi methods, but its ServiceImpl type has no bidi branch yet
    // (packages/proto HandlerFor): the handler is typed here and cast.
    issueCredentials,
    issueCredentialBatches,

    async revokeCredential(req) {
      const revoked = await credentials.revoke(req.tenantId, req.jti);
      return { jti: revoked.jti, revokedAt: timestampFromDate(revoked.revokedAt) };
    },

    async introspectCredential(req) {
      const claims = await credentials.verify(req.token);
      if (!claims) return { active: false };
      return {
        active: true,
        scopes: claims.scope.split(' ').filter(Boolean),
        clientId: claims.akid,
        sub: claims.sub,
        aud: claims.aud,
        iss: claims.iss,
        jti: claims.jti,
        exp: BigInt(claims.exp),
        iat: BigInt(claims.iat),
        nbf: BigInt(claims.nbf),
        tenantId: claims.tid,
        projectId: claims.pid,
        mode: claims.mode,
      };
    },

    async listRevocations(req, call) {
      const page = await credentials.listRevocations(req.cursor, req.limit, req.waitMs, call.signal);
      return {
        revocations: page.revocations.map((r) => ({
          sequence: r.sequence,
          jti: r.jti,
          revokedAt: timestampFromDate(r.revokedAt),
          expiresAt: timestampFromDate(r.expiresAt),
        })),
        nextCursor: page.nextCursor,
      };
    },

    async assignRelays(req) {
      const { relays, fallback } = await credentials.assign(req.token, req.region);
      return { relays: relays.map(relayMessage), fallback };
    },
  };
}

/** What a unary call would have carried in its status. */
function streamError(
  err: unknown,
  logger: Logger,
): { code: string; message: string; retryAfterSeconds: number } {
  if (err instanceof AppError) {
    if (err.code === 'internal' || err.code === 'unavailable') {
      logger.error({ err: err.cause ?? err, rpc: 'IssueCredentials' }, err.message);
    }
    return { code: err.code, message: err.message, retryAfterSeconds: err.retryAfterSeconds ?? 0 };
  }
  logger.error({ err, rpc: 'IssueCredentials' }, 'unhandled error in stream request');
  return { code: 'internal', message: INTERNAL_MESSAGE, retryAfterSeconds: 0 };
}
