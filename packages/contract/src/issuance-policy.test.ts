import { describe, expect, it } from 'vitest';
import { CREDENTIAL_SCOPES, CREDENTIAL_TTL_SECONDS, SCOPES } from './contract.ts';
import { AppError } from './errors.ts';
import {
  capReached,
  checkPolicy,
  decideIssuance,
  type IssuancePolicy,
  issuancePolicyOf,
} from './issuance-policy.ts';

const ALL = [...CREDENTIAL_SCOPES];
const policy = (ttl: number, cap = 10): IssuancePolicy => ({
  planId: 'free',
  maxConcurrentConnections: {
    value: cap,
    exceededMessage: `the free plan allows at most ${cap} connections`,
  },
  maxCredentialTtlSeconds: { value: ttl, exceededMessage: `ttl over the free plan's maximum of ${ttl}` },
});
const PRO = policy(CREDENTIAL_TTL_SECONDS.max, 250);
const SHORT = policy(300);

describe('decideIssuance: scopes', () => {
  it('defaults to the session scope when none (or an empty list) is requested', () => {
    for (const scopes of [undefined, []]) {
      expect(decideIssuance({ scopes, grantedScopes: ALL }, PRO)).toMatchObject({
        ok: true,
        grant: { scopes: [SCOPES.session] },
      });
    }
  });

  it('answers the requested scopes once each, in the order asked', () => {
    const decision = decideIssuance(
      { scopes: [SCOPES.subscribe, SCOPES.session, SCOPES.subscribe], grantedScopes: ALL },
      PRO,
    );
    expect(decision).toMatchObject({ ok: true, grant: { scopes: [SCOPES.subscribe, SCOPES.session] } });
  });

  it('refuses an unknown scope with invalid_request (400), naming the known ones', () => {
    expect(decideIssuance({ scopes: [SCOPES.session, 'relay:admin'], grantedScopes: ALL }, PRO)).toEqual({
      ok: false,
      code: 'invalid_request',
      message: `unknown scope "relay:admin" (known: ${CREDENTIAL_SCOPES.join(', ')})`,
    });
  });

  it('refuses a known scope the API key was not granted with forbidden (403)', () => {
    expect(decideIssuance({ scopes: [SCOPES.publish], grantedScopes: [SCOPES.session] }, PRO)).toEqual({
      ok: false,
      code: 'forbidden',
      message: `scope "${SCOPES.publish}" is not granted to this API key`,
    });
  });

  it('does not check grants when the caller passes none (the issuer: the gateway checked the key)', () => {
    expect(decideIssuance({ scopes: [SCOPES.publish] }, PRO)).toMatchObject({
      ok: true,
      grant: { scopes: [SCOPES.publish] },
    });
  });

  it('reports the first failing scope in request order: unknown before ungranted when asked first', () => {
    const grantedScopes = [SCOPES.session];
    expect(decideIssuance({ scopes: ['nope', SCOPES.publish], grantedScopes }, PRO)).toMatchObject({
      code: 'invalid_request',
    });
    expect(decideIssuance({ scopes: [SCOPES.publish, 'nope'], grantedScopes }, PRO)).toMatchObject({
      code: 'forbidden',
    });
  });
});

