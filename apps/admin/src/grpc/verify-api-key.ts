import { AppError, INVALID_TOKEN_MESSAGE } from '@relayplane/contract/errors';
import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { isKeyHash } from '../domain/api-keys.ts';
import type { AdminDeps } from './deps.ts';
import { apiKeyMessage } from './messages.ts';

/**
 * last_used_at is advisory and accurate to about a minute: it is written only when it is
 * unset or older than this, so VerifyApiKey stays a single indexed read on the hot path.
 */
const API_KEY_LAST_USED_RESOLUTION_MS = 60_000;

/**
 * VerifyApiKey: the gateway's lookup on a cache miss (its cache lives at most a second).
 * An active key answers with its project's environment and IP allowlist (normalised CIDRs,
 * empty when any client IP is allowed; the gateway enforces it); an unknown or revoked one is
 * unauthenticated with the contract's wording.
 */
export function verifyApiKey(deps: AdminDeps): ServiceImpl<typeof AdminService>['verifyApiKey'] {
  return async (req) => {
    if (!isKeyHash(req.keyHash)) {
      throw new AppError('invalid_request', 'key_hash must be a lowercase hex SHA-256 (64 characters)');
    }
    const found = await deps.apiKeys.findActiveByHash(req.keyHash);
    if (!found) throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
    const { apiKey, projectEnvironment, allowlist } = found;
    const now = deps.clock.now();
    const since = new Date(now.getTime() - API_KEY_LAST_USED_RESOLUTION_MS);
    if (!apiKey.lastUsedAt || apiKey.lastUsedAt < since) {
      // Advisory: a failed write never fails a verification. When another replica has just
      // written it, the stored value stays, and is as fresh.
      try {
        if (await deps.apiKeys.touch(apiKey.id, now, since)) apiKey.lastUsedAt = now;
      } catch (err) {
        deps.logger.warn({ err, apiKeyId: apiKey.id }, 'could not record API key use');
      }
    }
    return { apiKey: apiKeyMessage(apiKey), projectEnvironment, allowlist };
  };
}
