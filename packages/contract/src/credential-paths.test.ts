import { describe, expect, it } from 'vitest';
import {
  authorizePath,
  type CredentialPaths,
  ceilingProblem,
  checkCeiling,
  claimedPaths,
  decidePaths,
  pathClaims,
  rolesOfScopes,
} from './credential-paths.ts';

const BOTH = { publish: true, subscribe: true };

function decided(...args: Parameters<typeof decidePaths>): CredentialPaths {
  const decision = decidePaths(...args);
  if (!decision.ok) throw new Error(decision.message);
  return decision.paths;
}

describe('path-scoped credentials: issuance', () => {
  it('derives the roles from the scopes (relay:session alone is both; publish/subscribe narrow)', () => {
    expect(rolesOfScopes(['relay:session'])).toEqual(BOTH);
    expect(rolesOfScopes(['relay:session', 'relay:subscribe'])).toEqual({ publish: false, subscribe: true });
    expect(rolesOfScopes(['relay:publish'])).toEqual({ publish: true, subscribe: false });
  });

  it("grants the project's whole namespace to the scopes' roles when nothing is asked", () => {
    expect(decided({}, BOTH)).toEqual({ root: '', publish: ['**'], subscribe: ['**'] });
    expect(decided({ root: '/room//7/' }, { publish: false, subscribe: true })).toEqual({
      root: 'room/7',
      publish: [],
      subscribe: ['**'],
    });
  });

  it('keeps the asked patterns in canonical form, without repeats, and absent roles empty', () => {
    expect(decided({ root: 'room', publish: ['alice/*/**', 'alice/**/*'] }, BOTH)).toEqual({
      root: 'room',
      publish: ['alice/**/*'],
      subscribe: [],
    });
  });

  it('refuses malformed input with the field named (400)', () => {
    const cases: [Parameters<typeof decidePaths>[0], RegExp][] = [
      [{ publish: ['/a'] }, /^publish: "\/a" is not a moq pattern \(empty path segment\)$/],
      [{ subscribe: ['**/**'] }, /^subscribe: .*more than one \*\*/],
      [{ root: 'a/*' }, /^root must be a path without wildcards/],
      [{ root: Array(32).fill('x').join('/') }, /^root must have at most 31 segments$/],
      [
        { root: Array(20).fill('x').join('/'), publish: [Array(13).fill('y').join('/')] },
        /more than 32 segments/,
      ],
      [{ publish: [], subscribe: [] }, /would grant nothing/],
      [{ publish: Array.from({ length: 17 }, (_, i) => `p${i}`) }, /at most 16 patterns/],
    ];
    for (const [request, message] of cases) {
      const decision = decidePaths(request, BOTH);
      expect(decision, JSON.stringify(request)).toMatchObject({ ok: false, code: 'invalid_request' });
      expect(decision.ok ? '' : decision.message).toMatch(message);
    }
  });

  it('refuses patterns for a role the scopes do not allow (400)', () => {
    const decision = decidePaths({ publish: ['**'] }, { publish: false, subscribe: true });
    expect(decision).toMatchObject({ ok: false, code: 'invalid_request' });
    expect(decision.ok ? '' : decision.message).toMatch(/publish patterns need scope relay:publish/);
  });
});

describe("path-scoped credentials: an API key's ceiling", () => {
  const ceiling: CredentialPaths = { root: 'live', publish: ['studio/**'], subscribe: ['**'] };

  it('issues the ceiling itself when nothing is asked, narrowed to the roles of the scopes', () => {
    expect(decided({}, BOTH, ceiling)).toEqual(ceiling);
    expect(decided({}, { publish: false, subscribe: true }, ceiling)).toEqual({
      root: 'live',
      publish: [],
      subscribe: ['**'],
    });
  });

  it('admits what it contains, however the root is split', () => {
    for (const request of [
      { root: 'live/studio/a', publish: ['**'] },
      { root: 'live', publish: ['studio/a/**'] },
      { root: '', publish: ['live/studio/*'] },
      { root: 'live/other', subscribe: ['x'] },
    ])
      expect(decidePaths(request, BOTH, ceiling).ok, JSON.stringify(request)).toBe(true);
  });

  it('defaults a root without patterns to ** for the roles the ceiling grants', () => {
    expect(decided({ root: 'live/studio/a' }, BOTH, { ...ceiling, subscribe: [] })).toEqual({
      root: 'live/studio/a',
      publish: ['**'],
      subscribe: [],
    });
  });

  it('refuses 403 what it does not contain: a sibling, a root above, a wider pattern, another role', () => {
    const outside: [Parameters<typeof decidePaths>[0], RegExp][] = [
      [
        { root: 'lively', publish: ['**'] },
        /^publish "\*\*" under root "lively" exceeds the API key's ceiling/,
      ],
      [{ publish: ['**'] }, /^publish "\*\*" exceeds/],
      [{ root: 'live', publish: ['studio/**', 'other/**'] }, /^publish "other\/\*\*"/],
      [{ root: 'live', publish: ['*/**'] }, /exceeds/],
    ];
    for (const [request, message] of outside) {
      const decision = decidePaths(request, BOTH, ceiling);
      expect(decision, JSON.stringify(request)).toMatchObject({ ok: false, code: 'forbidden' });
      expect(decision.ok ? '' : decision.message).toMatch(message);
    }
    const publishOnly = { root: 'live', publish: ['**'], subscribe: [] };
    expect(ceilingProblem(publishOnly, { root: 'live', publish: [], subscribe: ['a'] })).toMatch(
      /^subscribe "a"/,
    );
  });

  it('is checked at key creation: a valid root and patterns, granting something', () => {
    expect(checkCeiling({ root: '/live/', publish: ['studio/**'] })).toEqual({
      ok: true,
      value: { root: 'live', publish: ['studio/**'], subscribe: [] },
    });
    expect(checkCeiling({ root: 'live' })).toMatchObject({ ok: false, message: /naming nothing/ });
    expect(checkCeiling({ publish: ['a//b'] })).toMatchObject({ ok: false, message: /^ceiling.publish: / });
  });
});

