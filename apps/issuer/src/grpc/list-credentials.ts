import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { IssuerService } from '@relayplane/proto/issuer';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { IssuerDeps } from './deps.ts';

/** ListCredentials: a project's credentials, newest first, with an opaque cursor (never a token). */
export function listCredentials({
  credentialList,
}: Pick<IssuerDeps, 'credentialList'>): ServiceImpl<typeof IssuerService>['listCredentials'] {
  return async (req) => {
    const page = await credentialList.list({
      tenantId: req.tenantId,
      projectId: req.projectId,
      apiKeyId: req.apiKeyId,
      active: req.active,
      limit: req.limit,
      cursor: req.cursor,
    });
    return {
      credentials: page.credentials.map((c) => ({
        jti: c.jti,
        apiKeyId: c.apiKeyId,
        issuedAt: timestampFromDate(c.issuedAt),
        expiresAt: timestampFromDate(c.expiresAt),
        revokedAt: c.revokedAt ? timestampFromDate(c.revokedAt) : undefined,
      })),
      nextCursor: page.nextCursor,
    };
  };
}
