import { describe, expect, it } from 'vitest';
import {
  CLOCK_SKEW_LEEWAY_SECONDS,
  eligibleAt,
  JWKS_MAX_AGE_SECONDS,
  type KeyTimeline,
  keyState,
  planMaintenance,
  publishedKeys,
  type RotationPolicy,
} from './key-lifecycle.ts';

const T0 = Date.parse('2026-11-22T12:00:00Z');
const at = (seconds: number) => new Date(T0 + seconds * 1000);
const policy: RotationPolicy = { rotationIntervalSeconds: 86_400, maxCredentialTtlSeconds: 3_600 };

function key(kid: string, fields: Partial<Omit<KeyTimeline, 'kid'>> = {}): KeyTimeline {
  return {
    kid,
    createdAt: at(0),
    activatedAt: null,
    deactivatedAt: null,
    removeAfter: null,
    removedAt: null,
    ...fields,
  };
}

const active = (kid: string, since = 0) => key(kid, { createdAt: at(since), activatedAt: at(since) });
const next = (kid: string, created = 0) => key(kid, { createdAt: at(created) });

describe('key state derivation', () => {
  it('derives next, active, previous and removed from the timestamps alone', () => {
    expect(keyState(next('a'))).toBe('next');
    expect(keyState(active('a'))).toBe('active');
    const previous = key('a', { activatedAt: at(0), deactivatedAt: at(10), removeAfter: at(20) });
    expect(keyState(previous)).toBe('previous');
    expect(keyState({ ...previous, removedAt: at(30) })).toBe('removed');
  });

  it('makes a next key eligible exactly one JWKS cache lifetime after publication', () => {
    expect(JWKS_MAX_AGE_SECONDS).toBe(300);
    expect(eligibleAt(next('a', 100))).toEqual(at(400));
  });

  it('publishes the active key first, then the next key, then previous keys newest first, never removed ones', () => {
    const keys = [
      key('old-prev', { activatedAt: at(0), deactivatedAt: at(10), removeAfter: at(99) }),
      next('nxt', 30),
      key('gone', { activatedAt: at(0), deactivatedAt: at(5), removeAfter: at(6), removedAt: at(7) }),
      active('act', 20),
      key('new-prev', { activatedAt: at(10), deactivatedAt: at(20), removeAfter: at(99) }),
    ];
    expect(publishedKeys(keys).map((k) => k.kid)).toEqual(['act', 'nxt', 'new-prev', 'old-prev']);
  });
});

describe('planMaintenance', () => {
  it('creates an active key and a next key on an empty key set', () => {
    const plan = planMaintenance({ keys: [], now: at(0), rotationRequestedAt: null, policy });
    expect(plan.actions).toEqual([{ type: 'create-active' }, { type: 'create-next' }]);
    expect(plan.rotation).toBeNull();
  });

  it('does nothing when an active and a next key exist and nothing is due', () => {
    const plan = planMaintenance({
      keys: [active('a'), next('b')],
      now: at(1_000),
      rotationRequestedAt: null,
      policy,
    });
    expect(plan).toEqual({ actions: [], rotation: null, rotationPendingSince: null });
  });

  it('creates a next key when none exists', () => {
    const plan = planMaintenance({ keys: [active('a')], now: at(5), rotationRequestedAt: null, policy });
    expect(plan.actions).toEqual([{ type: 'create-next' }]);
  });

  it('keeps an on-demand rotation pending while the next key is younger than the cache lifetime', () => {
    const plan = planMaintenance({
      keys: [active('a'), next('b', 0)],
      now: at(JWKS_MAX_AGE_SECONDS - 1),
      rotationRequestedAt: at(10),
      policy,
    });
    expect(plan.actions).toEqual([]);
    expect(plan.rotation).toBeNull();
    expect(plan.rotationPendingSince).toEqual(at(10));
  });

  it('completes a pending rotation once the next key is eligible: deactivate, activate, new next', () => {
    const now = at(JWKS_MAX_AGE_SECONDS);
    const plan = planMaintenance({
      keys: [active('a'), next('b', 0)],
      now,
      rotationRequestedAt: at(10),
      policy,
    });
    const removeAfter = at(JWKS_MAX_AGE_SECONDS + 3_600 + CLOCK_SKEW_LEEWAY_SECONDS);
    expect(plan.actions).toEqual([
      { type: 'deactivate', kid: 'a', removeAfter },
      { type: 'activate', kid: 'b' },
      { type: 'clear-rotation-request' },
      { type: 'create-next' },
    ]);
    expect(plan.rotation).toEqual({ reason: 'requested', from: 'a', to: 'b' });
    expect(plan.rotationPendingSince).toBeNull();
  });

  it('rotates on schedule once the active key is older than the rotation interval', () => {
    const before = planMaintenance({
      keys: [active('a', 0), next('b', 0)],
      now: at(policy.rotationIntervalSeconds - 1),
      rotationRequestedAt: null,
      policy,
    });
    expect(before.actions).toEqual([]);
    const due = planMaintenance({
      keys: [active('a', 0), next('b', 0)],
      now: at(policy.rotationIntervalSeconds),
      rotationRequestedAt: null,
      policy,
    });
    expect(due.rotation).toEqual({ reason: 'scheduled', from: 'a', to: 'b' });
    expect(due.actions.map((a) => a.type)).toEqual(['deactivate', 'activate', 'create-next']);
  });

  it('waits for the next key to become eligible even when a scheduled rotation is overdue', () => {
    const plan = planMaintenance({
      keys: [active('a', 0), next('b', policy.rotationIntervalSeconds)],
      now: at(policy.rotationIntervalSeconds + 10),
      rotationRequestedAt: null,
      policy,
    });
    expect(plan.actions).toEqual([]);
  });

  it('removes a previous key at remove_after, not a second before', () => {
    const previous = key('p', { activatedAt: at(0), deactivatedAt: at(100), removeAfter: at(4_000) });
    const keys = [previous, active('a', 100), next('b', 100)];
    const early = planMaintenance({ keys, now: at(3_999), rotationRequestedAt: null, policy });
    expect(early.actions).toEqual([]);
    const due = planMaintenance({ keys, now: at(4_000), rotationRequestedAt: null, policy });
    expect(due.actions).toEqual([{ type: 'remove', kid: 'p' }]);
  });

  it('ignores removed keys', () => {
    const removed = key('r', {
      activatedAt: at(0),
      deactivatedAt: at(1),
      removeAfter: at(2),
      removedAt: at(3),
    });
    const plan = planMaintenance({
      keys: [removed, active('a'), next('b')],
      now: at(10),
      rotationRequestedAt: null,
      policy,
    });
    expect(plan.actions).toEqual([]);
  });

  it('promotes the next key at once when no key is active, so signing never stops', () => {
    const plan = planMaintenance({ keys: [next('b', 0)], now: at(1), rotationRequestedAt: at(0), policy });
    expect(plan.actions).toEqual([
      { type: 'activate', kid: 'b' },
      { type: 'clear-rotation-request' },
      { type: 'create-next' },
    ]);
    expect(plan.rotation).toEqual({ reason: 'no-active-key', from: null, to: 'b' });
  });
});
