import type { AdminService } from '@relayplane/proto/admin';
import { tenantRole } from '@relayplane/shared/iam';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import type { AdminDeps } from './deps.ts';
import { tenantMessage } from './messages.ts';
import { requireUserSession } from './principal.ts';

/**
 * ListMyTenants: the tenants the caller's user belongs to, with the role of each and which one
 * the session acts in (what SwitchTenant may move it to), by tenant name. A user session or CLI
 * token only: bots and identity tokens belong to one project and have no memberships.
 */
export function listMyTenants(deps: AdminDeps): ServiceImpl<typeof AdminService>['listMyTenants'] {
  return async (req) => {
    const session = await requireUserSession(deps, req.principal);
    const memberships = await deps.accounts.membershipsOf(session.user.id);
    return {
      tenants: memberships.map((m) => ({
        tenant: tenantMessage(m.tenant),
        role: tenantRole(m.role),
        active: m.tenant.id === session.tenant.id,
      })),
    };
  };
}
