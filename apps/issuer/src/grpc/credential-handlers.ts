import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { CallInfo, ServerBidi } from '@relayplane/proto/grpc';
import type {
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
  | 'revokeCredential'
  | 'introspectCredential'
  | 'listRevocations'
  | 'assignRelays';

type IssueCredentialsHandler = (
  stream: ServerBidi<IssueCredentialsRequest, MessageInitShape<typeof IssueCredentialsResponseSchema>>,
  call: CallInfo,
) => Promise<void>;

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
   * Multiplexed issuance: every request is answered with its request_id, in completion
   * order; a failing request answers a StreamError and the stream goes on.
   */
  const issueCredentials: IssueCredentialsHandler = async (stream, call) => {
    metrics?.streams.inc();
    const inFlight = new Set<Promise<void>>();
    // One line per stream (never per request): operators see how issuance spreads over replicas.
    const startedAt = Date.now();
    const counts = { issued: 0, refused: 0 };
    const answer = async (requestId: bigint, req: IssueCredentialRequest | undefined) => {
      let res: MessageInitShape<typeof IssueCredentialsResponseSchema>;
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
      await stream.send(res);
    };
    try {
      for await (const msg of stream.requests) {
        const p = answer(msg.requestId, msg.request).catch((err: unknown) => {
          logger.warn(
            { err: { message: (err as Error).message } },
            'could not answer on an IssueCredentials stream',
          );
        });
        inFlight.add(p);
        void p.finally(() => inFlight.delete(p));
        if (inFlight.size >= MAX_IN_FLIGHT_PER_STREAM) await Promise.race(inFlight);
      }
    } finally {
      await Promise.all(inFlight);
      metrics?.streams.dec();
      logger.info({ ...counts, ms: Date.now() - startedAt }, 'issuance stream ended');
    }
  };

  return {
    async issueCredential(req, call) {
      return issueResponse(await credentials.issue(issueInput(req), call.signal));
    },

    // The bridge serves bidi methods, but its ServiceImpl type has no bidi branch yet
    // (packages/proto HandlerFor): the handler is typed here and cast.
    issueCredentials,

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
