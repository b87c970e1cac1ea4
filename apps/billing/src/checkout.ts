/**
 * Checkout sessions: how a tenant changes plan. Create (throttled per tenant, idempotent per
 * Idempotency-Key), read, and complete (built-in provider; Stripe completes through webhooks).
 */
import type { Clock } from '@relayplane/shared/clock';
import { AppError } from '@relayplane/shared/errors';
import { isId, newId } from '@relayplane/shared/ids';
import type { Logger } from '@relayplane/shared/logger';
import type { RateLimiter } from '@relayplane/shared/rate-limit';
import type { Kysely } from 'kysely';
import type { CheckoutConfig } from './config.ts';
import type { BillingDatabase } from './db/schema.ts';
import { isPlanId, PLAN_IDS, type Plan, type PlanId } from './domain/plans.ts';
import type { PlanChanges } from './plan-changes.ts';
import type { BillingProvider } from './providers/provider.ts';
import { type CheckoutSession, CheckoutSessionStore } from './stores/checkout-sessions.ts';
import { type Subscription, SubscriptionStore } from './stores/subscriptions.ts';

/** Tenants without a subscription row are on this plan. */
export const DEFAULT_PLAN: PlanId = 'free';

export const CHECKOUT_NOT_FOUND_MESSAGE = 'checkout session not found';

/** The throttle key of a tenant's checkout creations (the limiter prepends its namespace). */
export const checkoutThrottleKey = (tenantId: string): string => `checkout:${tenantId}`;

/** Idempotency keys: 1-255 visible ASCII characters (what the Idempotency-Key header carries). */
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

export interface CreatedCheckout {
  session: CheckoutSession;
  replayed: boolean;
}

export function requireTenantId(tenantId: string): void {
  if (!isId('tenant', tenantId)) throw new AppError('invalid_request', 'tenant_id is not a tenant id');
}

export function requirePlanId(planId: string): PlanId {
  if (!isPlanId(planId)) {
    throw new AppError('invalid_request', `unknown plan "${planId}" (known: ${PLAN_IDS.join(', ')})`);
  }
  return planId;
}

function requirePublicBaseUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new AppError('invalid_request', 'public_base_url must be an absolute http(s) URL');
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.search || url.hash) {
    throw new AppError('invalid_request', 'public_base_url must be an http(s) URL without query or fragment');
  }
  return raw.replace(/\/+$/, '');
}

export class Checkout {
  readonly #db: Kysely<BillingDatabase>;
  readonly #sessions: CheckoutSessionStore;
  readonly #subscriptions: SubscriptionStore;
  readonly #plans: Record<PlanId, Plan>;
  readonly #provider: BillingProvider;
  readonly #throttle: RateLimiter;
  readonly #config: CheckoutConfig;
  readonly #planChanges: PlanChanges;
  readonly #clock: Clock;
  readonly #logger: Logger;

  constructor(deps: {
    db: Kysely<BillingDatabase>;
    plans: Record<PlanId, Plan>;
    provider: BillingProvider;
    throttle: RateLimiter;
    config: CheckoutConfig;
    planChanges: PlanChanges;
    clock: Clock;
    logger: Logger;
  }) {
    this.#db = deps.db;
    this.#sessions = new CheckoutSessionStore(deps.db);
    this.#subscriptions = new SubscriptionStore(deps.db);
    this.#plans = deps.plans;
    this.#provider = deps.provider;
    this.#throttle = deps.throttle;
    this.#config = deps.config;
    this.#planChanges = deps.planChanges;
    this.#clock = deps.clock;
    this.#logger = deps.logger;
  }

  get provider(): BillingProvider {
    return this.#provider;
  }

  /** The tenant's current plan id (the default plan without a subscription). */
  async currentPlanId(tenantId: string): Promise<PlanId> {
    const sub = await this.#subscriptions.get(tenantId);
    return sub && isPlanId(sub.planId) ? sub.planId : DEFAULT_PLAN;
  }

