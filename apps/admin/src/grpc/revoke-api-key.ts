import { BUS_CHANNELS } from '@relayplane/contract/contract';
import { AppError } from '@relayplane/contract/errors';
import { isId } from '@relayplane/contract/ids';
import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { auditActor } from '../audit/actor.ts';
import type { AdminDeps } from './deps.ts';
import { apiKeyMessage } from './messages.ts';
import { requireActor } from './principal.ts';
import { API_KEY_NOT_FOUND_MESSAGE, requireProject } from './project-access.ts';

/**
 * RevokeApiKey: idempotent — revoking a revoked key answers its original revoked_at. Once the
 * revocation is committed, the key's hash is published on the API-key revocation channel (`BUS_CHANNELS.apiKeysRevoked`) so every gateway
 * drops its cached verification at once. Every successful call publishes (a repeat re-announces);
 * a failed publish is logged, not returned: the revocation stands and gateway caches expire
 * within a second anyway.
 */
export function revokeApiKey(deps: AdminDeps): ServiceImpl<typeof AdminService>['revokeApiKey'] {
  return async (req) => {
    const actor = await requireActor(deps, req.principal, 'api_keys:write');
    const project = await requireProject(deps, actor, req.projectId);
    const revoked = isId('apiKey', req.keyId)
      ? await deps.apiKeys.revoke(project.tenantId, project.id, req.keyId, deps.clock.now(), (trx, done) =>
          deps.audit.record(trx, {
            action: 'api_key.revoke',
            tenantId: project.tenantId,
            actor: auditActor(actor),
            target: { type: 'api_key', id: done.apiKey.id },
            details: { project_id: project.id, already_revoked: done.alreadyRevoked },
          }),
        )
      : undefined;
    if (!revoked) throw new AppError('not_found', API_KEY_NOT_FOUND_MESSAGE);
    const { apiKey, keyHash } = revoked;
    try {
      await deps.bus.publish(BUS_CHANNELS.apiKeysRevoked, keyHash);
    } catch (err) {
      deps.logger.warn(
        { err: { message: (err as Error).message }, apiKeyId: apiKey.id },
        'could not announce the API key revocation; gateway caches expire on their own',
      );
    }
    deps.logger.info(
      { apiKeyId: apiKey.id, projectId: project.id, tenantId: project.tenantId, ...actor.log },
      'API key revoked',
    );
    return { apiKey: apiKeyMessage(apiKey) };
  };
}
