/**
 * The issuance path when Redis forgets connection slots: two issuer replicas on one PostgreSQL
 * database and one Redis, whose slot keys the tests delete (what FLUSHALL, an empty restart or
 * a failover to an empty replica does to a tenant) at chosen instants.
 */

import type { AppError } from '@relayplane/contract/errors';
import { newId } from '@relayplane/contract/ids';
import { systemClock } from '@relayplane/shared/clock';
import { createTestDatabase, createTestRedis, type TestDatabase } from '@relayplane/testing/storage';
import { Redis } from 'ioredis';
import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { RedisSlotStore } from '../src/issuance/redis-slot-store.ts';
import { redisKeys } from '../src/redis/keys.ts';
import { issueRequest, newKek, type RunningIssuer, rejection, startIssuer } from './support/harness.ts';

describe('issuance after Redis lost the slots (two replicas, PostgreSQL, Redis)', () => {
  const redis = createTestRedis('issuer_slot_recovery');
  const keys = redisKeys(redis.prefix);
  const admin = new Redis(redis.url);
  let database: TestDatabase;
  let a: RunningIssuer;
  let b: RunningIssuer;
  const projectId = newId('project');
  const apiKeyId = newId('apiKey');

  const request = (tenantId: string, cap: number) =>
    issueRequest({ tenantId, projectId, apiKeyId }, { maxConcurrentConnections: cap });
  const slotsOf = async (tenantId: string) => (await admin.zrange(keys.slots(tenantId), '0', '-1')).sort();
  const lose = (tenantId: string) => admin.del(keys.slots(tenantId), keys.slotsMarker(tenantId));
  /** The tenant's rows as the record holds them: jti → revoked or not. */
  const rowsOf = async (tenantId: string) =>
    (
      await sql<{ jti: string; revoked: boolean }>`select jti, revoked_at is not null as revoked
        from issuer.credentials where tenant_id = ${tenantId}`.execute(a.service.database.db)
    ).rows;
  const scriptCalls = (issuer: RunningIssuer) => (issuer.service.slots as RedisSlotStore).calls;

  beforeAll(async () => {
    database = await createTestDatabase('issuer_slot_recovery');
    const kek = newKek();
    a = await startIssuer({ databaseUrl: database.url, clock: systemClock, kek, redis });
    b = await startIssuer({ databaseUrl: database.url, clock: systemClock, kek, redis });
  });

  afterEach(() => {
    vi.restoreAllMocks();
  });

  afterAll(async () => {
    await a?.stop();
    await b?.stop();
    admin.disconnect();
    await database?.drop();
    await redis.clean();
  });

  it('keeps refusing a tenant at its cap on both replicas after its slots are lost, and frees on revocation', async () => {
    const tenantId = newId('tenant');
    const held = [];
    for (let i = 0; i < 3; i++) held.push((await a.client.issueCredential(request(tenantId, 3))).jti);
    await lose(tenantId);
    for (const issuer of [a, b, a, b]) {
      const err = await rejection(issuer.client.issueCredential(request(tenantId, 3)));
      expect(err.code).toBe('payment_required');
      expect(err.message).toBe('concurrent connection limit reached (3); upgrade the plan for more');
    }
    expect(await slotsOf(tenantId)).toEqual([...held].sort());

    await b.client.revokeCredential({ tenantId, jti: held[0] ?? '' });
    await lose(tenantId);
    const replacement = await b.client.issueCredential(request(tenantId, 3));
    expect((await rejection(a.client.issueCredential(request(tenantId, 3)))).code).toBe('payment_required');
    expect(await slotsOf(tenantId)).toEqual([held[1], held[2], replacement.jti].sort());
  });

  it('withdraws and refuses (402) a credential whose slot the lost state granted, when it no longer fits', async () => {
    const tenantId = newId('tenant');
    const writer = a.service.credentialWriter;
    const insert = writer.insert.bind(writer);
    let others: string[] = [];
    vi.spyOn(writer, 'insert').mockImplementationOnce(async (rows) => {
      // Replica a granted the slot and signed; before its row commits, Redis loses the tenant
      // and replica b rebuilds from a record without that row, then fills the cap.
      await lose(tenantId);
      others = await Promise.all(
        [0, 1].map(async () => (await b.client.issueCredential(request(tenantId, 2))).jti),
      );
      return insert(rows);
    });
    const err = (await a.client.issueCredential(request(tenantId, 2)).catch((e: unknown) => e)) as AppError;
    expect(err.code).toBe('payment_required');
    expect(err.message).toBe('concurrent connection limit reached (2); upgrade the plan for more');
    // Never answered, and withdrawn in the record: no later rebuild counts it, no relay needs it.
    const rows = await rowsOf(tenantId);
    const withdrawn = rows.filter((r) => !others.includes(r.jti));
    expect(withdrawn).toHaveLength(1);
    expect(withdrawn[0]?.revoked).toBe(true);
    expect(rows.filter((r) => r.revoked)).toHaveLength(1);
    const feed = await sql<{ n: number }>`select count(*)::int as n from issuer.revocations
      where tenant_id = ${tenantId}`.execute(a.service.database.db);
    expect(feed.rows[0]?.n).toBe(0);
    expect(await slotsOf(tenantId)).toEqual([...others].sort());
    // And a rebuild now agrees with Redis.
    await lose(tenantId);
    expect((await rejection(a.client.issueCredential(request(tenantId, 2)))).code).toBe('payment_required');
    expect(await slotsOf(tenantId)).toEqual([...others].sort());
  });

  it('answers a credential whose slot the lost state granted when it still fits, holding one slot', async () => {
    const tenantId = newId('tenant');
    const writer = a.service.credentialWriter;
    const insert = writer.insert.bind(writer);
    let other = '';
    vi.spyOn(writer, 'insert').mockImplementationOnce(async (rows) => {
      await lose(tenantId);
      other = (await b.client.issueCredential(request(tenantId, 2))).jti;
      return insert(rows);
    });
    const issued = await a.client.issueCredential(request(tenantId, 2));
    expect(await slotsOf(tenantId)).toEqual([issued.jti, other].sort());
    expect((await rejection(b.client.issueCredential(request(tenantId, 2)))).code).toBe('payment_required');
  });

  it('refuses (503, never a token) when the record cannot be read to rebuild, and the record is unchanged', async () => {
    const tenantId = newId('tenant');
    const db = a.service.database.db;
    await a.client.issueCredential(request(tenantId, 3));
    await lose(tenantId);
    await sql`alter table issuer.credentials rename to credentials_away`.execute(db);
    try {
      const err = await rejection(a.client.issueCredential(request(tenantId, 3)));
      expect(err.code).toBe('unavailable');
      expect(err.retryAfterSeconds).toBe(1);
    } finally {
      await sql`alter table issuer.credentials_away rename to credentials`.execute(db);
    }
    expect(await admin.exists(keys.slotsMarker(tenantId))).toBe(0);
    expect(await rowsOf(tenantId)).toHaveLength(1);
  });

  it('costs one more script call per issuance when alone, and fewer when a tenant is busy', async () => {
    const tenantId = newId('tenant');
    // The tenant's first reservation rebuilds (empty record): two calls, then known.
    await a.client.issueCredential(request(tenantId, 1_000));
    const sequential = 20;
    let before = scriptCalls(a);
    for (let i = 0; i < sequential; i++) await a.client.issueCredential(request(tenantId, 1_000));
    // Reservation, then confirmation once the row committed.
    expect(scriptCalls(a) - before).toBe(2 * sequential);

    const concurrent = 400;
    before = scriptCalls(a);
    const stream = a.client.issueCredentials();
    for (let i = 1; i <= concurrent; i++)
      stream.send({ requestId: BigInt(i), request: request(tenantId, 1_000) });
    const answers = stream.responses[Symbol.asyncIterator]();
    for (let i = 0; i < concurrent; i++) {
      const { value } = await answers.next();
      expect(value?.result.case).toBe('credential');
    }
    stream.end();
    expect((await answers.next()).done).toBe(true);
    const calls = scriptCalls(a) - before;
    console.log(
      `slot script calls: ${sequential} sequential issuances → ${2 * sequential} (2.00 per issuance); ` +
        `${concurrent} concurrent issuances of one tenant → ${calls} (${(calls / concurrent).toFixed(3)} per issuance)`,
    );
    // Confirmations ride in the tenant's next reservation call.
    expect(calls).toBeLessThan(concurrent);
  });
});
