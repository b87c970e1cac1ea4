import { timestampDate } from '@bufbuild/protobuf/wkt';
import type { IssuerService } from '@relayplane/proto/issuer';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { IssuerDeps } from './deps.ts';

/**
 * RevokeCredentials: a project's credentials by API key and/or issue time, in one transaction,
 * with the follow-ups of RevokeCredential (docs/credentials.md, "Containment"). A repeat
 * revokes nothing more and answers 0.
 */
export function revokeCredentials({
  revocations,
}: Pick<IssuerDeps, 'revocations'>): ServiceImpl<typeof IssuerService>['revokeCredentials'] {
  return async (req) => {
    const revoked = await revocations.revokeMany({
      tenantId: req.tenantId,
      projectId: req.projectId,
      apiKeyId: req.apiKeyId,
      apiKeyRevoked: req.apiKeyRevoked,
      issuedBefore: req.issuedBefore ? timestampDate(req.issuedBefore) : undefined,
    });
    return { revoked };
  };
}