  async create(input: {
    tenantId: string;
    planId: string;
    idempotencyKey: string;
    publicBaseUrl: string;
  }): Promise<CreatedCheckout> {
    requireTenantId(input.tenantId);
    const planId = requirePlanId(input.planId);
    const key = input.idempotencyKey === '' ? null : input.idempotencyKey;
    if (key !== null && !IDEMPOTENCY_KEY.test(key)) {
      throw new AppError('invalid_request', 'Idempotency-Key must be 1-255 visible ASCII characters');
    }
    const publicBaseUrl = requirePublicBaseUrl(input.publicBaseUrl);

    // A replay answers the stored session: not throttled, no provider call.
    if (key !== null) {
      const earlier = await this.#sessions.byIdempotencyKey(input.tenantId, key);
      if (earlier) return { session: this.#replay(earlier, planId), replayed: true };
    }

    const hit = await this.#throttle.hit(checkoutThrottleKey(input.tenantId));
    if (hit.count > this.#config.maxPerWindow) {
      const retryAfterSeconds = Math.max(1, Math.ceil(hit.resetInMs / 1000));
      throw new AppError(
        'rate_limited',
        `too many checkout sessions for this tenant; retry in ${retryAfterSeconds} seconds`,
        { retryAfterSeconds },
      );
    }

    const plan = this.#plans[planId];
    const current = await this.currentPlanId(input.tenantId);
    if (current === planId) {
      throw new AppError('conflict', `the tenant is already on the ${planId} plan`);
    }
    const refusal = this.#provider.refuses(plan);
    if (refusal !== undefined) throw new AppError('invalid_request', refusal);

    const now = this.#clock.now();
    const session: CheckoutSession = {
      id: newId('checkoutSession'),
      tenantId: input.tenantId,
      planId,
      provider: this.#provider.name,
      status: 'open',
      url: '',
      providerReference: null,
      idempotencyKey: key,
      createdAt: now,
      expiresAt: new Date(now.getTime() + this.#config.sessionTtlSeconds * 1000),
      completedAt: null,
    };
    // Stored before the provider call: a concurrent request with the same key finds it.
    if (!(await this.#sessions.insert(session))) {
      const earlier = key === null ? undefined : await this.#sessions.byIdempotencyKey(input.tenantId, key);
      if (!earlier) throw new Error('checkout session insert conflicted but no session was found');
      return { session: this.#replay(earlier, planId), replayed: true };
    }
    let created: { url: string; reference: string | null };
    try {
      created = await this.#provider.createCheckout({
        sessionId: session.id,
        tenantId: session.tenantId,
        plan,
        publicBaseUrl,
        expiresAt: session.expiresAt,
      });
    } catch (err) {
      // Forgotten, so the same Idempotency-Key may try again.
      await this.#sessions.delete(session.id);
      this.#logger.error(
        { err, tenantId: session.tenantId, provider: this.#provider.name },
        'checkout provider failed',
      );
      throw new AppError('internal', 'the billing provider could not create a checkout session', {
        cause: err,
      });
    }
    await this.#sessions.setProviderResult(session.id, created.url, created.reference);
    this.#logger.info(
      { checkoutSessionId: session.id, tenantId: session.tenantId, planId, provider: session.provider },
      'checkout session created',
    );
    return {
      session: { ...session, url: created.url, providerReference: created.reference },
      replayed: false,
    };
  }

  #replay(earlier: CheckoutSession, planId: PlanId): CheckoutSession {
    if (earlier.planId !== planId) {
      throw new AppError('conflict', 'this Idempotency-Key was already used for a checkout to another plan');
    }
    if (earlier.url === '') {
      throw new AppError('conflict', 'a checkout request with this Idempotency-Key is still in progress');
    }
    return this.view(earlier);
  }

  /** The session as callers see it: an open session past its expiry is expired. */
  view(session: CheckoutSession): CheckoutSession {
    if (session.status === 'open' && session.expiresAt.getTime() <= this.#clock.now().getTime()) {
      return { ...session, status: 'expired' };
    }
    return session;
  }

  async get(id: string): Promise<CheckoutSession> {
    const session = isId('checkoutSession', id) ? await this.#sessions.get(id) : undefined;
    if (!session || session.url === '') throw new AppError('not_found', CHECKOUT_NOT_FOUND_MESSAGE);
    return this.view(session);
  }

  /**
   * Confirms a built-in checkout: the tenant moves to the session's plan (announced on the
   * bus). Completing a completed session answers it again, changing nothing.
   */
  async complete(id: string): Promise<{ session: CheckoutSession; subscription: Subscription }> {
    const session = await this.get(id);
    if (session.provider !== 'builtin') {
      throw new AppError('invalid_request', `this checkout session is completed through ${session.provider}`);
    }
    if (session.status === 'completed') {
      const sub = await this.#subscriptions.get(session.tenantId);
      return {
        session,
        subscription: sub ?? {
          tenantId: session.tenantId,
          planId: DEFAULT_PLAN,
          updatedAt: session.createdAt,
        },
      };
    }
    if (session.status === 'expired') {
      await this.#sessions.expire(session.id);
      throw new AppError('invalid_request', 'this checkout session has expired; start a new one');
    }
    const result = await this.#db.transaction().execute(async (trx) => {
      const completed = await new CheckoutSessionStore(trx).complete(session.id, this.#clock.now());
      if (!completed) return undefined;
      const subscription = await this.#planChanges.setIn(trx, completed.tenantId, completed.planId);
      return { session: completed, subscription };
    });
    // Completed concurrently by another call: answer as a repeat.
    if (!result) return this.complete(id);
    await this.#planChanges.announce(result.session.tenantId);
    this.#logger.info(
      { checkoutSessionId: id, tenantId: result.session.tenantId, planId: result.session.planId },
      'checkout session completed',
    );
    return result;
  }
}
