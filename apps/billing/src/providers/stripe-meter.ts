/**
 * Stripe metered usage: where the tenant's plan names a Stripe meter (`stripe_meter_event_name`
 * for credentials issued; `stripe_usage_meters` for relay-session minutes, bytes sent and bytes
 * received) and the tenant has a Stripe customer (stored from its checkout and subscription
 * webhooks), each COMPLETED UTC day's amount (the tenant's total row) is sent to each meter once,
 * as one meter event:
 *
 *   event_name  the meter's event name in the plan (the plan the tenant is on when reported)
 *   payload     { stripe_customer_id, value: that day's credentials issued, session minutes
 *               (the day's session seconds / 60, rounded up), bytes sent or bytes received }
 *   identifier  `<tenant>:<day>` for credentials, `<tenant>:<day>:<meter>` for the others
 *               (Stripe drops a second event with the same identifier)
 *   timestamp   the day's last second (23:59:59 UTC)
 *
 * A day is complete once its rows were computed at or after its end (`computed_at` is taken
 * before the issuer is asked), so today is never reported, nor a day last aggregated before
 * midnight. Once per (tenant, day): under a transaction-scoped advisory lock, a day already in
 * `metered_usage_reports` is skipped; otherwise Stripe is called and, only if it succeeded, the
 * row is inserted in that same transaction. A failed call records nothing: the next aggregation
 * tries again. (Should the commit fail after Stripe accepted the event, the retry carries the
 * same identifier and Stripe drops it.)
 *
 * The hook is a per-tenant trigger: each call reports every unreported completed day of the
 * tenant within the last `METER_LOOKBACK_DAYS` days (Stripe refuses timestamps older than 35
 * days), so yesterday — aggregated by every job run — is covered, and a day missed during a
 * Stripe outage is caught up by the tenant's next aggregated day.
 */

import { isPlanId, type PlanId } from '@relayplane/contract/contract';
import type { Clock } from '@relayplane/shared/clock';
import type { Logger } from '@relayplane/shared/logger';
import { DAY_MS, formatDay } from '@relayplane/shared/usage-day';
import { type Kysely, sql } from 'kysely';
import type Stripe from 'stripe';
import type { BillingDatabase } from '../db/schema.ts';
import { type Plan, SESSION_USAGE_METERS, type SessionUsageMeter } from '../domain/plans.ts';
import type { UsageReporter } from '../jobs/usage-aggregation.ts';
import { SubscriptionStore } from '../stores/subscriptions.ts';

/** Completed days looked back over on each call (Stripe accepts meter events up to 35 days old). */
const METER_LOOKBACK_DAYS = 30;

// Transaction-scoped advisory lock per (tenant, day): concurrent reporters take turns, and the
// second finds the first one's row.
const METER_LOCK = sql`hashtext('relayplane.billing.metered-usage')`;

/** What a meter event reports: credentials, or a relay-session usage (plans.ts). */
export type UsageMeter = 'credentials' | SessionUsageMeter;

/** The meter event `identifier` of a tenant's day (credentials' unchanged since before the others). */
function meterIdentifier(tenantId: string, day: string, meter: UsageMeter): string {
  return meter === 'credentials' ? `${tenantId}:${day}` : `${tenantId}:${day}:${meter}`;
}

/** The meters a plan reports to, with their event names. */
function metersOf(plan: Plan): [UsageMeter, string][] {
  const meters: [UsageMeter, string][] = [];
  if (plan.stripeMeterEventName !== undefined) meters.push(['credentials', plan.stripeMeterEventName]);
  for (const meter of SESSION_USAGE_METERS) {
    const name = plan.stripeUsageMeters?.[meter];
    if (name !== undefined) meters.push([meter, name]);
  }
  return meters;
}

/** A day's amount of `meter` from its usage row, as Stripe takes it (a whole number, as text). */
function meterValue(
  row: {
    credentials_issued: unknown;
    session_seconds: unknown;
    bytes_sent: unknown;
    bytes_received: unknown;
  },
  meter: UsageMeter,
): string {
  switch (meter) {
    case 'credentials':
      return BigInt(row.credentials_issued as string).toString();
    case 'session_minutes':
      return String(Math.ceil(Number(row.session_seconds) / 60));
    case 'bytes_sent':
      return BigInt(row.bytes_sent as string).toString();
    case 'bytes_received':
      return BigInt(row.bytes_received as string).toString();
  }
}

/** The meter event `timestamp` of a day: its last second, UTC, in seconds. */
function meterTimestamp(day: string): number {
  return Math.floor(Date.parse(`${day}T00:00:00Z`) / 1000) + 86_399;
}

