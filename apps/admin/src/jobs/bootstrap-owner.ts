/**
 * The first tenant and owner. Runs at every start and does nothing once any user exists.
 * Billing is told the plan first (SetPlan is idempotent), so an owner never exists on a
 * plan billing has not heard of; in distributed mode billing may start after admin, so an
 * unavailable billing is retried with backoff for a bounded time.
 */
import { setTimeout as delay } from 'node:timers/promises';
import type { BillingService as BillingRpc } from '@relayplane/proto/billing';
import type { Clock } from '@relayplane/shared/clock';
import { AppError } from '@relayplane/shared/errors';
import { newId } from '@relayplane/shared/ids';
import type { Logger } from '@relayplane/shared/logger';
import type { ServiceClient } from '@relayplane/shared/rpc';
import type { BootstrapConfig } from '../config.ts';
import type { PasswordHasher } from '../security/passwords.ts';
import type { AccountStore } from '../stores/accounts.ts';

export interface BootstrapDeps {
  accounts: AccountStore;
  passwords: PasswordHasher;
  billing: ServiceClient<typeof BillingRpc>;
  clock: Clock;
  logger: Logger;
  /** How long billing may stay unavailable before start fails. */
  billingWaitMs?: number;
  signal?: AbortSignal;
}

const FIRST_RETRY_MS = 250;
const MAX_RETRY_MS = 5_000;

export async function bootstrapOwner(
  config: BootstrapConfig,
  deps: BootstrapDeps,
): Promise<'created' | 'exists'> {
  const { accounts, logger } = deps;
  if (await accounts.anyUserExists()) return 'exists';

  const tenantId = newId('tenant');
  await setPlanWithRetry(tenantId, config.plan, deps);

  const now = deps.clock.now();
  const userId = newId('user');
  const created = await accounts.bootstrapOwner({
    tenant: { id: tenantId, name: config.tenantName, createdAt: now },
    user: { id: userId, email: config.email, platformAdmin: true, createdAt: now },
    passwordHash: await deps.passwords.hash(config.password),
  });
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

async function setPlanWithRetry(tenantId: string, planId: string, deps: BootstrapDeps): Promise<void> {
  const deadline = performance.now() + (deps.billingWaitMs ?? 60_000);
  let wait = FIRST_RETRY_MS;
  for (let attempt = 1; ; attempt++) {
    try {
      await deps.billing.setPlan({ tenantId, planId }, { signal: deps.signal });
      return;
    } catch (err) {
      const retryable = err instanceof AppError && err.code === 'unavailable';
      if (!retryable || performance.now() + wait > deadline || deps.signal?.aborted) {
        throw new Error(`bootstrap: billing did not accept plan "${planId}" (${(err as Error).message})`, {
          cause: err,
        });
      }
      deps.logger.warn({ attempt, retryInMs: wait }, 'bootstrap: billing unavailable, retrying');
      await delay(wait, undefined, { signal: deps.signal });
      wait = Math.min(wait * 2, MAX_RETRY_MS);
    }
  }
}
