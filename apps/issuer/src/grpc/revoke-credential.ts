import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { IssuerService } from '@relayplane/proto/issuer';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { IssuerDeps } from './deps.ts';

/** RevokeCredential: idempotent; a repeat answers the first revocation's time. */
export function revokeCredential({
  revocations,
}: Pick<IssuerDeps, 'revocations'>): ServiceImpl<typeof IssuerService>['revokeCredential'] {
  return async (req) => {
    const revoked = await revocations.revoke(req.tenantId, req.jti);
    return { jti: revoked.jti, revokedAt: timestampFromDate(revoked.revokedAt) };
  };
}