/** True when some plan is billed through a Stripe meter. */
export function hasMeteredPlan(plans: Record<PlanId, Plan>): boolean {
  return Object.values(plans).some((p) => metersOf(p).length > 0);
}

export class StripeMeterReporter {
  readonly #stripe: Stripe;
  readonly #db: Kysely<BillingDatabase>;
  readonly #plans: Record<PlanId, Plan>;
  readonly #clock: Clock;
  readonly #logger: Logger;

  /** The aggregation's hook (the rows are read back from the table). */
  readonly report: UsageReporter = async (tenantId) => {
    await this.reportTenant(tenantId);
  };

  constructor(deps: {
    stripe: Stripe;
    db: Kysely<BillingDatabase>;
    plans: Record<PlanId, Plan>;
    clock: Clock;
    logger: Logger;
  }) {
    this.#stripe = deps.stripe;
    this.#db = deps.db;
    this.#plans = deps.plans;
    this.#clock = deps.clock;
    this.#logger = deps.logger;
  }

  /**
   * Reports the tenant's unreported completed days (oldest first); answers how many were
   * recorded. Stops at the first failure (which it throws): the next call starts there again.
   */
  async reportTenant(tenantId: string): Promise<number> {
    const billing = await new SubscriptionStore(this.#db).billingOf(tenantId);
    if (!billing?.stripeCustomerId || !isPlanId(billing.planId)) return 0;
    const meters = metersOf(this.#plans[billing.planId]);
    const today = Math.floor(this.#clock.now().getTime() / DAY_MS) * DAY_MS;
    let recorded = 0;
    for (const [meter, eventName] of meters) {
      const pending = await this.#db
        .selectFrom('usage_daily as u')
        .leftJoin('metered_usage_reports as r', (join) =>
          join
            .onRef('r.tenant_id', '=', 'u.tenant_id')
            .onRef('r.day', '=', 'u.day')
            .on('r.meter', '=', meter),
        )
        .select(sql<string>`to_char(u.day, 'YYYY-MM-DD')`.as('day'))
        .where('u.tenant_id', '=', tenantId)
        .where('u.project_id', '=', '')
        .where('u.day', '>=', formatDay(new Date(today - METER_LOOKBACK_DAYS * DAY_MS)))
        .where('u.day', '<', formatDay(new Date(today)))
        // Final: computed from a snapshot taken at or after the day's end (midnight UTC).
        .where(sql<boolean>`u.computed_at >= ((u.day + 1)::timestamp at time zone 'UTC')`)
        .where('r.tenant_id', 'is', null)
        .orderBy('u.day')
        .execute();
      for (const { day } of pending) {
        if (await this.#reportDay(tenantId, day, meter, eventName, billing.stripeCustomerId)) recorded++;
      }
    }
    return recorded;
  }

  /** One (tenant, day): sent and recorded, or (already recorded by someone else) nothing. */
  async #reportDay(
    tenantId: string,
    day: string,
    meter: UsageMeter,
    eventName: string,
    customerId: string,
  ): Promise<boolean> {
    const identifier = meterIdentifier(tenantId, day, meter);
    return this.#db.transaction().execute(async (tx) => {
      await sql`select pg_advisory_xact_lock(${METER_LOCK}, hashtext(${identifier}))`.execute(tx);
      const done = await tx
        .selectFrom('metered_usage_reports')
        .select('tenant_id')
        .where('tenant_id', '=', tenantId)
        .where('day', '=', day)
        .where('meter', '=', meter)
        .executeTakeFirst();
      if (done) return false;
      const total = await tx
        .selectFrom('usage_daily')
        .select(['credentials_issued', 'session_seconds', 'bytes_sent', 'bytes_received'])
        .where('tenant_id', '=', tenantId)
        .where('project_id', '=', '')
        .where('day', '=', day)
        .executeTakeFirst();
      if (!total) return false;
      const value = meterValue(total, meter);
      // Nothing used (the row exists for a peak carried over from the day before, or the day had
      // no sessions): nothing to bill; recorded all the same, so the day is not looked at again.
      if (value !== '0') {
        // No fixed Idempotency-Key: Stripe would replay a stored 500 for it. The identifier
        // is what makes Stripe drop a duplicate.
        await this.#stripe.billing.meterEvents.create({
          event_name: eventName,
          payload: { stripe_customer_id: customerId, value },
          identifier,
          timestamp: meterTimestamp(day),
        });
      }
      await tx
        .insertInto('metered_usage_reports')
        .values({
          tenant_id: tenantId,
          day,
          meter,
          event_name: eventName,
          stripe_customer_id: customerId,
          value,
          identifier,
          reported_at: this.#clock.now(),
        })
        .execute();
      this.#logger.info({ tenantId, day, meter, eventName, value }, 'metered usage reported to stripe');
      return true;
    });
  }
}
