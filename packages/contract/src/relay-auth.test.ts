import { describe, expect, it } from 'vitest';
import {
  credentialOf,
  grantProblem,
  grantRoot,
  isSetupTokenValue,
  normalizeRelayPath,
  patternProblem,
  type RelayGrant,
  relayTransport,
} from './relay-auth.ts';

/** Upstream's cross-language vectors (moq-dev/moq rs/moq-auth, js/auth), verbatim. */
const NOW = 1_800_000_000;

describe('relay auth contract: grants as upstream validates them', () => {
  it('accepts every valid grant vector upstream carries', () => {
    const valid = [
      '{"publish":["alice/**"],"subscribe":["**"],"root":"pid/room","expires":4102444800,"revalidate":60,"tier":"websocket","peer":true,"upstream":true}',
      '{"publish":["alice/**"],"subscribe":["**"],"root":"pid/room","expires":4102444800,"revalidate":60,"tier":"websocket"}',
      '{"subscribe":["**"],"mounts":{".svc":".svc/pid"}}',
      '{"publish":["**"]}',
    ];
    for (const vector of valid)
      expect(grantProblem(JSON.parse(vector) as RelayGrant, NOW), vector).toBeUndefined();
  });

  it("refuses every invalid grant vector upstream carries, for upstream's reason", () => {
    const invalid: [string, RegExp][] = [
      ['{}', /naming nothing/],
      ['{"publish":["**"],"revalidate":60}', /revalidate without expires/],
      ['{"publish":["**"],"expires":4102444800,"revalidate":0}', /positive/],
      ['{"publish":["**"],"expires":4102444800,"revalidate":0.5}', /positive whole/],
      ['{"publish":["**"],"expires":4102444800.5}', /whole unix seconds/],
      ['{"publish":["a/**/b/**"]}', /more than one \*\*/],
      [`{"publish":["**"],"expires":${NOW}}`, /in the past/],
    ];
    for (const [vector, reason] of invalid) {
      expect(grantProblem(JSON.parse(vector) as RelayGrant, NOW), vector).toMatch(reason);
    }
  });

  it("checks patterns with upstream's grammar", () => {
    for (const ok of ['', 'foo', 'foo/**', '**', '*/chat', 'a*b/c', '**/x'])
      expect(patternProblem(ok), ok).toBeUndefined();
    for (const bad of ['/foo', 'foo/', 'a//b', 'a**', 'a*b*c', '**/**', Array(33).fill('x').join('/')]) {
      expect(patternProblem(bad), bad).toBeDefined();
    }
  });
});

describe('relay auth contract: the session request', () => {
  it('takes the credential from the last non-empty jwt= of the raw query, not URL-decoded', () => {
    expect(credentialOf('jwt=abc', undefined)).toEqual({ ok: true, token: 'abc' });
    expect(credentialOf('x=1&jwt=a.b.c&jwt=&y=2', undefined)).toEqual({ ok: true, token: 'a.b.c' });
    expect(credentialOf('jwt=first&jwt=second', undefined)).toEqual({ ok: true, token: 'second' });
    expect(credentialOf('jwtx=1&xjwt=2', undefined)).toEqual({ ok: true, token: undefined });
    expect(credentialOf(undefined, undefined)).toEqual({ ok: true, token: undefined });
    expect(credentialOf('jwt=a%2Eb', undefined)).toEqual({ ok: true, token: 'a%2Eb' });
  });

  it('takes a SETUP token of kind 0 (the same credential as jwt= when both come); refuses other kinds', () => {
    const jwt = 'eyJh.eyJi.c2ln';
    const value = Buffer.from(jwt).toString('base64url');
    expect(credentialOf(undefined, { kind: 0, value })).toEqual({ ok: true, token: jwt });
    expect(credentialOf(`jwt=${jwt}`, { kind: 0, value })).toEqual({ ok: true, token: jwt });
    expect(credentialOf('jwt=other', { kind: 0, value })).toMatchObject({
      ok: false,
      reason: /two different/,
    });
    // Upstream's CAT vector: kind 1.
    expect(credentialOf(undefined, { kind: 1, value: 'APv_' })).toMatchObject({
      ok: false,
      reason: /kind 1/,
    });
  });

  it("checks a SETUP token's base64url exactly as upstream (its vectors)", () => {
    for (const ok of ['', 'AA', 'AAA', 'AAAA', 'AQ', 'AAE', 'APv_'])
      expect(isSetupTokenValue(ok), ok).toBe(true);
    for (const bad of ['A', 'AB', 'APv_A', 'AP+/']) expect(isSetupTokenValue(bad), bad).toBe(false);
  });

  it('reads transports upstream may add as unknown', () => {
    expect(relayTransport('webtransport')).toBe('webtransport');
    expect(relayTransport('rtmp')).toBe('rtmp');
    expect(relayTransport('carrier-pigeon')).toBe('unknown');
  });

  it("roots a session in its project's namespace, under the normalised path it dialed", () => {
    expect(normalizeRelayPath('/foo//bar/')).toBe('foo/bar');
    expect(normalizeRelayPath('/')).toBe('');
    expect(grantRoot('prj_1', '/demo/room')).toBe('prj_1/demo/room');
    expect(grantRoot('prj_1', '/')).toBe('prj_1');
    expect(grantRoot('prj_1', '')).toBe('prj_1');
  });
});
