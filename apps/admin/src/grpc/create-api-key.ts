import { checkCeiling } from '@relayplane/contract/credential-paths';
import { entitlementOf } from '@relayplane/contract/entitlements';
import { AppError } from '@relayplane/contract/errors';
import { newId } from '@relayplane/contract/ids';
import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { auditActor } from '../audit/actor.ts';
import { checkApiKeyMode, checkApiKeyName, checkApiKeyScopes, generateApiKey } from '../domain/api-keys.ts';
import type { AdminDeps } from './deps.ts';
import { apiKeyMessage } from './messages.ts';
import { requireActor } from './principal.ts';
import { PROJECT_NOT_FOUND_MESSAGE, requireProject } from './project-access.ts';
import { valid } from './valid.ts';

/**
 * CreateApiKey: a key for a project of the principal's active tenant, within the plan's
 * limit on active keys (tenant-wide; revoked keys do not count). The raw key is answered
 * here once; only its SHA-256 is stored.
 */
export function createApiKey(deps: AdminDeps): ServiceImpl<typeof AdminService>['createApiKey'] {
  return async (req) => {
    const actor = await requireActor(deps, req.principal, 'api_keys:write');
    const name = valid(checkApiKeyName(req.name));
    const mode = valid(checkApiKeyMode(req.mode));
    const scopes = valid(checkApiKeyScopes(req.scopes));
    const ceiling = req.ceiling ? valid(checkCeiling(req.ceiling)) : null;
    const project = await requireProject(deps, actor, req.projectId);

    // Billing decides the limit and what exceeding it answers; without a reachable billing the call fails (503).
    const limit = entitlementOf(
      await deps.billing.getEntitlements({ tenantId: project.tenantId }),
      'max_api_keys',
    );

    const secret = generateApiKey(mode);
    const apiKey = {
      id: newId('apiKey'),
      tenantId: project.tenantId,
      projectId: project.id,
      name,
      mode,
      displayPrefix: secret.displayPrefix,
      lastFour: secret.lastFour,
      scopes,
      ceiling,
      createdAt: deps.clock.now(),
      lastUsedAt: null,
      revokedAt: null,
    };
    const outcome = await deps.apiKeys.create({ ...apiKey, keyHash: secret.keyHash }, limit.value, (trx) =>
      deps.audit.record(trx, {
        action: 'api_key.create',
        tenantId: project.tenantId,
        actor: auditActor(actor),
        target: { type: 'api_key', id: apiKey.id },
        details: {
          project_id: project.id,
          name,
          mode,
          scopes: [...scopes],
          ...(ceiling ? { ceiling: { ...ceiling } } : {}),
          display_prefix: apiKey.displayPrefix,
          last_four: apiKey.lastFour,
        },
      }),
    );
    if (outcome === 'project_not_found') throw new AppError('not_found', PROJECT_NOT_FOUND_MESSAGE);
    if (outcome === 'limit_reached') throw limit.exceeded();
    deps.logger.info(
      {
        apiKeyId: apiKey.id,
        projectId: project.id,
        tenantId: project.tenantId,
        ...actor.log,
        mode,
      },
      'API key created',
    );
    return { apiKey: apiKeyMessage(apiKey), key: secret.key };
  };
}
