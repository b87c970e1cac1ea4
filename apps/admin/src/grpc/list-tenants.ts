import { AppError } from '@relayplane/contract/errors';
import type { AdminService } from '@relayplane/proto/admin';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { AdminDeps } from './deps.ts';
import { PLATFORM_ADMINS_ONLY_MESSAGE } from './get-tenant.ts';
import { nextCursor, pageRequest } from './list-page.ts';
import { tenantMessage } from './messages.ts';
import { requireUserSession } from './principal.ts';

/**
 * ListTenants: a page of every tenant with its member count, oldest first; platform admins only
 * (operator tenant management). Plans are billing's: the gateway adds them (workflows/tenant-list.ts).
 */
export function listTenants(deps: AdminDeps): ServiceImpl<typeof AdminService>['listTenants'] {
  return async (req) => {
    const session = await requireUserSession(deps, req.principal);
    if (!session.user.platformAdmin) throw new AppError('forbidden', PLATFORM_ADMINS_ONLY_MESSAGE);
    const page = await deps.accounts.listTenants(pageRequest(req));
    return {
      tenants: page.items.map((t) => ({ tenant: tenantMessage(t.tenant), memberCount: t.memberCount })),
      nextCursor: nextCursor(page),
    };
  };
}
