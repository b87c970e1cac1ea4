/** Checks of the ids callers send, each failing with `invalid_request` naming the field. Pure. */
import { AUDIT_LIST_LIMIT, isPlanId, PLAN_IDS, type PlanId } from '@relayplane/contract/contract';
import { AppError } from '@relayplane/contract/errors';
import { isId } from '@relayplane/contract/ids';

export function requireTenantId(tenantId: string): void {
  if (!isId('tenant', tenantId)) throw new AppError('invalid_request', 'tenant_id is not a tenant id');
}

/** Tenants asked about at once: at most one page of a list (docs/iam.md, "Lists and paging"). */
export const MAX_TENANTS_PER_CALL = AUDIT_LIST_LIMIT.max;

export function requireTenantIds(tenantIds: readonly string[]): void {
  if (tenantIds.length > MAX_TENANTS_PER_CALL) {
    throw new AppError('invalid_request', `at most ${MAX_TENANTS_PER_CALL} tenant_ids at once`);
  }
  if (!tenantIds.every((id) => isId('tenant', id))) {
    throw new AppError('invalid_request', 'tenant_ids must be tenant ids');
  }
}

export function requirePlanId(planId: string): PlanId {
  if (!isPlanId(planId)) {
    throw new AppError('invalid_request', `unknown plan "${planId}" (known: ${PLAN_IDS.join(', ')})`);
  }
  return planId;
}