describe('decideIssuance: lifetime and cap', () => {
  const ttlOf = (ttlSeconds: number | undefined, p: IssuancePolicy) => {
    const decision = decideIssuance({ ttlSeconds }, p);
    return decision.ok ? decision.grant.ttlSeconds : decision;
  };

  it('defaults to the standard TTL when the plan allows it, and to the plan maximum when that is lower', () => {
    expect(ttlOf(undefined, PRO)).toBe(CREDENTIAL_TTL_SECONDS.default);
    expect(ttlOf(0, PRO)).toBe(CREDENTIAL_TTL_SECONDS.default);
    expect(ttlOf(undefined, SHORT)).toBe(300);
  });

  it('accepts a requested TTL within the bounds and the plan, the bounds included', () => {
    expect(ttlOf(CREDENTIAL_TTL_SECONDS.min, PRO)).toBe(CREDENTIAL_TTL_SECONDS.min);
    expect(ttlOf(CREDENTIAL_TTL_SECONDS.max, PRO)).toBe(CREDENTIAL_TTL_SECONDS.max);
    expect(ttlOf(300, SHORT)).toBe(300);
  });

  it('refuses a TTL outside the accepted range, or not a whole number of seconds, with invalid_request', () => {
    const refusal = {
      ok: false,
      code: 'invalid_request',
      message: `ttl_seconds must be between ${CREDENTIAL_TTL_SECONDS.min} and ${CREDENTIAL_TTL_SECONDS.max}`,
    };
    for (const ttl of [CREDENTIAL_TTL_SECONDS.min - 1, CREDENTIAL_TTL_SECONDS.max + 1, -600, 600.5]) {
      expect(ttlOf(ttl, PRO), String(ttl)).toEqual(refusal);
    }
  });

  it("refuses a TTL above the plan's maximum with invalid_request in the policy's (billing's) words", () => {
    expect(ttlOf(301, SHORT)).toEqual({
      ok: false,
      code: 'invalid_request',
      message: "ttl over the free plan's maximum of 300",
    });
  });

  it("counts the credential against the policy's cap, and refuses at it with payment_required in its words", () => {
    expect(decideIssuance({}, policy(600, 7))).toMatchObject({ ok: true, grant: { cap: 7 } });
    const err = capReached(policy(600, 7));
    expect(err).toBeInstanceOf(AppError);
    expect(err.code).toBe('payment_required');
    expect(err.message).toBe('the free plan allows at most 7 connections');
  });
});

describe('issuancePolicyOf and checkPolicy', () => {
  const answer = (limits: [string, number, string, string][]) => ({
    planId: 'pro',
    entitlements: limits.map(([limit, value, exceededCode, exceededMessage]) => ({
      limit,
      value,
      exceededCode,
      exceededMessage,
    })),
  });

  it("reads billing's values and messages for the cap and the lifetime", () => {
    const p = issuancePolicyOf(
      answer([
        ['max_projects', 5, 'unprocessable', 'five projects'],
        ['max_concurrent_connections', 250, 'payment_required', 'cap words'],
        ['max_credential_ttl_seconds', 1800, 'invalid_request', 'ttl words'],
      ]),
    );
    expect(p).toEqual({
      planId: 'pro',
      maxConcurrentConnections: { value: 250, exceededMessage: 'cap words' },
      maxCredentialTtlSeconds: { value: 1800, exceededMessage: 'ttl words' },
      // Not in the answer (a billing from before it): 0, the issuer's default cadence.
      relaySessionRevalidateSeconds: 0,
    });
    expect(checkPolicy(p)).toBeUndefined();
  });

  it("carries the plan's relay-session cadence, and refuses one out of 0..3600", () => {
    const p = issuancePolicyOf({
      ...answer([
        ['max_concurrent_connections', 250, 'payment_required', 'cap words'],
        ['max_credential_ttl_seconds', 1800, 'invalid_request', 'ttl words'],
      ]),
      relaySessionRevalidateSeconds: 40,
    });
    expect(p.relaySessionRevalidateSeconds).toBe(40);
    expect(checkPolicy(p)).toBeUndefined();
    for (const bad of [-1, 1.5, 3601]) {
      expect(checkPolicy({ ...p, relaySessionRevalidateSeconds: bad })).toMatch(
        /^policy.relay_session_revalidate_seconds must be a whole number of seconds, 0..3600/,
      );
    }
  });

  it('makes up no limit: an answer without one is an internal error (500), not a default', () => {
    expect(() =>
      issuancePolicyOf(answer([['max_credential_ttl_seconds', 1800, 'invalid_request', 'ttl words']])),
    ).toThrow(expect.objectContaining({ code: 'internal' }));
  });

  it('refuses a received policy with a negative or fractional value, or without a message', () => {
    expect(checkPolicy(policy(600, -1))).toBe(
      'policy.max_concurrent_connections must be a whole number, 0 or more',
    );
    expect(checkPolicy(policy(60.5))).toBe(
      'policy.max_credential_ttl_seconds must be a whole number, 0 or more',
    );
    const silent = policy(600);
    silent.maxConcurrentConnections.exceededMessage = '';
    expect(checkPolicy(silent)).toBe('policy.max_concurrent_connections needs its exceeded message');
  });
});
