import { timestampDate } from '@bufbuild/protobuf/wkt';
import { KeyState } from '@relayplane/proto/issuer';
import { ManualClock } from '@relayplane/shared/clock';
import { createTestDatabase, type TestDatabase } from '@relayplane/testing/storage';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLOCK_SKEW_LEEWAY_SECONDS, JWKS_MAX_AGE_SECONDS } from '../src/keys/key-lifecycle.ts';
import { newKek, type RunningIssuer, rawKeyRows, seconds, startIssuer } from './support/harness.ts';

const T0 = Date.parse('2026-11-22T12:00:00Z');
const ROTATION_INTERVAL = 86_400;
const MAX_TTL = 900;

/**
 * One key life cycle, step by step. The test drives time with a ManualClock and runs the
 * maintenance tick itself; the scheduled job's interval is kept far beyond the test.
 */
describe('signing key rotation, step by step (real gRPC, real PostgreSQL)', () => {
  let database: TestDatabase;
  let issuer: RunningIssuer;
  const clock = new ManualClock(T0);
  let first: string; // active at start
  let second: string; // next at start
  let third: string; // next after the first rotation
  let previousRemoveAfter: Date;

  const jwksKids = async () => (await issuer.client.getJwks({})).keys.map((k) => k.kid);
  const listed = async () => {
    const res = await issuer.client.listSigningKeys({});
    return { ...res, byKid: new Map(res.keys.map((k) => [k.kid, k])) };
  };

  beforeAll(async () => {
    database = await createTestDatabase('issuer_rotation');
    issuer = await startIssuer({
      databaseUrl: database.url,
      clock,
      kek: newKek(),
      env: {
        ISSUER_KEY_ROTATION_INTERVAL_SECONDS: String(ROTATION_INTERVAL),
        ISSUER_MAX_CREDENTIAL_TTL_SECONDS: String(MAX_TTL),
        ISSUER_KEY_MAINTENANCE_INTERVAL_SECONDS: '300',
      },
    });
    const kids = await jwksKids();
    [first = '', second = ''] = kids;
  });

  afterAll(async () => {
    await issuer?.stop();
    await database?.drop();
  });

  it('keeps an on-demand rotation pending while the next key is younger than the JWKS cache lifetime', async () => {
    clock.advance(seconds(100));
    const res = await issuer.client.rotateSigningKeys({ requestedBy: 'usr_admin' });
    expect(res.rotated).toBe(false);
    expect(res.rotationPendingSince && timestampDate(res.rotationPendingSince)).toEqual(
      new Date(T0 + 100_000),
    );
    const next = res.keys.find((k) => k.kid === second);
    expect(next?.state).toBe(KeyState.NEXT);
    expect(next?.eligibleAt && timestampDate(next.eligibleAt)).toEqual(
      new Date(T0 + seconds(JWKS_MAX_AGE_SECONDS)),
    );
    expect(res.keys.find((k) => k.kid === first)?.state).toBe(KeyState.ACTIVE);
    expect(await jwksKids()).toEqual([first, second]);
    expect(issuer.service.keys.activeSigningKey().kid).toBe(first);
  });

  it('keeps the first request time when rotation is asked for again while pending', async () => {
    clock.advance(seconds(50));
    const res = await issuer.client.rotateSigningKeys({ requestedBy: 'usr_other' });
    expect(res.rotated).toBe(false);
    expect(res.rotationPendingSince && timestampDate(res.rotationPendingSince)).toEqual(
      new Date(T0 + 100_000),
    );
    await issuer.service.keys.tick();
    expect((await listed()).byKid.get(first)?.state).toBe(KeyState.ACTIVE);
  });

  it('completes the pending rotation on the first tick once the next key is eligible', async () => {
    clock.set(new Date(T0 + seconds(JWKS_MAX_AGE_SECONDS)));
    const result = await issuer.service.keys.tick();
    expect(result.rotation).toEqual({ reason: 'requested', from: first, to: second });

    const kids = await jwksKids();
    expect(kids[0]).toBe(second);
    expect(kids).toHaveLength(3);
    third = kids[1] ?? '';
    expect([first, second]).not.toContain(third);
    expect(kids[2]).toBe(first);
    expect(issuer.service.keys.activeSigningKey().kid).toBe(second);

    const { byKid, rotationPendingSince } = await listed();
    expect(rotationPendingSince).toBeUndefined();
    expect(byKid.get(second)?.state).toBe(KeyState.ACTIVE);
    expect(byKid.get(third)?.state).toBe(KeyState.NEXT);
    const old = byKid.get(first);
    expect(old?.state).toBe(KeyState.PREVIOUS);
    expect(old?.deactivatedAt && timestampDate(old.deactivatedAt)).toEqual(clock.now());
    previousRemoveAfter = new Date(clock.now().getTime() + seconds(MAX_TTL + CLOCK_SKEW_LEEWAY_SECONDS));
    expect(old?.removeAfter && timestampDate(old.removeAfter)).toEqual(previousRemoveAfter);
  });

  it('keeps the previous key in the JWKS until every credential it signed has expired', async () => {
    clock.set(new Date(previousRemoveAfter.getTime() - 1_000));
    await issuer.service.keys.tick();
    expect(await jwksKids()).toEqual([second, third, first]);
    expect((await listed()).byKid.get(first)?.state).toBe(KeyState.PREVIOUS);
    expect(await issuer.service.keys.privateKey(first)).toBeDefined();
  });

  it('removes the previous key from the JWKS after remove_after and wipes its private half', async () => {
    const etagBefore = (await issuer.client.getJwks({})).etag;
    clock.set(previousRemoveAfter);
    const result = await issuer.service.keys.tick();
    expect(result.removed).toEqual([first]);
    expect(await jwksKids()).toEqual([second, third]);
    expect((await issuer.client.getJwks({})).etag).not.toBe(etagBefore);

    const removed = (await listed()).byKid.get(first);
    expect(removed?.state).toBe(KeyState.REMOVED);
    expect(removed?.removedAt && timestampDate(removed.removedAt)).toEqual(previousRemoveAfter);

    const row = (await rawKeyRows(issuer.service)).find((r) => r.kid === first);
    expect(row).toMatchObject({ private_iv: null, private_ciphertext: null, private_tag: null });
    expect(row?.removed_at).toEqual(previousRemoveAfter);
    expect(await issuer.service.keys.privateKey(first)).toBeUndefined();
  });

  it('rotates on schedule once the active key has signed for the rotation interval, without any request', async () => {
    const activatedAt = new Date(T0 + seconds(JWKS_MAX_AGE_SECONDS));
    clock.set(new Date(activatedAt.getTime() + seconds(ROTATION_INTERVAL) - 1_000));
    expect((await issuer.service.keys.tick()).rotation).toBeNull();
    expect((await jwksKids())[0]).toBe(second);

    clock.set(new Date(activatedAt.getTime() + seconds(ROTATION_INTERVAL)));
    const result = await issuer.service.keys.tick();
    expect(result.rotation).toEqual({ reason: 'scheduled', from: second, to: third });
    const kids = await jwksKids();
    expect(kids[0]).toBe(third);
    expect(kids[2]).toBe(second);
    expect(kids).toHaveLength(3);
    const { byKid, rotationPendingSince } = await listed();
    expect(rotationPendingSince).toBeUndefined();
    expect(byKid.get(second)?.state).toBe(KeyState.PREVIOUS);
    expect(byKid.get(kids[1] ?? '')?.state).toBe(KeyState.NEXT);
    expect(issuer.service.keys.activeSigningKey().kid).toBe(third);
  });

  it('lists removed keys last and never more than one active and one next key', async () => {
    const { keys } = await listed();
    expect(keys.map((k) => k.state)).toEqual([
      KeyState.ACTIVE,
      KeyState.NEXT,
      KeyState.PREVIOUS,
      KeyState.REMOVED,
    ]);
  });
});
