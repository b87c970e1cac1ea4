import { describe, expect, it } from 'vitest';
import { entitlementOf } from './entitlements.ts';
import { AppError } from './errors.ts';

const answer = {
  planId: 'free',
  entitlements: [
    {
      limit: 'max_api_keys',
      value: 2,
      exceededCode: 'payment_required',
      exceededMessage: 'the free plan … (max_api_keys)',
    },
    { limit: 'max_projects', value: 2, exceededCode: 'bogus', exceededMessage: 'x' },
  ],
};

describe('entitlementOf', () => {
  it("answers the limit's value and the error billing decided", () => {
    const limit = entitlementOf(answer, 'max_api_keys');
    expect(limit.value).toBe(2);
    const err = limit.exceeded();
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ code: 'payment_required', message: 'the free plan … (max_api_keys)' });
  });

  it('fails as internal when billing answered no usable entry', () => {
    expect(() => entitlementOf(answer, 'max_bots')).toThrow(AppError);
    expect(() => entitlementOf(answer, 'max_projects')).toThrowError(/max_projects/);
  });
});
