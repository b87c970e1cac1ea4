/** Checks of the ids callers send, each failing with `invalid_request` naming the field. Pure. */
import { isPlanId, PLAN_IDS, type PlanId } from '@relayplane/contract/contract';
import { AppError } from '@relayplane/contract/errors';
import { isId } from '@relayplane/contract/ids';

export function requireTenantId(tenantId: string): void {
  if (!isId('tenant', tenantId)) throw new AppError('invalid_request', 'tenant_id is not a tenant id');
}

export function requirePlanId(planId: string): PlanId {
  if (!isPlanId(planId)) {
    throw new AppError('invalid_request', `unknown plan "${planId}" (known: ${PLAN_IDS.join(', ')})`);
  }
  return planId;
}
