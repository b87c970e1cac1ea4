import { describe, expect, it } from 'vitest';
import { builtinCheckoutRefusal } from './checkout.ts';
import { DEFAULT_PLANS, isPaidPlan, resolvePlans } from './plans.ts';

describe('paid plans and the built-in checkout', () => {
  it('counts a plan with a price, or sold through sales, as paid; the default free plan is not', () => {
    expect(isPaidPlan(DEFAULT_PLANS.free)).toBe(false);
    expect(isPaidPlan(DEFAULT_PLANS.pro)).toBe(true);
    // Price 0 in the catalogue, but contact sales: never free.
    expect(DEFAULT_PLANS.enterprise.price.monthlyAmountMinor).toBe(0);
    expect(isPaidPlan(DEFAULT_PLANS.enterprise)).toBe(true);
  });

  it('decides from the plans file: a priced free plan is paid, a pro plan priced 0 without sales is not', () => {
    const plans = resolvePlans({
      plans: {
        free: { price: { monthly_amount_minor: 100 } },
        pro: { price: { monthly_amount_minor: 0 } },
      },
    });
    expect(isPaidPlan(plans.free)).toBe(true);
    expect(isPaidPlan(plans.pro)).toBe(false);
  });

  it('refuses a paid plan while paid checkout is off, naming the setting; never a free plan, nothing when on', () => {
    const refusal = builtinCheckoutRefusal(DEFAULT_PLANS.enterprise, false);
    expect(refusal).toContain('enterprise');
    expect(refusal).toContain('BILLING_BUILTIN_PAID_CHECKOUT=true');
    expect(builtinCheckoutRefusal(DEFAULT_PLANS.pro, false)).toContain('paid pro plan');
    expect(builtinCheckoutRefusal(DEFAULT_PLANS.free, false)).toBeUndefined();
    expect(builtinCheckoutRefusal(DEFAULT_PLANS.pro, true)).toBeUndefined();
    expect(builtinCheckoutRefusal(DEFAULT_PLANS.enterprise, true)).toBeUndefined();
  });
});
