import { ManualClock } from '@relayplane/shared/clock';
import { BullmqScheduler } from '@relayplane/shared/scheduler';
import { createTestDatabase, createTestRedis, type TestDatabase } from '@relayplane/testing/storage';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JWKS_MAX_AGE_SECONDS } from '../src/keys/key-lifecycle.ts';
import type { KeysReloadedEvent } from '../src/keys/signing-keys.ts';
import { eventually, newKek, type RunningIssuer, seconds, startIssuer } from './support/harness.ts';

/** Two issuer replicas on one PostgreSQL database and one Redis (distributed mode). */
describe('issuer replicas (real gRPC, PostgreSQL, Redis bus and bullmq scheduler)', () => {
  const redis = createTestRedis('issuer_replicas');
  let database: TestDatabase;
  let a: RunningIssuer;
  let b: RunningIssuer;
  // Both replicas read the same time, as two machines with synchronized clocks would.
  const clock = new ManualClock(Date.parse('2026-11-22T12:00:00Z'));

  beforeAll(async () => {
    database = await createTestDatabase('issuer_replicas');
    const kek = newKek();
    const env = { ISSUER_KEY_MAINTENANCE_INTERVAL_SECONDS: '1' };
    a = await startIssuer({ databaseUrl: database.url, clock, kek, redis, env });
    b = await startIssuer({ databaseUrl: database.url, clock, kek, redis, env });
  });

  afterAll(async () => {
    await a?.stop();
    await b?.stop();
    await database?.drop();
    await redis.clean();
  });

  it('starts the second replica on the first one’s keys instead of creating its own', async () => {
    const [fromA, fromB] = await Promise.all([a.client.getJwks({}), b.client.getJwks({})]);
    expect(fromA.keys).toHaveLength(2);
    expect(fromB.etag).toBe(fromA.etag);
    expect(b.service.keys.activeSigningKey().kid).toBe(a.service.keys.activeSigningKey().kid);
  });

  it('reflects a rotation done through one replica in the other’s JWKS once the bus message arrives', async () => {
    const before = await b.client.getJwks({});
    const promoted = before.keys[1]?.kid;
    const viaBus = new Promise<KeysReloadedEvent>((resolve) => {
      const stop = b.service.keys.onReloaded((event) => {
        if (event.reason === 'bus' && event.jwks.keys[0]?.kid === promoted) {
          stop();
          resolve(event);
        }
      });
    });
    clock.advance(seconds(JWKS_MAX_AGE_SECONDS));
    const res = await a.client.rotateSigningKeys({ requestedBy: 'usr_admin' });
    expect(res.rotated).toBe(true);

    const event = await Promise.race([
      viaBus,
      new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error('no signing-keys.changed message reached replica b')), 10_000),
      ),
    ]);
    expect(event.jwks.etag).toBe((await a.client.getJwks({})).etag);
    const after = await b.client.getJwks({});
    expect(after.keys[0]?.kid).toBe(promoted);
    expect(after.keys.map((k) => k.kid)).toContain(before.keys[0]?.kid);
    expect(b.service.keys.activeSigningKey().kid).toBe(promoted);
  });

  it('completes a pending rotation through the bullmq job scheduler, with no one calling tick', async () => {
    expect(a.service.scheduler).toBeInstanceOf(BullmqScheduler);
    expect(b.service.scheduler).toBeInstanceOf(BullmqScheduler);
    const res = await b.client.rotateSigningKeys({ requestedBy: 'usr_admin' });
    expect(res.rotated).toBe(false);
    expect(res.rotationPendingSince).toBeDefined();
    const jwks = await a.client.getJwks({});
    const promoted = jwks.keys[1]?.kid ?? '';

    clock.advance(seconds(JWKS_MAX_AGE_SECONDS));
    await eventually(async () => {
      const listed = await a.client.listSigningKeys({});
      return listed.rotationPendingSince === undefined ? listed : undefined;
    }, 'the scheduled tick to complete the pending rotation');

    for (const replica of [a, b]) {
      const kid = await eventually(async () => {
        const first = (await replica.client.getJwks({})).keys[0]?.kid;
        return first === promoted ? first : undefined;
      }, 'both replicas to sign with the promoted key');
      expect(kid).toBe(promoted);
    }
  });
});
