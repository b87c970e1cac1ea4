import { createHmac, generateKeyPairSync, sign } from 'node:crypto';
import { timestampDate } from '@bufbuild/protobuf/wkt';
import type { AppError } from '@relayplane/contract/errors';
import { newId } from '@relayplane/contract/ids';
import type { IssueCredentialsResponse } from '@relayplane/proto/issuer';
import { ManualClock } from '@relayplane/shared/clock';
import { createTestDatabase, createTestRedis, type TestDatabase } from '@relayplane/testing/storage';
import { Redis } from 'ioredis';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { IssuerConfigOverrides } from '../src/config.ts';
import { migrations } from '../src/db/migrations/index.ts';
import { redisKeys } from '../src/redis/keys.ts';
import {
  credentialJtis,
  type IssueInit,
  issueRequest,
  newKek,
  type RunningIssuer,
  rejection,
  startIssuer,
} from './support/harness.ts';

const RELAYS: IssuerConfigOverrides = {
  relays: {
    staticRelays: [
      { id: 'rly_static_eu-west_1', region: 'eu-west', host: 'relay-eu.example', port: 4433 },
      { id: 'rly_static_us-east_1', region: 'us-east', host: 'relay-us.example', port: 4433 },
    ],
    fallback: ['entry.example:443'],
  },
};

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

