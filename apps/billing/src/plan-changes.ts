import type { Bus } from '@relayplane/shared/bus';
import type { Clock } from '@relayplane/shared/clock';
import type { Logger } from '@relayplane/shared/logger';
import type { Kysely } from 'kysely';
import type { BillingDatabase } from './db/schema.ts';
import { type Subscription, SubscriptionStore } from './stores/subscriptions.ts';

/** The bus channel every plan change is announced on (payload: the tenant id). */
export const PLANS_CHANGED_CHANNEL = 'plans.changed';

/**
 * Every plan change goes through here: stored, then announced, so gateways drop their
 * cached entitlements for the tenant at once (they also refresh on a timer, so a lost
 * announcement delays, never breaks).
 */
export class PlanChanges {
  readonly #db: Kysely<BillingDatabase>;
  readonly #bus: Bus;
  readonly #clock: Clock;
  readonly #logger: Logger;

  constructor(deps: { db: Kysely<BillingDatabase>; bus: Bus; clock: Clock; logger: Logger }) {
    this.#db = deps.db;
    this.#bus = deps.bus;
    this.#clock = deps.clock;
    this.#logger = deps.logger;
  }

  async set(tenantId: string, planId: string): Promise<Subscription> {
    const sub = await new SubscriptionStore(this.#db).setPlan(tenantId, planId, this.#clock.now());
    await this.announce(tenantId);
    return sub;
  }

  /** Stores a change inside a transaction the caller commits; announce after the commit. */
  async setIn(trx: Kysely<BillingDatabase>, tenantId: string, planId: string): Promise<Subscription> {
    return new SubscriptionStore(trx).setPlan(tenantId, planId, this.#clock.now());
  }

  async announce(tenantId: string): Promise<void> {
    await this.#bus.publish(PLANS_CHANGED_CHANNEL, tenantId).catch((err: unknown) => {
      this.#logger.warn(
        { err: { message: (err as Error).message }, tenantId },
        'could not announce the plan change; gateways pick it up when their cache expires',
      );
    });
    this.#logger.info({ tenantId }, 'plan changed');
  }
}
