/**
 * Signing-key life cycle: next → active → previous → removed.
 *
 * A key's state is derived from its timestamps, never stored, so a row cannot claim a
 * state its history contradicts. `planMaintenance` decides what one maintenance tick does;
 * it is pure so the rules can be tested without a database or a clock.
 */

/** Lifetime of a JWKS response in caches (`Cache-Control: public, max-age=300`). */
export const JWKS_MAX_AGE_SECONDS = 300;

/** Extra time a previous key stays listed beyond the longest credential lifetime. */
export const CLOCK_SKEW_LEEWAY_SECONDS = 60;

export type KeyState = 'next' | 'active' | 'previous' | 'removed';

export interface KeyTimeline {
  kid: string;
  /** Published in the JWKS from this instant. */
  createdAt: Date;
  activatedAt: Date | null;
  deactivatedAt: Date | null;
  removeAfter: Date | null;
  removedAt: Date | null;
}

export interface RotationPolicy {
  /** A key signs for this long before a scheduled rotation replaces it. */
  rotationIntervalSeconds: number;
  /** Longest lifetime of a credential signed by any key. */
  maxCredentialTtlSeconds: number;
}

/** The signing keys' configuration: the rotation policy and how often maintenance runs. */
export interface IssuerKeysConfig extends RotationPolicy {
  /** How often the maintenance tick runs (scheduled rotation, next-key creation, removal). */
  maintenanceIntervalSeconds: number;
}

export function keyState(key: KeyTimeline): KeyState {
  if (key.removedAt) return 'removed';
  if (key.deactivatedAt) return 'previous';
  if (key.activatedAt) return 'active';
  return 'next';
}

/** A next key may sign once every cached JWKS has had time to pick it up. */
export function eligibleAt(key: Pick<KeyTimeline, 'createdAt'>): Date {
  return new Date(key.createdAt.getTime() + JWKS_MAX_AGE_SECONDS * 1000);
}

/** When a key deactivated at `deactivatedAt` may leave the JWKS. */
export function removeAfterFor(deactivatedAt: Date, policy: RotationPolicy): Date {
  return new Date(
    deactivatedAt.getTime() + (policy.maxCredentialTtlSeconds + CLOCK_SKEW_LEEWAY_SECONDS) * 1000,
  );
}

/** When the active key is due for a scheduled rotation. */
function rotationDueAt(active: KeyTimeline, policy: RotationPolicy): Date {
  const since = active.activatedAt ?? active.createdAt;
  return new Date(since.getTime() + policy.rotationIntervalSeconds * 1000);
}

/** Listing order of the states (also the keys table's paged listing, signing-key-store.ts). */
export const STATE_ORDER: Record<KeyState, number> = { active: 0, next: 1, previous: 2, removed: 3 };

/** JWKS and listing order: active, next, then previous and removed keys, newest first. */
export function compareKeys(a: KeyTimeline, b: KeyTimeline): number {
  const byState = STATE_ORDER[keyState(a)] - STATE_ORDER[keyState(b)];
  if (byState !== 0) return byState;
  const at = (k: KeyTimeline) => (k.removedAt ?? k.deactivatedAt ?? k.activatedAt ?? k.createdAt).getTime();
  return at(b) - at(a) || b.createdAt.getTime() - a.createdAt.getTime() || (a.kid < b.kid ? -1 : 1);
}

/** Keys that belong in the JWKS, in publication order. */
export function publishedKeys<K extends KeyTimeline>(keys: readonly K[]): K[] {
  return keys.filter((k) => keyState(k) !== 'removed').sort(compareKeys);
}

export type MaintenanceAction =
  /** Generate a key that signs at once (no key signs yet, so no cache can be stale). */
  | { type: 'create-active' }
  | { type: 'create-next' }
  | { type: 'activate'; kid: string }
  | { type: 'deactivate'; kid: string; removeAfter: Date }
  | { type: 'remove'; kid: string }
  | { type: 'clear-rotation-request' };

export type RotationReason = 'scheduled' | 'requested' | 'no-active-key';

export interface MaintenancePlan {
  actions: MaintenanceAction[];
  /** Set when this tick promotes a key. */
  rotation: { reason: RotationReason; from: string | null; to: string } | null;
  /** The on-demand rotation still waiting after this tick (its request time), if any. */
  rotationPendingSince: Date | null;
}

export interface MaintenanceInput {
  /** Every key not yet removed (removed ones are ignored if given). */
  keys: readonly KeyTimeline[];
  now: Date;
  /** When an on-demand rotation was requested and has not happened yet. */
  rotationRequestedAt: Date | null;
  policy: RotationPolicy;
}

/**
 * What one maintenance tick does, in order:
 * 1. no active key: promote the oldest next key, or create an active key (first start);
 * 2. rotate when due (scheduled or requested) and the next key is eligible;
 * 3. make sure a next key exists;
 * 4. remove previous keys whose `remove_after` has passed.
 */
export function planMaintenance(input: MaintenanceInput): MaintenancePlan {
  const { now, policy } = input;
  const live = input.keys.filter((k) => keyState(k) !== 'removed');
  const actions: MaintenanceAction[] = [];
  let rotation: MaintenancePlan['rotation'] = null;
  let pending = input.rotationRequestedAt;

  const byAge = (a: KeyTimeline, b: KeyTimeline) => a.createdAt.getTime() - b.createdAt.getTime();
  const actives = live.filter((k) => keyState(k) === 'active').sort(byAge);
  const nexts = live.filter((k) => keyState(k) === 'next').sort(byAge);
  // The newest active key wins; any other one (only possible after manual edits) retires.
  const active = actives.pop();
  for (const stray of actives) {
    actions.push({ type: 'deactivate', kid: stray.kid, removeAfter: removeAfterFor(now, policy) });
  }
  let next = nexts.shift();
  let hasNext = next !== undefined;

  if (!active) {
    // Nothing can sign: availability wins over the cache-lifetime wait.
    if (next) {
      actions.push({ type: 'activate', kid: next.kid });
      rotation = { reason: 'no-active-key', from: null, to: next.kid };
      next = undefined;
      hasNext = false;
    } else {
      actions.push({ type: 'create-active' });
    }
    if (pending) {
      actions.push({ type: 'clear-rotation-request' });
      pending = null;
    }
  } else {
    const due = pending !== null || now.getTime() >= rotationDueAt(active, policy).getTime();
    if (due && next && now.getTime() >= eligibleAt(next).getTime()) {
      // Deactivate first: at no instant do two keys sign.
      actions.push({ type: 'deactivate', kid: active.kid, removeAfter: removeAfterFor(now, policy) });
      actions.push({ type: 'activate', kid: next.kid });
      rotation = { reason: pending ? 'requested' : 'scheduled', from: active.kid, to: next.kid };
      if (pending) actions.push({ type: 'clear-rotation-request' });
      pending = null;
      hasNext = false;
    }
  }
  if (!hasNext) actions.push({ type: 'create-next' });

  for (const key of live) {
    if (keyState(key) === 'previous' && key.removeAfter && now.getTime() >= key.removeAfter.getTime()) {
      actions.push({ type: 'remove', kid: key.kid });
    }
  }
  return { actions, rotation, rotationPendingSince: pending };
}
