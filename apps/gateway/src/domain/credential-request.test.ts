import { CREDENTIAL_SCOPES, CREDENTIAL_TTL_SECONDS, SCOPES } from '@relayplane/shared/contract';
import { describe, expect, it } from 'vitest';
import { credentialScopes, credentialTtl } from './credential-request.ts';

const ALL = [...CREDENTIAL_SCOPES];
const PRO = { planName: 'Pro', maxCredentialTtlSeconds: CREDENTIAL_TTL_SECONDS.max };
const SHORT = { planName: 'Free', maxCredentialTtlSeconds: 300 };

describe('credentialScopes', () => {
  it('defaults to the session scope when none is requested', () => {
    expect(credentialScopes(undefined, ALL)).toEqual({ ok: true, value: [SCOPES.session] });
  });

  it('answers the requested scopes once each, in the order asked', () => {
    expect(credentialScopes([SCOPES.subscribe, SCOPES.session, SCOPES.subscribe], ALL)).toEqual({
      ok: true,
      value: [SCOPES.subscribe, SCOPES.session],
    });
  });

  it('refuses an unknown scope with invalid_request (400), naming the known ones', () => {
    expect(credentialScopes([SCOPES.session, 'relay:admin'], ALL)).toEqual({
      ok: false,
      code: 'invalid_request',
      message: `unknown scope "relay:admin" (known: ${CREDENTIAL_SCOPES.join(', ')})`,
    });
  });

  it('refuses a known scope the API key was not granted with forbidden (403)', () => {
    expect(credentialScopes([SCOPES.publish], [SCOPES.session])).toEqual({
      ok: false,
      code: 'forbidden',
      message: `scope "${SCOPES.publish}" is not granted to this API key`,
    });
  });

  it('reports the first failing scope in request order: unknown before ungranted when asked first', () => {
    const granted = [SCOPES.session];
    expect(credentialScopes(['nope', SCOPES.publish], granted)).toMatchObject({ code: 'invalid_request' });
    expect(credentialScopes([SCOPES.publish, 'nope'], granted)).toMatchObject({ code: 'forbidden' });
  });
});

describe('credentialTtl', () => {
  it('defaults to the standard TTL when the plan allows it', () => {
    expect(credentialTtl(undefined, PRO)).toEqual({ ok: true, value: CREDENTIAL_TTL_SECONDS.default });
  });

  it("clips the default TTL to the plan's maximum when that is lower", () => {
    expect(credentialTtl(undefined, SHORT)).toEqual({ ok: true, value: 300 });
  });

  it('accepts a requested TTL within the bounds and the plan, the bounds included', () => {
    expect(credentialTtl(CREDENTIAL_TTL_SECONDS.min, PRO)).toEqual({
      ok: true,
      value: CREDENTIAL_TTL_SECONDS.min,
    });
    expect(credentialTtl(CREDENTIAL_TTL_SECONDS.max, PRO)).toEqual({
      ok: true,
      value: CREDENTIAL_TTL_SECONDS.max,
    });
    expect(credentialTtl(300, SHORT)).toEqual({ ok: true, value: 300 });
  });

  it('refuses a TTL outside the accepted range, or not a whole number of seconds, with invalid_request', () => {
    const refusal = {
      ok: false,
      code: 'invalid_request',
      message: `ttl_seconds must be an integer from ${CREDENTIAL_TTL_SECONDS.min} to ${CREDENTIAL_TTL_SECONDS.max}`,
    };
    for (const ttl of [CREDENTIAL_TTL_SECONDS.min - 1, CREDENTIAL_TTL_SECONDS.max + 1, 0, -600, 600.5]) {
      expect(credentialTtl(ttl, PRO), String(ttl)).toEqual(refusal);
    }
  });

  it("refuses a TTL above the plan's maximum with invalid_request naming the plan and its maximum", () => {
    expect(credentialTtl(301, SHORT)).toEqual({
      ok: false,
      code: 'invalid_request',
      message: "ttl_seconds 301 exceeds the Free plan's maximum of 300",
    });
  });
});
