import { AppError } from '@relayplane/contract/errors';
import { newId } from '@relayplane/contract/ids';
import { hashToken, newToken } from '@relayplane/contract/tokens';
import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { decidePoll, hashCode, type PollOutcome } from '../domain/device-codes.ts';
import type { AdminDeps } from './deps.ts';
import { clientOrigin } from './sessions.ts';

/** Longer than any device code we issue (43 characters): not ours, no lookup. */
const DEVICE_CODE_MAX_LENGTH = 128;

type Exchanged = { outcome: PollOutcome; token?: string; sessionId?: string };

/**
 * ExchangeDeviceCode (RFC 8628 §3.4–3.5): one poll. The grant's row is locked for the poll,
 * so an approved grant answers its CLI token (`rpc_`, a session of kind `cli` of the approver
 * in the tenant they approved in) exactly once, however many polls race, and only while the
 * session that approved it is live under the user's current credentials (domain/device-codes.ts
 * decidePoll; else `access_denied` and the grant is denied). Every other outcome
 * is `invalid_request` whose message is the OAuth error code.
 */
export function exchangeDeviceCode(deps: AdminDeps): ServiceImpl<typeof AdminService>['exchangeDeviceCode'] {
  return async (req) => {
    if (req.clientId === '' || req.deviceCode === '')
      throw new AppError('invalid_request', 'invalid_request');
    if (!deps.deviceFlow.clientIds.includes(req.clientId))
      throw new AppError('invalid_request', 'invalid_client');
    if (req.deviceCode.length > DEVICE_CODE_MAX_LENGTH)
      throw new AppError('invalid_request', 'invalid_grant');
    const now = deps.clock.now();
    const ttlSeconds = deps.deviceFlow.tokenTtlSeconds;
    const polled = await deps.deviceGrants.poll<Exchanged>(
      hashCode(req.deviceCode),
      now,
      (grant) => {
        // A device code issued to another client (RFC 6749 §5.2): the grant is left untouched.
        if (grant.clientId !== req.clientId)
          return { update: undefined, result: { outcome: 'invalid_grant' } };
        const decision = decidePoll(grant, now);
        // An approval whose approver is no longer live is void from now on: the grant is denied.
        const update = {
          intervalSeconds: decision.intervalSeconds,
          lastPolledAt: now,
          deny: grant.status === 'approved' && decision.outcome === 'access_denied',
        };
        if (
          decision.outcome !== 'issue' ||
          !grant.userId ||
          !grant.tenantId ||
          grant.credentialsEpoch === null
        ) {
          return {
            update,
            result: { outcome: decision.outcome === 'issue' ? 'invalid_grant' : decision.outcome },
          };
        }
        const token = newToken('cli');
        const sessionId = newId('session');
        const consume = {
          id: sessionId,
          tokenHash: hashToken(token),
          userId: grant.userId,
          tenantId: grant.tenantId,
          createdAt: now,
          expiresAt: new Date(now.getTime() + ttlSeconds * 1000),
          credentialsEpoch: grant.credentialsEpoch,
          // The device redeeming the code: where the CLI token is used from.
          ...clientOrigin(),
        };
        return { update: { ...update, consume }, result: { outcome: 'issue', token, sessionId } };
      },
      (trx, { grant, session }) =>
        // The CLI token (a session) and its event commit together; the actor is the device,
        // acting as the user who approved it.
        deps.audit.record(trx, {
          action: 'device.token_issue',
          tenantId: session.tenantId,
          actor: { type: 'cli', id: session.userId },
          target: { type: 'session', id: session.id },
          details: { client_id: grant.clientId, expires_at: session.expiresAt.toISOString() },
        }),
    );
    if (!polled) throw new AppError('invalid_request', 'invalid_grant');
    const { grant, result } = polled;
    if (result.outcome !== 'issue' || result.token === undefined) {
      if (result.outcome === 'access_denied' && grant.status === 'approved') {
        deps.logger.warn(
          { clientId: grant.clientId, userId: grant.userId, tenantId: grant.tenantId },
          'device authorization refused: the session that approved it has ended or the credentials changed since',
        );
      }
      throw new AppError('invalid_request', result.outcome);
    }
    deps.logger.info(
      {
        clientId: grant.clientId,
        userId: grant.userId,
        tenantId: grant.tenantId,
        sessionId: result.sessionId,
      },
      'device authorization redeemed: CLI token issued',
    );
    return { accessToken: result.token, expiresIn: ttlSeconds };
  };
}
