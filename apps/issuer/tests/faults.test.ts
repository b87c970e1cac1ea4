import { createServer, type Server, type Socket } from 'node:net';
import type { AppError } from '@relayplane/contract/errors';
import { newId } from '@relayplane/contract/ids';
import { ManualClock } from '@relayplane/shared/clock';
import { createRequestPathRedis } from '@relayplane/shared/redis';
import { testLogger } from '@relayplane/testing/logger';
import { createTestDatabase, createTestRedis, type TestDatabase } from '@relayplane/testing/storage';
import { Redis } from 'ioredis';
import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { RedisSlotStore } from '../src/issuance/redis-slot-store.ts';
import { redisKeys } from '../src/redis/keys.ts';
import {
  credentialJtis,
  eventually,
  newKek,
  type RunningIssuer,
  rejection,
  startIssuer,
} from './support/harness.ts';

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Accepts TCP connections and never answers: a blackholed Redis. */
async function blackhole(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('issuance under faults: never a token without a row, never a leaked slot', () => {
  const redis = createTestRedis('issuer_faults');
  const keys = redisKeys(redis.prefix);
  const admin = new Redis(redis.url);
  const clock = new ManualClock(Date.now());
  const kek = newKek();
  let database: TestDatabase;
  let issuer: RunningIssuer;
  const extra: RunningIssuer[] = [];

  const request = (tenantId: string) => ({
    tenantId,
    projectId: newId('project'),
    apiKeyId: newId('apiKey'),
    mode: 'live',
    scopes: ['relay:session'],
    ttlSeconds: 300,
    maxConcurrentConnections: 100,
  });
  const slotsOf = (tenantId: string) => admin.zrange(keys.slots(tenantId), '0', '-1');
  const rowsOf = (tenantId: string) => credentialJtis(issuer.service, tenantId);

  beforeAll(async () => {
    database = await createTestDatabase('issuer_faults');
    issuer = await startIssuer({ databaseUrl: database.url, clock, kek, redis });
  });

  afterEach(() => {
    vi.restoreAllMocks();
  });

  afterAll(async () => {
    for (const i of extra) await i.stop();
    await issuer?.stop();
    admin.disconnect();
    await database?.drop();
    await redis.clean();
  });

  it('refuses and releases the slot when the credentials table is gone (Postgres write fails)', async () => {
    const tenantId = newId('tenant');
    const db = issuer.service.database.db;
    await sql`alter table issuer.credentials rename to credentials_away`.execute(db);
    try {
      const err = await rejection(issuer.client.issueCredential(request(tenantId)));
      expect(err.code).toBe('unavailable');
      expect(err.message).toBe('credentials cannot be recorded right now; retry shortly');
      expect(err.retryAfterSeconds).toBe(1);
      // Same on the stream, which stays usable.
      const stream = issuer.client.issueCredentials();
      for (let i = 1n; i <= 5n; i++) stream.send({ requestId: i, request: request(tenantId) });
      const responses = stream.responses[Symbol.asyncIterator]();
      for (let i = 0; i < 5; i++) {
        const { value } = await responses.next();
        expect(value?.result).toMatchObject({
          case: 'error',
          value: { code: 'unavailable', retryAfterSeconds: 1 },
        });
      }
      await sql`alter table issuer.credentials_away rename to credentials`.execute(db);
      stream.send({ requestId: 9n, request: request(tenantId) });
      const { value } = await responses.next();
      expect(value?.requestId).toBe(9n);
      expect(value?.result.case).toBe('credential');
      stream.end();
      const jti = value?.result.case === 'credential' ? value.result.value.jti : '';
      expect(await slotsOf(tenantId)).toEqual([jti]);
      expect(await rowsOf(tenantId)).toEqual([jti]);
    } finally {
      await sql`alter table if exists issuer.credentials_away rename to credentials`.execute(db);
    }
  });

  it('answers only credentials whose batch committed when one batch fails among concurrent calls', async () => {
    const tenantId = newId('tenant');
    const writer = issuer.service.credentialWriter;
    const insert = writer.insert.bind(writer);
    let calls = 0;
    let failedBatch: string[] = [];
    let secondWave: Promise<PromiseSettledResult<{ jti: string }>[]> | undefined;
    vi.spyOn(writer, 'insert').mockImplementation(async (rows) => {
      calls++;
      if (calls > 1) return insert(rows);
      failedBatch = rows.map((r) => r.jti);
      // While the first batch is in flight, 30 more calls reserve their slots and queue up.
      secondWave = Promise.allSettled(
        Array.from({ length: 30 }, () => issuer.client.issueCredential(request(tenantId))),
      );
      await eventually(
        async () => ((await admin.zcard(keys.slots(tenantId))) >= 60 ? true : undefined),
        '60 slots',
      );
      throw new Error('connection terminated unexpectedly');
    });
    const firstWave = await Promise.allSettled(
      Array.from({ length: 30 }, () => issuer.client.issueCredential(request(tenantId))),
    );
    const second = await (secondWave ?? Promise.reject(new Error('the first batch was never written')));
    const all = [...firstWave, ...second];
    // Exactly the calls whose rows were in the failed batch are refused, as unavailable.
    const failed = all.flatMap((r) => (r.status === 'rejected' ? [r.reason as AppError] : []));
    expect(failedBatch.length).toBeGreaterThan(0);
    expect(failed).toHaveLength(failedBatch.length);
    expect(failed.every((e) => e.code === 'unavailable')).toBe(true);
    const issued = all.flatMap((r) => (r.status === 'fulfilled' ? [r.value.jti] : []));
    expect(issued).toHaveLength(60 - failedBatch.length);
    expect(issued.filter((jti) => failedBatch.includes(jti))).toEqual([]);
    expect(calls).toBeGreaterThanOrEqual(2);
    // Every answered jti has its row; every slot left belongs to an answered credential.
    expect((await rowsOf(tenantId)).sort()).toEqual([...issued].sort());
    expect((await slotsOf(tenantId)).sort()).toEqual([...issued].sort());
  });

  it('refuses with internal and releases the slot when signing fails', async () => {
    const broken = await startIssuer({
      databaseUrl: database.url,
      clock,
      kek,
      redis,
      overrides: {
        sign: () => {
          throw new Error('signing device unavailable');
        },
      },
    });
    extra.push(broken);
    const tenantId = newId('tenant');
    const err = await rejection(broken.client.issueCredential(request(tenantId)));
    expect(err.code).toBe('internal');
    expect(err.message).toBe('the credential could not be signed');
    expect(await slotsOf(tenantId)).toEqual([]);
    expect(await rowsOf(tenantId)).toEqual([]);
  });

  it('fails closed, fast, with unavailable (never 402, never a token) when Redis is unreachable', async () => {
    const dead = createRequestPathRedis(
      { url: `redis://127.0.0.1:${await closedPort()}`, prefix: redis.prefix },
      testLogger('dead-redis'),
      { name: 'dead', commandTimeoutMs: 300 },
    );
    const broken = await startIssuer({
      databaseUrl: database.url,
      clock,
      kek,
      redis,
      overrides: { slotStore: new RedisSlotStore(dead, keys, { ownsConnection: true }) },
    });
    extra.push(broken);
    const tenantId = newId('tenant');
    for (let i = 0; i < 3; i++) {
      const started = performance.now();
      const err = await rejection(broken.client.issueCredential(request(tenantId)));
      expect(performance.now() - started).toBeLessThan(1_000);
      expect(err.code).toBe('unavailable');
      expect(err.message).toBe('concurrency limits are unavailable; retry shortly');
      expect(err.retryAfterSeconds).toBe(1);
    }
    expect(await rowsOf(tenantId)).toEqual([]);
    expect(await slotsOf(tenantId)).toEqual([]);
    // Nor does the tenant's connection count guess: the slots held are Redis's to say.
    const counted = await rejection(broken.client.getTenantConnections({ tenantId }));
    expect(counted).toMatchObject({
      code: 'unavailable',
      message: 'concurrency limits are unavailable; retry shortly',
      retryAfterSeconds: 1,
    });
  });

  it("counts a tenant's unended relay sessions (PostgreSQL) and the slots it holds (Redis)", async () => {
    const tenantId = newId('tenant');
    expect(await issuer.client.getTenantConnections({ tenantId })).toMatchObject({
      liveSessions: 0,
      slotsHeld: 0,
    });
    await issuer.client.issueCredential(request(tenantId));
    await issuer.client.issueCredential(request(tenantId));
    expect(await issuer.client.getTenantConnections({ tenantId })).toMatchObject({
      liveSessions: 0,
      slotsHeld: 2,
    });
    expect(await rejection(issuer.client.getTenantConnections({ tenantId: 'nope' }))).toMatchObject({
      code: 'invalid_request',
      message: 'tenant_id must be a tenant id',
    });
  });

  it('fails closed within the command timeout when Redis accepts connections but never answers', async () => {
    const hole = await blackhole();
    try {
      const silent = createRequestPathRedis(
        { url: `redis://127.0.0.1:${hole.port}`, prefix: redis.prefix },
        testLogger('blackholed-redis'),
        { name: 'blackholed', commandTimeoutMs: 300 },
      );
      const broken = await startIssuer({
        databaseUrl: database.url,
        clock,
        kek,
        redis,
        overrides: { slotStore: new RedisSlotStore(silent, keys, { ownsConnection: true }) },
      });
      extra.push(broken);
      const tenantId = newId('tenant');
      const started = performance.now();
      const err = await rejection(broken.client.issueCredential(request(tenantId)));
      expect(performance.now() - started).toBeLessThan(1_000);
      expect(err.code).toBe('unavailable');
      expect(await rowsOf(tenantId)).toEqual([]);
    } finally {
      await hole.close();
    }
  });

  it('keeps a credential revoked when the revocation never reached Redis (Postgres decides)', async () => {
    // A replica without Redis on the same database: its revocation writes no Redis marker.
    const noRedis = await startIssuer({ databaseUrl: database.url, clock, kek });
    extra.push(noRedis);
    const tenantId = newId('tenant');
    const res = await issuer.client.issueCredential(request(tenantId));
    await noRedis.client.revokeCredential({ tenantId, jti: res.jti });
    expect(await admin.exists(keys.revoked(res.jti))).toBe(0);
    expect((await issuer.client.introspectCredential({ token: res.token })).active).toBe(false);
    expect((await rejection(issuer.client.assignRelays({ token: res.token, region: '' }))).code).toBe(
      'unauthenticated',
    );
    // Revoking again through a replica with Redis repairs the mirror: marker set, slot freed.
    const again = await issuer.client.revokeCredential({ tenantId, jti: res.jti });
    expect(again.jti).toBe(res.jti);
    expect(await admin.exists(keys.revoked(res.jti))).toBe(1);
    expect(await slotsOf(tenantId)).toEqual([]);
  });

  it('answers waiting long-polls at shutdown instead of holding the drain for their whole wait', async () => {
    const leaving = await startIssuer({ databaseUrl: database.url, clock, kek, redis });
    const { nextCursor } = await leaving.client.listRevocations({ cursor: 0n, limit: 1000 });
    const poll = leaving.client.listRevocations(
      { cursor: nextCursor, waitMs: 30_000 },
      { deadline: new Date(Date.now() + 35_000) },
    );
    await leaving.client.getJwks({});
    const started = performance.now();
    await leaving.service.destroy();
    expect(await poll).toMatchObject({ revocations: [], nextCursor });
    expect(performance.now() - started).toBeLessThan(5_000);
    leaving.client.close();
  });
});
