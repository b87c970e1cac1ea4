import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { IssuerService } from '@relayplane/proto/issuer';
import { AppError } from '@relayplane/shared/errors';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { revokeSigningKey as revoke } from '../keys/revoke.ts';
import type { StoredKey } from '../stores/signing-keys.ts';
import type { IssuerDeps } from './deps.ts';
import { signingKeysMessage } from './messages.ts';

const MAX_REQUESTED_BY = 200;

/** One key as ListSigningKeys lists it. */
function keyMessage(key: StoredKey) {
  return signingKeysMessage({ keys: [key], rotationPendingSince: null }).keys?.[0];
}

/**
 * RevokeSigningKey: revokes a compromised signing key at once (keys/revoke.ts) and answers it
 * (with `revoked_at`) and the key that signs now. A repeat answers `already_revoked`.
 */
export function revokeSigningKey({
  keys,
  credentials,
}: Pick<IssuerDeps, 'keys' | 'credentials'>): ServiceImpl<typeof IssuerService>['revokeSigningKey'] {
  return async (req) => {
    const requestedBy = req.requestedBy.trim();
    if (requestedBy.length > MAX_REQUESTED_BY) {
      throw new AppError('invalid_request', `requested_by must be at most ${MAX_REQUESTED_BY} characters`);
    }
    const result = await revoke(
      { keys, credentials },
      { kid: req.kid, requestedBy: requestedBy || 'unspecified' },
    );
    return {
      revoked: { ...keyMessage(result.revoked), revokedAt: timestampFromDate(result.revokedAt) },
      active: result.active && keyMessage(result.active),
      alreadyRevoked: !result.newly,
    };
  };
}