/** Two issuer replicas on one PostgreSQL database and one Redis: the distributed deployment. */
describe('relay credentials (two replicas, real gRPC, PostgreSQL and Redis)', () => {
  const redis = createTestRedis('issuer_credentials');
  const keys = redisKeys(redis.prefix);
  const admin = new Redis(redis.url);
  let database: TestDatabase;
  let a: RunningIssuer;
  let b: RunningIssuer;
  const clock = new ManualClock(Date.now());
  const projectId = newId('project');
  const apiKeyId = newId('apiKey');

  const request = (tenantId: string, over: IssueInit = {}) =>
    issueRequest({ tenantId, projectId, apiKeyId }, over);

  const slotsOf = (tenantId: string) => admin.zrange(keys.slots(tenantId), '0', '-1');
  const rowsOf = (tenantId: string) => credentialJtis(a.service, tenantId);

  beforeAll(async () => {
    database = await createTestDatabase('issuer_credentials');
    const kek = newKek();
    a = await startIssuer({ databaseUrl: database.url, clock, kek, redis, config: RELAYS });
    b = await startIssuer({ databaseUrl: database.url, clock, kek, redis, config: RELAYS });
  });

  afterAll(async () => {
    await a?.stop();
    await b?.stop();
    admin.disconnect();
    await database?.drop();
    await redis.clean();
  });

  it('keeps only the indexes a query uses on the credentials table (each one costs every insert)', async () => {
    const indexes = async () =>
      (
        await sql<{ indexname: string }>`select indexname from pg_indexes
          where schemaname = 'issuer' and tablename = 'credentials' order by indexname`.execute(
          a.service.database.db,
        )
      ).rows.map((r) => r.indexname);
    // jti lookups (revocation, introspection), the day windows of usage summaries, a tenant's
    // live credentials (rebuilding its slots after Redis lost them; bulk revocation), and a
    // project's credentials newest first (ListCredentials; its cost on issuance is measured in
    // docs/credentials.md, "Containment").
    expect(await indexes()).toEqual([
      'credentials_expires_at',
      'credentials_issued_at',
      'credentials_pkey',
      'credentials_project_issued',
      'credentials_tenant_live',
    ]);
    // The down migration restores what the up migration dropped.
    const migration = migrations['20261125T1600-drop-credentials-tenant-issued'];
    await migration?.down?.(a.service.database.db);
    expect(await indexes()).toContain('credentials_tenant_issued');
    await migration?.up(a.service.database.db);
    expect(await indexes()).not.toContain('credentials_tenant_issued');
  });

  it("carries the gateway's paths as moq-token's claims beneath the project id, in upstream's encoding", async () => {
    const tenantId = newId('tenant');
    const claimsOf = async (paths: IssueInit['paths']) => {
      const res = await a.client.issueCredential(request(tenantId, { paths }));
      const jwks = createLocalJWKSet({ keys: [...a.service.keys.jwks().keys] });
      const { payload } = await jwtVerify(res.token, jwks, { currentDate: clock.now() });
      const { root, put, get, publish, subscribe } = payload;
      return { root, put, get, publish, subscribe };
    };
    // Subtrees only: the legacy put/get prefixes every moq verifier reads.
    expect(await claimsOf({ root: 'room/7', publish: ['alice/**'], subscribe: ['**'] })).toEqual({
      root: `${projectId}/room/7`,
      put: ['alice'],
      get: [''],
      publish: undefined,
      subscribe: undefined,
    });
    // Anything else: publish/subscribe patterns, never mixed with put/get.
    expect(await claimsOf({ root: 'room/7', publish: ['alice'], subscribe: ['*/cam'] })).toEqual({
      root: `${projectId}/room/7`,
      put: undefined,
      get: undefined,
      publish: ['alice'],
      subscribe: ['*/cam'],
    });
    // A gateway from before path scoping sends none: the whole project to both roles.
    expect(await claimsOf(undefined)).toEqual({
      root: projectId,
      put: [''],
      get: [''],
      publish: undefined,
      subscribe: undefined,
    });
  });

  it('issues a credential that jose verifies against the JWKS, with exactly the documented claims', async () => {
    const tenantId = newId('tenant');
    const res = await a.client.issueCredential(
      request(tenantId, { scopes: ['relay:session', 'relay:publish'], region: 'eu-west', ttlSeconds: 900 }),
    );
    const jwks = createLocalJWKSet({ keys: [...a.service.keys.jwks().keys] });
    const { payload, protectedHeader } = await jwtVerify(res.token, jwks, {
      algorithms: ['EdDSA'],
      issuer: 'relayplane',
      audience: 'relayplane-relay',
      currentDate: clock.now(),
    });
    expect(protectedHeader).toEqual({ alg: 'EdDSA', typ: 'JWT', kid: a.service.keys.activeSigningKey().kid });
    expect(Object.keys(decodeProtectedHeader(res.token))).toEqual(['alg', 'typ', 'kid']);
    const iat = Math.floor(clock.now().getTime() / 1000);
    expect(payload).toEqual({
      iss: 'relayplane',
      sub: projectId,
      aud: 'relayplane-relay',
      jti: res.jti,
      iat,
      nbf: iat,
      exp: iat + 900,
      tid: tenantId,
      pid: projectId,
      scope: 'relay:session relay:publish',
      mode: 'live',
      akid: apiKeyId,
      rgn: 'eu-west',
      // moq-token's path claims: the whole project, to the one role relay:publish narrows to.
      root: projectId,
      put: [''],
    });
    expect(res.jti).toMatch(/^crd_[0-9abcdefghjkmnpqrstvwxyz]{20}$/);
    expect(res.expiresAt && timestampDate(res.expiresAt).getTime()).toBe((iat + 900) * 1000);
    // Relays: healthy ones, the requested region first; fallback entry points.
    expect(res.relays.map((r) => r.region)).toEqual(['eu-west', 'us-east']);
    expect(res.relays[0]?.url).toBe('https://relay-eu.example:4433');
    expect(res.fallback).toContain('entry.example:443');
    // Recorded before the answer, and holding one slot.
    const row = await a.service.database.db
      .selectFrom('credentials')
      .selectAll()
      .where('jti', '=', res.jti)
      .executeTakeFirstOrThrow();
    expect(row).toMatchObject({
      tenant_id: tenantId,
      project_id: projectId,
      api_key_id: apiKeyId,
      kid: a.service.keys.activeSigningKey().kid,
      mode: 'live',
      scopes: 'relay:session relay:publish',
      revoked_at: null,
    });
    expect(row.expires_at.getTime()).toBe((iat + 900) * 1000);
    expect(await slotsOf(tenantId)).toEqual([res.jti]);
  });

  it('omits rgn without a region, defaults ttl and scopes, and marks test-key credentials', async () => {
    const res = await b.client.issueCredential(
      request(newId('tenant'), { mode: 'test', scopes: [], ttlSeconds: 0 }),
    );
    const payload = JSON.parse(Buffer.from(res.token.split('.')[1] ?? '', 'base64url').toString());
    expect(payload.rgn).toBeUndefined();
    expect(payload.mode).toBe('test');
    expect(payload.scope).toBe('relay:session');
    expect(payload.exp - payload.iat).toBe(600);
  });

  it('rejects invalid requests without taking a slot', async () => {
    const tenantId = newId('tenant');
    const cases: Array<[IssueInit, RegExp]> = [
      [{ scopes: ['relay:admin'] }, /unknown scope "relay:admin"/],
      [{ ttlSeconds: 59 }, /ttl_seconds must be between 60 and 3600/],
      [{ ttlSeconds: 3601 }, /ttl_seconds must be between 60 and 3600/],
      [{ mode: 'prod' }, /mode must be "live" or "test"/],
      [{ tenantId: 'tenant-1' }, /tenant_id/],
      [{ projectId: '' }, /project_id/],
      [{ region: 'EU WEST!' }, /region/],
      [{ maxConcurrentConnections: -1 }, /max_concurrent_connections/],
      [
        { paths: { root: 'room', publish: ['a//b'], subscribe: [] } },
        /^publish: "a\/\/b" is not a moq pattern/,
      ],
      [
        { paths: { root: 'room/*', publish: ['**'], subscribe: [] } },
        /^root must be a path without wildcards/,
      ],
      [{ paths: { root: '', publish: [], subscribe: [] } }, /would grant nothing/],
      [
        { scopes: ['relay:session', 'relay:subscribe'], paths: { root: '', publish: ['**'], subscribe: [] } },
        /publish patterns need scope relay:publish/,
      ],
    ];
    for (const [over, message] of cases) {
      const err = await rejection(a.client.issueCredential(request(tenantId, over)));
      expect(err.code).toBe('invalid_request');
      expect(err.message).toMatch(message);
    }
    expect(await slotsOf(tenantId)).toEqual([]);
    expect(await rowsOf(tenantId)).toEqual([]);
  });

  describe('with the policy billing worded (IssueCredentialRequest.policy)', () => {
    const policy = (cap: number, maxTtl: number) => ({
      planId: 'free',
      maxConcurrentConnections: {
        value: cap,
        exceededMessage: `the free plan allows at most ${cap} connections`,
      },
      maxCredentialTtlSeconds: { value: maxTtl, exceededMessage: `ttl over the free plan's ${maxTtl}` },
    });

    it("counts against the policy's cap (not the deprecated field) and refuses at it in the policy's words", async () => {
      const tenantId = newId('tenant');
      // The deprecated field says 100: only the policy counts when both are sent.
      const over = { policy: policy(2, 900), maxConcurrentConnections: 100 };
      const results = await Promise.allSettled(
        Array.from({ length: 5 }, (_, i) => (i % 2 ? a : b).client.issueCredential(request(tenantId, over))),
      );
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(2);
      for (const r of results.filter((r) => r.status === 'rejected')) {
        const err = (r as PromiseRejectedResult).reason as AppError;
        expect(err.code).toBe('payment_required');
        expect(err.message).toBe('the free plan allows at most 2 connections');
      }
      expect(await slotsOf(tenantId)).toHaveLength(2);
    });

    it("decides the lifetime by the plan's maximum: the default lowered to it, more refused in its words", async () => {
      const tenantId = newId('tenant');
      const short = await a.client.issueCredential(
        request(tenantId, { ttlSeconds: 0, policy: policy(5, 300) }),
      );
      const claims = JSON.parse(Buffer.from(short.token.split('.')[1] ?? '', 'base64url').toString());
      expect(claims.exp - claims.iat).toBe(300);
      const err = await rejection(
        a.client.issueCredential(request(tenantId, { ttlSeconds: 301, policy: policy(5, 300) })),
      );
      expect(err.code).toBe('invalid_request');
      expect(err.message).toBe("ttl over the free plan's 300");
      expect(await slotsOf(tenantId)).toHaveLength(1);
    });

    it('refuses a policy without a limit or its message, taking no slot', async () => {
      const tenantId = newId('tenant');
      const silent = { ...policy(5, 600), maxConcurrentConnections: { value: 5, exceededMessage: '' } };
      const missing = { planId: 'free', maxCredentialTtlSeconds: { value: 600, exceededMessage: 'x' } };
      for (const [p, message] of [
        [silent, 'policy.max_concurrent_connections needs its exceeded message'],
        [missing, 'policy.max_concurrent_connections must be a whole number, 0 or more'],
      ] as const) {
        const err = await rejection(a.client.issueCredential(request(tenantId, { policy: p })));
        expect(err.code).toBe('invalid_request');
        expect(err.message).toBe(message);
      }
      expect(await slotsOf(tenantId)).toEqual([]);
    });
  });

  it('never exceeds the cap: 25 concurrent calls over two replicas, cap 5, twenty rounds', async () => {
    for (let round = 0; round < 20; round++) {
      const tenantId = newId('tenant');
      const results = await Promise.allSettled(
        Array.from({ length: 25 }, (_, i) => (i % 2 ? a : b).client.issueCredential(request(tenantId))),
      );
      const issued = results.filter((r) => r.status === 'fulfilled');
      const refused = results.filter((r) => r.status === 'rejected');
      expect(issued).toHaveLength(5);
      expect(refused).toHaveLength(20);
      for (const r of refused) {
        const err = (r as PromiseRejectedResult).reason as AppError;
        expect(err.code).toBe('payment_required');
        expect(err.message).toBe('concurrent connection limit reached (5); upgrade the plan for more');
      }
      const jtis = issued.map((r) => r.value.jti).sort();
      expect((await slotsOf(tenantId)).sort()).toEqual(jtis);
      expect((await rowsOf(tenantId)).sort()).toEqual(jtis);
    }
  });

  it('frees one slot per revocation, and frees slots at expiry (pruned by Redis time)', async () => {
    const tenantId = newId('tenant');
    const cap = { maxConcurrentConnections: 3 };
    const held = [];
    for (let i = 0; i < 3; i++) held.push(await a.client.issueCredential(request(tenantId, cap)));
    expect((await rejection(b.client.issueCredential(request(tenantId, cap)))).code).toBe('payment_required');

    await b.client.revokeCredential({ tenantId, jti: held[0]?.jti ?? '' });
    expect((await slotsOf(tenantId)).sort()).toEqual([held[1]?.jti, held[2]?.jti].sort());
    const replacement = await a.client.issueCredential(request(tenantId, cap));
    expect((await rejection(a.client.issueCredential(request(tenantId, cap)))).code).toBe('payment_required');

    // Expiry: push every lease's score into the past; only the script's pruning can free them.
    for (const jti of await slotsOf(tenantId)) await admin.zadd(keys.slots(tenantId), 'XX', 1_000, jti);
    const after = await Promise.all([0, 1, 2].map(() => b.client.issueCredential(request(tenantId, cap))));
    expect((await slotsOf(tenantId)).sort()).toEqual(after.map((r) => r.jti).sort());
    expect(await slotsOf(tenantId)).not.toContain(replacement.jti);
    expect((await rejection(b.client.issueCredential(request(tenantId, cap)))).code).toBe('payment_required');
  });

  it('revokes idempotently, and answers not_found for another tenant’s or an unknown jti', async () => {
    const tenantId = newId('tenant');
    const { jti } = await a.client.issueCredential(request(tenantId));
    clock.advance(1_000);
    const first = await a.client.revokeCredential({ tenantId, jti });
    clock.advance(5_000);
    const again = await b.client.revokeCredential({ tenantId, jti });
    expect(first.jti).toBe(jti);
    expect(first.revokedAt && timestampDate(first.revokedAt).getTime()).toBe(clock.now().getTime() - 5_000);
    expect(again.revokedAt).toEqual(first.revokedAt);
    const feed = await sql<{
      n: string;
    }>`select count(*) as n from issuer.revocations where jti = ${jti}`.execute(a.service.database.db);
    expect(Number(feed.rows[0]?.n)).toBe(1);

    const other = await rejection(a.client.revokeCredential({ tenantId: newId('tenant'), jti }));
    expect(other.code).toBe('not_found');
    expect(other.message).toBe('credential not found');
    const unknown = await rejection(a.client.revokeCredential({ tenantId, jti: 'crd_00000000000000000000' }));
    expect(unknown.code).toBe('not_found');
    const malformed = await rejection(a.client.revokeCredential({ tenantId, jti: "x' or 1=1 --" }));
    expect(malformed.code).toBe('not_found');
  });

  it('introspects a valid credential (RFC 7662 fields) on either replica', async () => {
    const tenantId = newId('tenant');
    const res = await a.client.issueCredential(request(tenantId, { scopes: ['relay:subscribe'] }));
    const iat = BigInt(Math.floor(clock.now().getTime() / 1000));
    const info = await b.client.introspectCredential({ token: res.token });
    expect(info).toMatchObject({
      active: true,
      scopes: ['relay:subscribe'],
      clientId: apiKeyId,
      sub: projectId,
      aud: 'relayplane-relay',
      iss: 'relayplane',
      jti: res.jti,
      exp: iat + 600n,
      iat,
      nbf: iat,
      tenantId,
      projectId,
      mode: 'live',
    });
  });

  it('treats a revoked credential as inactive everywhere and publishes it in the feed', async () => {
    const tenantId = newId('tenant');
    const res = await a.client.issueCredential(request(tenantId, { region: 'us-east' }));
    const assigned = await b.client.assignRelays({ token: res.token, region: '' });
    expect(assigned.relays[0]?.region).toBe('us-east');
    const elsewhere = await b.client.assignRelays({ token: res.token, region: 'eu-west' });
    expect(elsewhere.relays[0]?.region).toBe('eu-west');
    expect(elsewhere.fallback).toContain('entry.example:443');

    const before = await b.client.listRevocations({ cursor: 0n, limit: 1000 });
    await a.client.revokeCredential({ tenantId, jti: res.jti });

    for (const issuer of [a, b]) {
      const info = await issuer.client.introspectCredential({ token: res.token });
      expect(info.active).toBe(false);
      expect(info.jti).toBe('');
      const err = await rejection(issuer.client.assignRelays({ token: res.token, region: '' }));
      expect(err.code).toBe('unauthenticated');
      expect(err.message).toBe('invalid or expired token');
    }
    const page = await b.client.listRevocations({ cursor: before.nextCursor, limit: 1000 });
    expect(page.revocations.map((r) => r.jti)).toEqual([res.jti]);
    expect(page.nextCursor).toBe(page.revocations[0]?.sequence);
    expect(page.revocations[0]?.expiresAt && timestampDate(page.revocations[0].expiresAt)).toEqual(
      res.expiresAt && timestampDate(res.expiresAt),
    );
    // Nothing after the last entry: the cursor stays.
    const empty = await a.client.listRevocations({ cursor: page.nextCursor });
    expect(empty).toMatchObject({ revocations: [], nextCursor: page.nextCursor });
  });

  it('pages the feed in sequence order with limit', async () => {
    const tenantId = newId('tenant');
    const start = (await a.client.listRevocations({ cursor: 0n, limit: 1000 })).nextCursor;
    const issued = [];
    for (let i = 0; i < 3; i++) issued.push(await a.client.issueCredential(request(tenantId)));
    for (const c of issued) await b.client.revokeCredential({ tenantId, jti: c.jti });
    const first = await a.client.listRevocations({ cursor: start, limit: 2 });
    const second = await a.client.listRevocations({ cursor: first.nextCursor, limit: 2 });
    expect([...first.revocations, ...second.revocations].map((r) => r.jti)).toEqual(issued.map((c) => c.jti));
    const sequences = [...first.revocations, ...second.revocations].map((r) => r.sequence);
    expect([...sequences].sort((x, y) => (x < y ? -1 : 1))).toEqual(sequences);
    expect((await rejection(a.client.listRevocations({ cursor: 0n, limit: 1001 }))).code).toBe(
      'invalid_request',
    );
    expect((await rejection(a.client.listRevocations({ cursor: -1n }))).code).toBe('invalid_request');
    expect((await rejection(a.client.listRevocations({ cursor: 0n, waitMs: 30_001 }))).code).toBe(
      'invalid_request',
    );
  });

  it('answers a long-poll on one replica within a second of a revocation on the other', async () => {
    const tenantId = newId('tenant');
    const { jti } = await a.client.issueCredential(request(tenantId));
    const { nextCursor } = await b.client.listRevocations({ cursor: 0n, limit: 1000 });
    let answeredAt: number | undefined;
    const poll = b.client
      .listRevocations({ cursor: nextCursor, waitMs: 20_000 }, { deadline: new Date(Date.now() + 25_000) })
      .then((res) => {
        answeredAt = performance.now();
        return res;
      });
    // A round trip to the same replica, so the poll is being served before the revocation.
    await b.client.getJwks({});
    expect(answeredAt).toBeUndefined();
    const revokedAt = performance.now();
    await a.client.revokeCredential({ tenantId, jti });
    const res = await poll;
    expect(res.revocations.map((r) => r.jti)).toEqual([jti]);
    expect((answeredAt ?? Number.POSITIVE_INFINITY) - revokedAt).toBeLessThan(1000);
  });

  it('ends a long-poll with nothing new when its wait runs out', async () => {
    const { nextCursor } = await a.client.listRevocations({ cursor: 0n, limit: 1000 });
    const started = performance.now();
    const res = await a.client.listRevocations({ cursor: nextCursor, waitMs: 300 });
    expect(res).toMatchObject({ revocations: [], nextCursor });
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
  });

  it('rejects forged, unsigned, HMAC, expired, not-yet-valid and malformed tokens', async () => {
    const tenantId = newId('tenant');
    const res = await a.client.issueCredential(request(tenantId));
    const [header, payload] = res.token.split('.') as [string, string];
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
    const kid = a.service.keys.activeSigningKey().kid;
    const other = generateKeyPairSync('ed25519');
    const signWith = (h: unknown, p: unknown) => {
      const input = `${b64(h)}.${b64(p)}`;
      return `${input}.${sign(null, Buffer.from(input), other.privateKey).toString('base64url')}`;
    };
    const x = a.service.keys.jwks().keys[0]?.x ?? '';
    const hsInput = `${b64({ alg: 'HS256', typ: 'JWT', kid })}.${payload}`;
    const bad: Record<string, string> = {
      'signed by another key under our kid': signWith({ alg: 'EdDSA', typ: 'JWT', kid }, claims),
      'signed by another key, unknown kid': signWith(
        { alg: 'EdDSA', typ: 'JWT', kid: 'A'.repeat(43) },
        claims,
      ),
      'claims changed after signing': `${header}.${b64({ ...claims, tid: newId('tenant') })}.${res.token.split('.')[2]}`,
      'alg none': `${b64({ alg: 'none', typ: 'JWT', kid })}.${payload}.`,
      'alg None with our signature': `${b64({ alg: 'None', typ: 'JWT', kid })}.${payload}.${res.token.split('.')[2]}`,
      'HS256 keyed with the public key': `${hsInput}.${createHmac('sha256', Buffer.from(x, 'base64url')).update(hsInput).digest('base64url')}`,
      'kid injection': signWith({ alg: 'EdDSA', typ: 'JWT', kid: "../../' OR 1=1--" }, claims),
      'four segments': `${res.token}.x`,
      garbage: 'not-a-token',
      oversized: `${res.token}${'A'.repeat(10_000)}`,
      empty: '',
    };
    for (const [what, token] of Object.entries(bad)) {
      const info = await b.client.introspectCredential({ token });
      expect({ what, active: info.active, jti: info.jti }).toEqual({ what, active: false, jti: '' });
    }
    // The genuine one is still active...
    expect((await b.client.introspectCredential({ token: res.token })).active).toBe(true);
    // ...until its expires_at exactly (no leeway on exp here), and nothing is valid before nbf minus the leeway.
    clock.advance(599 * 1000);
    expect((await b.client.introspectCredential({ token: res.token })).active).toBe(true);
    clock.advance(1_000);
    expect((await b.client.introspectCredential({ token: res.token })).active).toBe(false);
    expect((await rejection(a.client.assignRelays({ token: res.token, region: '' }))).code).toBe(
      'unauthenticated',
    );
    const future = await a.client.issueCredential(request(newId('tenant')));
    clock.advance(-31_000);
    expect((await b.client.introspectCredential({ token: future.token })).active).toBe(false);
    clock.advance(31_000);
  });

  it('multiplexes 200 requests on one IssueCredentials stream; failures do not end it', async () => {
    const tenantId = newId('tenant');
    const statementsBefore = a.service.credentialWriter.statements;
    const stream = a.client.issueCredentials();
    const ids = Array.from({ length: 200 }, (_, i) => BigInt(1_000 + i));
    for (const [i, requestId] of ids.entries()) {
      const over: IssueInit = { maxConcurrentConnections: 170 };
      if (i % 10 === 0) over.scopes = ['relay:admin'];
      stream.send({ requestId, request: request(tenantId, over) });
    }
    stream.send({ requestId: 5n });
    const answers = new Map<bigint, Awaited<ReturnType<typeof nextAnswer>>>();
    const iterator = stream.responses[Symbol.asyncIterator]();
    const nextAnswer = async () => {
      const { value, done } = await iterator.next();
      if (done) throw new Error('stream ended early');
      return value;
    };
    while (answers.size < 201) {
      const res = await nextAnswer();
      expect(answers.has(res.requestId)).toBe(false);
      answers.set(res.requestId, res);
    }
    expect([...answers.keys()].sort((x, y) => (x < y ? -1 : 1))).toEqual([5n, ...ids]);
    const results = ids.map((id) => answers.get(id)?.result);
    const credentials = results.flatMap((r) => (r?.case === 'credential' ? [r.value] : []));
    const errors = results.flatMap((r) => (r?.case === 'error' ? [r.value] : []));
    expect(credentials).toHaveLength(170);
    expect(errors.filter((e) => e.code === 'invalid_request')).toHaveLength(20);
    expect(errors.filter((e) => e.code === 'payment_required')).toHaveLength(10);
    expect(errors.find((e) => e.code === 'payment_required')?.message).toBe(
      'concurrent connection limit reached (170); upgrade the plan for more',
    );
    expect(answers.get(5n)?.result).toMatchObject({ case: 'error', value: { code: 'invalid_request' } });
    expect((await rowsOf(tenantId)).sort()).toEqual(credentials.map((c) => c.jti).sort());
    expect((await slotsOf(tenantId)).length).toBe(170);
    // Rows arriving together were written together.
    expect(a.service.credentialWriter.statements - statementsBefore).toBeLessThan(170);

    // Still open after all those failures: one more request on the same stream.
    stream.send({ requestId: 7n, request: request(newId('tenant')) });
    const last = await nextAnswer();
    expect(last.requestId).toBe(7n);
    expect(last.result.case).toBe('credential');
    stream.end();
    expect((await iterator.next()).done).toBe(true);
  });

  it('answers a batch of 120 on IssueCredentialBatches, each once, in fewer messages than requests', async () => {
    const tenantId = newId('tenant');
    const stream = a.client.issueCredentialBatches();
    const ids = Array.from({ length: 120 }, (_, i) => BigInt(2_000 + i));
    stream.send({
      requests: [
        ...ids.map((requestId, i) => ({
          requestId,
          request: request(tenantId, {
            maxConcurrentConnections: 100,
            ...(i % 12 === 0 ? { scopes: ['relay:admin'] } : {}),
          }),
        })),
        { requestId: 9n },
      ],
    });
    const iterator = stream.responses[Symbol.asyncIterator]();
    const answers = new Map<bigint, IssueCredentialsResponse>();
    let messages = 0;
    while (answers.size < 121) {
      const { value, done } = await iterator.next();
      if (done) throw new Error('stream ended early');
      messages++;
      for (const res of value.responses) {
        expect(answers.has(res.requestId)).toBe(false);
        answers.set(res.requestId, res);
      }
    }
    expect(messages).toBeLessThan(121);
    const results = ids.map((id) => answers.get(id)?.result);
    const credentials = results.flatMap((r) => (r?.case === 'credential' ? [r.value] : []));
    const errors = results.flatMap((r) => (r?.case === 'error' ? [r.value] : []));
    // 10 with an unknown scope; of the 110 others, the cap of 100 lets 100 through.
    expect(errors.filter((e) => e.code === 'invalid_request')).toHaveLength(10);
    expect(errors.filter((e) => e.code === 'payment_required')).toHaveLength(10);
    expect(credentials).toHaveLength(100);
    expect(answers.get(9n)?.result).toMatchObject({ case: 'error', value: { code: 'invalid_request' } });
    expect((await rowsOf(tenantId)).sort()).toEqual(credentials.map((c) => c.jti).sort());
    expect((await slotsOf(tenantId)).sort()).toEqual(credentials.map((c) => c.jti).sort());
    stream.end();
    expect((await iterator.next()).done).toBe(true);
  });
});
