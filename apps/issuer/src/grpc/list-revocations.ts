import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { IssuerService } from '@relayplane/proto/issuer';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { IssuerDeps } from './deps.ts';

/** ListRevocations: the revocation feed after a cursor, long-polling up to `wait_ms`. */
export function listRevocations({
  feed,
}: Pick<IssuerDeps, 'feed'>): ServiceImpl<typeof IssuerService>['listRevocations'] {
  return async (req, call) => {
    const page = await feed.list(req.cursor, req.limit, req.waitMs, call.signal);
    return {
      revocations: page.revocations.map((r) => ({
        sequence: r.sequence,
        jti: r.jti,
        revokedAt: timestampFromDate(r.revokedAt),
        expiresAt: timestampFromDate(r.expiresAt),
      })),
      nextCursor: page.nextCursor,
      watermarks: page.watermarks.map((w) => ({
        projectId: w.projectId,
        issuedBefore: timestampFromDate(w.issuedBefore),
      })),
      revokedKeys: page.revokedKeys.map((k) => ({ kid: k.kid, revokedAt: timestampFromDate(k.revokedAt) })),
    };
  };
}