describe('path-scoped credentials: the claims', () => {
  it("writes subtree-only grants as moq-token's put/get prefixes under the project id", () => {
    expect(pathClaims('prj_1', { root: '', publish: ['**'], subscribe: ['**'] })).toEqual({
      root: 'prj_1',
      put: [''],
      get: [''],
    });
    expect(pathClaims('prj_1', { root: 'room', publish: ['alice/**'], subscribe: [] })).toEqual({
      root: 'prj_1/room',
      put: ['alice'],
    });
  });

  it('writes anything else as publish/subscribe patterns, never mixing the two', () => {
    expect(pathClaims('prj_1', { root: 'room', publish: ['alice'], subscribe: ['**'] })).toEqual({
      root: 'prj_1/room',
      publish: ['alice'],
      subscribe: ['**'],
    });
  });

  it('reads both encodings back, and credentials from before path scoping as the whole project', () => {
    const base = { pid: 'prj_1', scope: 'relay:session' };
    const texts = (c: ReturnType<typeof claimedPaths>) =>
      c && { root: c.root, publish: c.publish.map((p) => p.text), subscribe: c.subscribe.map((p) => p.text) };
    expect(texts(claimedPaths(base))).toEqual({ root: 'prj_1', publish: ['**'], subscribe: ['**'] });
    expect(texts(claimedPaths({ ...base, scope: 'relay:session relay:subscribe' }))).toEqual({
      root: 'prj_1',
      publish: [],
      subscribe: ['**'],
    });
    expect(texts(claimedPaths({ ...base, root: 'prj_1/room', put: 'alice', get: [''] }))).toEqual({
      root: 'prj_1/room',
      publish: ['alice/**'],
      subscribe: ['**'],
    });
    expect(texts(claimedPaths({ ...base, root: 'prj_1/room', publish: ['a/*'] }))).toEqual({
      root: 'prj_1/room',
      publish: ['a/*'],
      subscribe: [],
    });
    expect(claimedPaths({ ...base, root: 'prj_2/room', put: [''] })).toBeUndefined();
    expect(claimedPaths({ ...base, root: 'prj_1', put: [''], publish: ['x'] })).toBeUndefined();
    expect(claimedPaths({ ...base, root: 'prj_1', publish: ['a//b'] })).toBeUndefined();
  });
});

describe("path-scoped credentials: authorising a dialed path (upstream's Claims::authorize)", () => {
  const claimed = claimedPaths({
    pid: 'prj_1',
    scope: 'relay:session',
    root: 'prj_1/room',
    publish: ['alice/**'],
    subscribe: ['**'],
  });
  if (!claimed) throw new Error('claims');

  it('narrows each pattern when the path reaches into the root', () => {
    expect(authorizePath(claimed, 'prj_1/room/alice')).toEqual({
      ok: true,
      publish: ['**'],
      subscribe: ['**'],
    });
    expect(authorizePath(claimed, 'prj_1/room/bob')).toEqual({ ok: true, publish: [], subscribe: ['**'] });
  });

  it("prepends the root's extra segments when the path sits above it", () => {
    expect(authorizePath(claimed, 'prj_1')).toEqual({
      ok: true,
      publish: ['room/alice/**'],
      subscribe: ['room/**'],
    });
  });

  it('refuses a path beside the root, and a path where nothing is left', () => {
    expect(authorizePath(claimed, 'prj_1/roomy')).toMatchObject({
      ok: false,
      reason: /does not cover the path/,
    });
    expect(authorizePath(claimed, 'prj_2/room')).toMatchObject({ ok: false });
    const exact = claimedPaths({ pid: 'prj_1', scope: 'relay:session', root: 'prj_1', publish: ['a'] });
    if (!exact) throw new Error('claims');
    expect(authorizePath(exact, 'prj_1/b')).toMatchObject({
      ok: false,
      reason: /grants nothing at prj_1\/b/,
    });
  });
});
