import { AppError } from '@relayplane/contract/errors';
import { isId } from '@relayplane/contract/ids';
import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { AdminDeps } from './deps.ts';
import { tenantMessage } from './messages.ts';
import { requireUserSession } from './principal.ts';

/** What a caller who is not a platform admin hears from the operator's tenant RPCs. */
export const PLATFORM_ADMINS_ONLY_MESSAGE = 'only platform admins may manage tenants';

/** GetTenant: any tenant by id, for platform admins only (operator tenant management). */
export function getTenant(deps: AdminDeps): ServiceImpl<typeof AdminService>['getTenant'] {
  return async (req) => {
    const session = await requireUserSession(deps, req.principal);
    if (!session.user.platformAdmin) {
      throw new AppError('forbidden', PLATFORM_ADMINS_ONLY_MESSAGE);
    }
    if (!isId('tenant', req.tenantId)) throw new AppError('not_found', 'tenant not found');
    const tenant = await deps.accounts.findTenant(req.tenantId);
    if (!tenant) throw new AppError('not_found', 'tenant not found');
    return { tenant: tenantMessage(tenant) };
  };
}
