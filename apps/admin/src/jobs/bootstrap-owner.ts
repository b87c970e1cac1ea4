/**
 * The first tenant and owner. Runs at every start and does nothing once any user exists.
 * Billing is told the plan first (SetPlan is idempotent), so an owner never exists on a
 * plan billing has not heard of. In distributed mode billing may start after admin: start-up
 * runs this as one of its steps, retried with backoff until billing (and PostgreSQL) answer.
 */

import { newId } from '@relayplane/contract/ids';
import type { BillingService as BillingRpc } from '@relayplane/proto/billing';
import type { Clock } from '@relayplane/shared/clock';
import type { Logger } from '@relayplane/shared/logger';
import type { ServiceClient } from '@relayplane/shared/rpc';
import { systemActor } from '../audit/actor.ts';
import type { AuditTrail } from '../audit/trail.ts';
import type { BootstrapConfig } from '../config.ts';
import type { PasswordHasher } from '../security/passwords.ts';
import type { AccountStore } from '../stores/accounts.ts';

export interface BootstrapDeps {
  accounts: AccountStore;
  audit: AuditTrail;
  passwords: PasswordHasher;
  billing: ServiceClient<typeof BillingRpc>;
  clock: Clock;
  logger: Logger;
  /** Ends a SetPlan call in flight (the service is stopping). */
  signal?: AbortSignal;
}

export async function bootstrapOwner(
  config: BootstrapConfig,
  deps: BootstrapDeps,
): Promise<'created' | 'exists'> {
  const { accounts, logger } = deps;
  if (await accounts.anyUserExists()) return 'exists';

  const tenantId = newId('tenant');
  await deps.billing.setPlan({ tenantId, planId: config.plan }, { signal: deps.signal });

  const now = deps.clock.now();
  const userId = newId('user');
  const created = await accounts.bootstrapOwner(
    {
      tenant: { id: tenantId, name: config.tenantName, createdAt: now },
      user: { id: userId, email: config.email, platformAdmin: true, createdAt: now },
      passwordHash: await deps.passwords.hash(config.password),
    },
    (trx) =>
      deps.audit.record(trx, {
        action: 'tenant.create',
        tenantId,
        actor: systemActor('bootstrap-owner'),
        target: { type: 'tenant', id: tenantId },
        details: { name: config.tenantName, owner_user_id: userId, plan: config.plan, cause: 'bootstrap' },
      }),
  );
  if (!created) {
    // Another replica won the race; the subscription row set above names a tenant that was never created.
    logger.info('bootstrap skipped: another replica created the first user');
    return 'exists';
  }
  logger.info(
    { email: config.email, userId, tenantId, tenant: config.tenantName, plan: config.plan },
    'bootstrap owner created',
  );
  return 'created';
}
