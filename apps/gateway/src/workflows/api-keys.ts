/**
 * Revoking an API key and everything it obtained: the one use case of the API-key routes that
 * spans two services (docs/CONTRIBUTING.md, "Use cases across services").
 */

import { AppError } from '@relayplane/contract/errors';
import type { ApiKey, Principal } from '@relayplane/proto/admin';
import type { AdminClient, IssuerClient } from '../clients.ts';
import { required } from '../present.ts';

export interface KeyRevocation {
  apiKey: ApiKey;
  /** Credentials of the key this call revoked (a repeat: 0). */
  revokedCredentials: number;
}

/**
 * In this order, each step idempotent: the key must be the project's (404, before the issuer
 * records anything: it refuses credentials of whatever key id it is told is revoked); then its
 * credentials are revoked and the issuer records the key as revoked, so no new one is issued
 * even by a gateway still trusting the key from its cache; then admin revokes the key itself.
 * A failure after the second step says what was done, so the caller retries knowingly.
 */
export async function revokeApiKeyAndCredentials(
  clients: { admin: AdminClient; issuer: IssuerClient },
  input: { principal: Principal; tenantId: string; projectId: string; keyId: string },
): Promise<KeyRevocation> {
  const { principal, tenantId, projectId, keyId } = input;
  const { apiKeys } = await clients.admin.listApiKeys({ principal, projectId, keyId });
  if (!apiKeys.some((k) => k.id === keyId)) throw new AppError('not_found', 'API key not found');
  const revoked = await clients.issuer.revokeCredentials({
    tenantId,
    projectId,
    apiKeyId: keyId,
    apiKeyRevoked: true,
  });
  try {
    const res = await clients.admin.revokeApiKey({ principal, projectId, keyId });
    return { apiKey: required(res.apiKey, 'revokeApiKey.api_key'), revokedCredentials: revoked.revoked };
  } catch (err) {
    if (err instanceof AppError && err.code === 'unavailable') {
      throw new AppError(
        'unavailable',
        `the key's credentials were revoked (${revoked.revoked} by this call) and it can obtain no new ones, ` +
          'but the key itself could not be revoked yet; retry the call',
        { retryAfterSeconds: err.retryAfterSeconds, cause: err },
      );
    }
    throw err;
  }
}
