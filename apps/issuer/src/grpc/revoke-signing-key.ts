import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { AppError } from '@relayplane/contract/errors';
import type { IssuerService } from '@relayplane/proto/issuer';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { StoredKey } from '../keys/signing-key-store.ts';
import type { IssuerDeps } from './deps.ts';
import { signingKeysMessage } from './messages.ts';

const MAX_REQUESTED_BY = 200;

/** One key as ListSigningKeys lists it. */
function keyMessage(key: StoredKey) {
  return signingKeysMessage({ keys: [key], rotationPendingSince: null }).keys?.[0];
}

/**
 * RevokeSigningKey: revokes a compromised signing key at once (revocation/signing-key-revocation.ts) and answers it
 * (with `revoked_at`) and the key that signs now. A repeat answers `already_revoked`.
 */
export function revokeSigningKey({
  keyRevocation,
}: Pick<IssuerDeps, 'keyRevocation'>): ServiceImpl<typeof IssuerService>['revokeSigningKey'] {
  return async (req) => {
    const requestedBy = req.requestedBy.trim();
    if (requestedBy.length > MAX_REQUESTED_BY) {
      throw new AppError('invalid_request', `requested_by must be at most ${MAX_REQUESTED_BY} characters`);
    }
    const result = await keyRevocation.revoke({ kid: req.kid, requestedBy: requestedBy || 'unspecified' });
    return {
      revoked: { ...keyMessage(result.revoked), revokedAt: timestampFromDate(result.revokedAt) },
      active: result.active && keyMessage(result.active),
      alreadyRevoked: !result.newly,
    };
  };
}
