import { createHash } from 'node:crypto';
import type { BillingService } from '@relayplane/billing';
import { BUS_CHANNELS } from '@relayplane/contract/contract';
import { INVALID_TOKEN_MESSAGE } from '@relayplane/contract/errors';
import { newId } from '@relayplane/contract/ids';
import { AdminService as AdminRpc, type ApiKey, type Principal } from '@relayplane/proto/admin';
import { BillingService as BillingRpc } from '@relayplane/proto/billing';
import { MemoryBus, RedisBus } from '@relayplane/shared/bus';
import { ManualClock } from '@relayplane/shared/clock';
import { createRedis } from '@relayplane/shared/redis';
import { connect, type ServiceClient } from '@relayplane/shared/rpc';
import { testLogger } from '@relayplane/testing/logger';
import {
  createTestDatabase,
  createTestRedis,
  type TestDatabase,
  type TestRedis,
} from '@relayplane/testing/storage';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AdminService } from '../src/service.ts';
import { createAdmin, expectAppError, startBilling } from './support/harness.ts';

const PASSWORD = 'a long enough password';
const ALL_SCOPES = ['relay:publish', 'relay:session', 'relay:subscribe'];
const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');
const seconds = (ts: { seconds: bigint } | undefined) => (ts === undefined ? undefined : Number(ts.seconds));

/** Collects what a bus delivers on one channel; waits for a message with a bounded deadline. */
function collector() {
  const seen: string[] = [];
  const waiters: { message: string; resolve: () => void }[] = [];
  return {
    seen,
    handler(message: string) {
      seen.push(message);
      for (const w of waiters.filter((w) => w.message === message)) w.resolve();
    },
    waitFor(message: string, timeoutMs = 5_000): Promise<void> {
      if (seen.includes(message)) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`no "${message}" on the bus within ${timeoutMs} ms`)),
          timeoutMs,
        );
        waiters.push({
          message,
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
        });
      });
    },
  };
}

describe('API keys over gRPC (real PostgreSQL, real billing, real Redis bus)', () => {
  let database: TestDatabase;
  let redis: TestRedis;
  let billing: BillingService;
  let billingClient: ServiceClient<typeof BillingRpc>;
  let admin: AdminService;
  let client: ServiceClient<typeof AdminRpc>;
  let listener: RedisBus;
  let listenerPub: ReturnType<typeof createRedis> | undefined;
  const revoked = collector();
  const clock = new ManualClock(Date.parse('2026-11-23T09:00:00Z'));
  let seq = 0;

  beforeAll(async () => {
    database = await createTestDatabase('adminkeys');
    redis = createTestRedis('adminkeys');
    billing = await startBilling(database.url);
    billingClient = connect(BillingRpc, `127.0.0.1:${billing.port}`);
    admin = await createAdmin(
      database.url,
      `127.0.0.1:${billing.port}`,
      { ADMIN_REDIS_URL: redis.url, ADMIN_REDIS_PREFIX: redis.prefix },
      { clock },
    );
    await admin.start();
    client = connect(AdminRpc, `127.0.0.1:${admin.port}`);
    // A gateway's view of the bus: its own connections, the same prefix.
    const logger = testLogger('listener');
    listenerPub = createRedis(redis, logger, 'listener-pub');
    listener = new RedisBus(listenerPub, createRedis(redis, logger, 'listener-sub'), redis.prefix);
    await listener.subscribe(BUS_CHANNELS.apiKeysRevoked, revoked.handler);
  });

  afterAll(async () => {
    client?.close();
    billingClient?.close();
    await listener?.close();
    listenerPub?.disconnect();
    await admin?.destroy();
    await billing?.destroy();
    await redis?.clean();
    await database?.drop();
  });

  /** A fresh tenant (free plan unless told), its owner's principal and one project. */
  async function newTenant(label: string, options: { plan?: 'pro'; environment?: string } = {}) {
    const email = `${label}-${++seq}@example.com`;
    const signedUp = await client.signup({ email, password: PASSWORD, tenantName: `${label} inc` });
    const tenantId = signedUp.tenant?.id ?? '';
    if (options.plan) await billingClient.setPlan({ tenantId, planId: options.plan });
    const session = await client.login({ email, password: PASSWORD, clientIp: '' });
    const { principal } = await client.authenticate({ token: session.token });
    if (!principal) throw new Error('no principal');
    const { project } = await client.createProject({
      principal,
      name: 'main',
      environment: options.environment ?? '',
    });
    if (!project) throw new Error('no project');
    return { email, tenantId, principal, projectId: project.id };
  }

  async function create(
    principal: Principal,
    projectId: string,
    fields: Partial<{ name: string; mode: string; scopes: string[] }> = {},
  ) {
    const res = await client.createApiKey({
      principal,
      projectId,
      name: '',
      mode: '',
      scopes: [],
      ...fields,
    });
    if (!res.apiKey) throw new Error('no api key');
    return { key: res.key, apiKey: res.apiKey };
  }

  async function activeKeyCount(tenantId: string): Promise<number> {
    const { rows } = await sql<{ count: string }>`
      select count(*) as count from admin.api_keys where tenant_id = ${tenantId} and revoked_at is null
    `.execute(admin.database.db);
    return Number(rows[0]?.count);
  }

  describe('creation', () => {
    it('creates a live key by default: svc_live_ + 64 hex, with its prefix, last four and every scope', async () => {
      const { principal, tenantId, projectId } = await newTenant('create');
      const { key, apiKey } = await create(principal, projectId, { name: '  ci deploy  ' });
      expect(key).toMatch(/^svc_live_[0-9a-f]{64}$/);
      expect(apiKey.id).toMatch(/^key_[0-9a-z]{20}$/);
      expect(apiKey).toMatchObject({
        projectId,
        tenantId,
        name: 'ci deploy',
        mode: 'live',
        displayPrefix: key.slice(0, 13),
        lastFour: key.slice(-4),
        scopes: ALL_SCOPES,
      });
      expect(apiKey.displayPrefix).toMatch(/^svc_live_[0-9a-f]{4}$/);
      expect(seconds(apiKey.createdAt)).toBe(clock.now().getTime() / 1000);
      expect(apiKey.lastUsedAt).toBeUndefined();
      expect(apiKey.revokedAt).toBeUndefined();
    });

    it('creates a test key when asked, and never the same key twice', async () => {
      const { principal, projectId } = await newTenant('testmode', { plan: 'pro' });
      const a = await create(principal, projectId, { mode: 'test' });
      const b = await create(principal, projectId, { mode: 'test' });
      expect(a.key).toMatch(/^svc_test_[0-9a-f]{64}$/);
      expect(a.apiKey).toMatchObject({ mode: 'test', displayPrefix: a.key.slice(0, 13) });
      expect(a.apiKey.displayPrefix.startsWith('svc_test_')).toBe(true);
      expect(b.key).not.toBe(a.key);
      expect(b.apiKey.id).not.toBe(a.apiKey.id);
    });

    it('stores only the SHA-256 of the key: the key appears in no column', async () => {
      const { principal, projectId } = await newTenant('storage');
      const { key, apiKey } = await create(principal, projectId, { name: 'stored' });
      const { rows } = await sql<
        Record<string, unknown>
      >`select * from admin.api_keys where id = ${apiKey.id}`.execute(admin.database.db);
      expect(rows).toHaveLength(1);
      const row = rows[0] ?? {};
      expect(row.key_hash).toBe(sha256(key));
      expect(row).toMatchObject({
        display_prefix: key.slice(0, 13),
        last_four: key.slice(-4),
        scopes: ALL_SCOPES,
        mode: 'live',
      });
      const secretPart = key.slice('svc_live_'.length);
      for (const [column, value] of Object.entries(row)) {
        const text = JSON.stringify(value) ?? '';
        expect(text, column).not.toContain(key);
        expect(text, column).not.toContain(secretPart);
      }
      // The whole table as text, every row: not the key, not its random part.
      const all = await sql<{ row: string }>`select api_keys::text as row from admin.api_keys`.execute(
        admin.database.db,
      );
      expect(all.rows.length).toBeGreaterThan(0);
      expect(all.rows.some((r) => r.row.includes(secretPart))).toBe(false);
    });

    it('answers invalid_request for a mode other than live or test, storing nothing', async () => {
      const { principal, tenantId, projectId } = await newTenant('badmode');
      await expectAppError(
        client.createApiKey({ principal, projectId, name: '', mode: 'prod', scopes: [] }),
        'invalid_request',
        'mode must be one of live, test',
      );
      expect(await activeKeyCount(tenantId)).toBe(0);
    });

    it('removes duplicate scopes and stores them sorted', async () => {
      const { principal, projectId } = await newTenant('scopes');
      const { apiKey } = await create(principal, projectId, {
        scopes: ['relay:subscribe', 'relay:publish', 'relay:subscribe'],
      });
      expect(apiKey.scopes).toEqual(['relay:publish', 'relay:subscribe']);
      const { apiKeys } = await client.listApiKeys({ principal, projectId });
      expect(apiKeys[0]?.scopes).toEqual(['relay:publish', 'relay:subscribe']);
    });

    it('rejects an unknown scope naming it, storing nothing', async () => {
      const { principal, tenantId, projectId } = await newTenant('badscope');
      await expectAppError(
        client.createApiKey({
          principal,
          projectId,
          name: '',
          mode: '',
          scopes: ['relay:session', 'relay:admin'],
        }),
        'invalid_request',
        'unknown scope "relay:admin"; known scopes are relay:session, relay:publish, relay:subscribe',
      );
      expect(await activeKeyCount(tenantId)).toBe(0);
    });

    it.each([
      ['x'.repeat(65), 'name must be at most 64 characters'],
      ['ci\ndeploy', 'name must contain only printable characters'],
    ])('rejects the name %j', async (name, message) => {
      const { principal, projectId } = await newTenant('badname');
      await expectAppError(
        client.createApiKey({ principal, projectId, name, mode: '', scopes: [] }),
        'invalid_request',
        message,
      );
    });

    it('accepts a name of 64 characters', async () => {
      const { principal, projectId } = await newTenant('longname');
      const { apiKey } = await create(principal, projectId, { name: 'n'.repeat(64) });
      expect(apiKey.name).toBe('n'.repeat(64));
    });
  });

  describe('listing', () => {
    it("lists the project's keys newest first, with prefix, last four, scopes and times, never a key", async () => {
      const { principal, projectId } = await newTenant('list', { plan: 'pro' });
      const { project: other } = await client.createProject({ principal, name: 'other', environment: '' });
      const first = await create(principal, projectId, { name: 'first' });
      clock.advance(1_000);
      const second = await create(principal, projectId, { name: 'second', scopes: ['relay:session'] });
      clock.advance(1_000);
      const elsewhere = await create(principal, other?.id ?? '', { name: 'elsewhere' });
      clock.advance(1_000);
      await client.verifyApiKey({ keyHash: sha256(first.key) });
      const revokedAt = clock.now();
      await client.revokeApiKey({ principal, projectId, keyId: second.apiKey.id });

      const { apiKeys } = await client.listApiKeys({ principal, projectId });
      expect(apiKeys.map((k) => k.name)).toEqual(['second', 'first']);
      const [listedSecond, listedFirst] = apiKeys as [ApiKey, ApiKey];
      expect(listedFirst).toMatchObject({
        id: first.apiKey.id,
        projectId,
        displayPrefix: first.key.slice(0, 13),
        lastFour: first.key.slice(-4),
        scopes: ALL_SCOPES,
      });
      expect(seconds(listedFirst.createdAt)).toBe(seconds(first.apiKey.createdAt));
      expect(seconds(listedFirst.lastUsedAt)).toBe(revokedAt.getTime() / 1000);
      expect(listedFirst.revokedAt).toBeUndefined();
      expect(listedSecond).toMatchObject({ scopes: ['relay:session'], lastFour: second.key.slice(-4) });
      expect(listedSecond.lastUsedAt).toBeUndefined();
      expect(seconds(listedSecond.revokedAt)).toBe(revokedAt.getTime() / 1000);

      const text = JSON.stringify(apiKeys, (_k, v) => (typeof v === 'bigint' ? String(v) : v));
      for (const { key } of [first, second, elsewhere]) expect(text).not.toContain(key.slice(13, -4));
      expect(text).not.toContain(elsewhere.apiKey.id);
    });

    it('answers an empty list for a project without keys', async () => {
      const { principal, projectId } = await newTenant('empty');
      expect((await client.listApiKeys({ principal, projectId })).apiKeys).toEqual([]);
    });
  });

  describe("the plan's API key limit", () => {
    it('refuses a third active key on the free plan with payment_required, until one is revoked', async () => {
      const { principal, tenantId, projectId } = await newTenant('limit');
      const { project: second } = await client.createProject({ principal, name: 'second', environment: '' });
      // The limit is per tenant: keys in different projects count together.
      const a = await create(principal, projectId);
      await create(principal, second?.id ?? '');
      const message =
        'the free plan allows at most 2 active API keys (max_api_keys); upgrade the plan to create more';
      await expectAppError(
        client.createApiKey({ principal, projectId, name: '', mode: '', scopes: [] }),
        'payment_required',
        message,
      );
      expect(await activeKeyCount(tenantId)).toBe(2);

      await client.revokeApiKey({ principal, projectId, keyId: a.apiKey.id });
      const c = await create(principal, projectId, { name: 'after revoke' });
      expect(c.apiKey.name).toBe('after revoke');
      await expectAppError(
        client.createApiKey({ principal, projectId, name: '', mode: '', scopes: [] }),
        'payment_required',
        message,
      );
      // Revoked keys are still listed; they only stop counting.
      expect((await client.listApiKeys({ principal, projectId })).apiKeys).toHaveLength(2);

      await billingClient.setPlan({ tenantId, planId: 'pro' });
      await expect(create(principal, projectId)).resolves.toBeDefined();
      expect(await activeKeyCount(tenantId)).toBe(3);
    });

    it('never lets 10 concurrent creations exceed the limit', async () => {
      const { principal, tenantId, projectId } = await newTenant('concurrent');
      const results = await Promise.allSettled(
        Array.from({ length: 10 }, (_, i) =>
          client.createApiKey({ principal, projectId, name: `k${i}`, mode: '', scopes: [] }),
        ),
      );
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(2);
      const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      expect(refused).toHaveLength(8);
      for (const r of refused) expect(r.reason).toMatchObject({ code: 'payment_required' });
      expect(await activeKeyCount(tenantId)).toBe(2);
    });
  });

  describe('access', () => {
    it('lets a viewer list keys but not create or revoke them', async () => {
      const owner = await newTenant('vowner');
      const { key, apiKey } = await create(owner.principal, owner.projectId);
      const viewer = await newTenant('viewer');
      await admin.accounts.addMembership(owner.tenantId, viewer.principal.userId, 'viewer', new Date(0));
      const login = await client.login({ email: viewer.email, password: PASSWORD, clientIp: '' });
      const { principal } = await client.authenticate({ token: login.token });
      if (!principal) throw new Error('no principal');
      expect(principal.tenantId).toBe(owner.tenantId);

      const forbidden = 'your role (viewer) does not grant permission api_keys:write';
      await expectAppError(
        client.createApiKey({ principal, projectId: owner.projectId, name: '', mode: '', scopes: [] }),
        'forbidden',
        forbidden,
      );
      await expectAppError(
        client.revokeApiKey({ principal, projectId: owner.projectId, keyId: apiKey.id }),
        'forbidden',
        forbidden,
      );
      const { apiKeys } = await client.listApiKeys({ principal, projectId: owner.projectId });
      expect(apiKeys.map((k) => k.id)).toEqual([apiKey.id]);
      await expect(client.verifyApiKey({ keyHash: sha256(key) })).resolves.toMatchObject({
        apiKey: { id: apiKey.id },
      });
    });

    it("answers not_found for another tenant's project and key, never forbidden", async () => {
      const a = await newTenant('tenanta');
      const b = await newTenant('tenantb');
      const { key, apiKey } = await create(a.principal, a.projectId);

      await expectAppError(
        client.listApiKeys({ principal: b.principal, projectId: a.projectId }),
        'not_found',
        'project not found',
      );
      await expectAppError(
        client.createApiKey({
          principal: b.principal,
          projectId: a.projectId,
          name: '',
          mode: '',
          scopes: [],
        }),
        'not_found',
        'project not found',
      );
      await expectAppError(
        client.revokeApiKey({ principal: b.principal, projectId: a.projectId, keyId: apiKey.id }),
        'not_found',
        'project not found',
      );
      // B's own project, A's key id.
      await expectAppError(
        client.revokeApiKey({ principal: b.principal, projectId: b.projectId, keyId: apiKey.id }),
        'not_found',
        'API key not found',
      );
      for (const projectId of [newId('project'), 'not-an-id', '']) {
        await expectAppError(
          client.listApiKeys({ principal: a.principal, projectId }),
          'not_found',
          'project not found',
        );
      }
      await expectAppError(
        client.revokeApiKey({ principal: a.principal, projectId: a.projectId, keyId: newId('apiKey') }),
        'not_found',
        'API key not found',
      );
      expect(await activeKeyCount(b.tenantId)).toBe(0);
      await expect(client.verifyApiKey({ keyHash: sha256(key) })).resolves.toMatchObject({
        apiKey: { id: apiKey.id },
      });
      expect(revoked.seen).not.toContain(sha256(key));
    });

    it('refuses calls without a live session principal', async () => {
      const { principal, projectId } = await newTenant('nosession');
      await expectAppError(
        client.createApiKey({ projectId, name: '', mode: '', scopes: [] }),
        'unauthenticated',
        INVALID_TOKEN_MESSAGE,
      );
      await expectAppError(client.listApiKeys({ projectId }), 'unauthenticated', INVALID_TOKEN_MESSAGE);
      await client.logout({ principal });
      await expectAppError(
        client.revokeApiKey({ principal, projectId, keyId: newId('apiKey') }),
        'unauthenticated',
        INVALID_TOKEN_MESSAGE,
      );
    });
  });

  describe('revocation', () => {
    it('revokes idempotently and announces the hash on api-keys.revoked', async () => {
      const { principal, projectId } = await newTenant('revoke');
      const { key, apiKey } = await create(principal, projectId);
      const hash = sha256(key);
      expect(revoked.seen).not.toContain(hash);

      clock.advance(5_000);
      const revokedAt = clock.now().getTime() / 1000;
      const first = await client.revokeApiKey({ principal, projectId, keyId: apiKey.id });
      await revoked.waitFor(hash);
      expect(first.apiKey).toMatchObject({ id: apiKey.id, lastFour: key.slice(-4) });
      expect(seconds(first.apiKey?.revokedAt)).toBe(revokedAt);

      clock.advance(5_000);
      const again = await client.revokeApiKey({ principal, projectId, keyId: apiKey.id });
      expect(seconds(again.apiKey?.revokedAt)).toBe(revokedAt);

      await expectAppError(client.verifyApiKey({ keyHash: hash }), 'unauthenticated', INVALID_TOKEN_MESSAGE);
      const { apiKeys } = await client.listApiKeys({ principal, projectId });
      expect(seconds(apiKeys[0]?.revokedAt)).toBe(revokedAt);
    });

    it('publishes on a bus passed in by the composition root, and leaves it open on destroy', async () => {
      const bus = new MemoryBus();
      const seen = collector();
      await bus.subscribe(BUS_CHANNELS.apiKeysRevoked, seen.handler);
      const embedded = await createAdmin(database.url, `127.0.0.1:${billing.port}`, {}, { clock, bus });
      await embedded.start();
      const embeddedClient = connect(AdminRpc, `127.0.0.1:${embedded.port}`);
      try {
        const { principal, projectId } = await newTenant('ownbus');
        const { key, apiKey } = await create(principal, projectId);
        await embeddedClient.revokeApiKey({ principal, projectId, keyId: apiKey.id });
        await seen.waitFor(sha256(key));
      } finally {
        embeddedClient.close();
        await embedded.destroy();
      }
      // Still open: its subscribers still hear what is published on it.
      await bus.publish(BUS_CHANNELS.apiKeysRevoked, 'after-destroy');
      await seen.waitFor('after-destroy');
      await bus.close();
    });

    it('keeps a committed revocation when the announcement fails', async () => {
      let attempts = 0;
      const failing = {
        publish: async () => {
          attempts++;
          throw new Error('bus down');
        },
        subscribe: async () => async () => {},
        close: async () => {},
      };
      const other = await createAdmin(database.url, `127.0.0.1:${billing.port}`, {}, { clock, bus: failing });
      await other.start();
      const otherClient = connect(AdminRpc, `127.0.0.1:${other.port}`);
      try {
        const { principal, projectId } = await newTenant('busdown');
        const { key, apiKey } = await create(principal, projectId);
        const res = await otherClient.revokeApiKey({ principal, projectId, keyId: apiKey.id });
        expect(res.apiKey?.revokedAt).toBeDefined();
        expect(attempts).toBe(1);
        await expectAppError(
          client.verifyApiKey({ keyHash: sha256(key) }),
          'unauthenticated',
          INVALID_TOKEN_MESSAGE,
        );
      } finally {
        otherClient.close();
        await other.destroy();
      }
    });
  });

  describe('verification', () => {
    it("resolves an active key's hash to the key and its project's environment", async () => {
      const { principal, tenantId, projectId } = await newTenant('verify', { environment: 'staging' });
      const { key, apiKey } = await create(principal, projectId, {
        mode: 'test',
        scopes: ['relay:session'],
        name: 'gw',
      });
      const res = await client.verifyApiKey({ keyHash: sha256(key) });
      expect(res.projectEnvironment).toBe('staging');
      expect(res.apiKey).toMatchObject({
        id: apiKey.id,
        projectId,
        tenantId,
        name: 'gw',
        mode: 'test',
        scopes: ['relay:session'],
        displayPrefix: key.slice(0, 13),
        lastFour: key.slice(-4),
      });
      expect(res.apiKey?.revokedAt).toBeUndefined();
    });

    it('answers an unknown hash with invalid or expired token', async () => {
      await expectAppError(
        client.verifyApiKey({ keyHash: sha256(`svc_live_${'0'.repeat(64)}`) }),
        'unauthenticated',
        INVALID_TOKEN_MESSAGE,
      );
    });

    it.each([
      ['empty', ''],
      ['uppercase', 'A'.repeat(64)],
      ['too short', 'a'.repeat(63)],
      ['too long', 'a'.repeat(65)],
      ['the raw key', `svc_live_${'a'.repeat(64)}`],
    ])('rejects a malformed hash (%s) with invalid_request', async (_label, keyHash) => {
      await expectAppError(
        client.verifyApiKey({ keyHash }),
        'invalid_request',
        'key_hash must be a lowercase hex SHA-256 (64 characters)',
      );
    });

    it('records last_used_at on verification, at most once a minute', async () => {
      const { principal, projectId } = await newTenant('lastused');
      const { key, apiKey } = await create(principal, projectId);
      const hash = sha256(key);
      const lastUsed = async () => {
        const { apiKeys } = await client.listApiKeys({ principal, projectId });
        return seconds(apiKeys.find((k) => k.id === apiKey.id)?.lastUsedAt);
      };
      expect(await lastUsed()).toBeUndefined();

      clock.advance(10_000);
      const firstUse = clock.now().getTime() / 1000;
      const first = await client.verifyApiKey({ keyHash: hash });
      expect(seconds(first.apiKey?.lastUsedAt)).toBe(firstUse);
      expect(await lastUsed()).toBe(firstUse);

      clock.advance(30_000);
      const soon = await client.verifyApiKey({ keyHash: hash });
      expect(seconds(soon.apiKey?.lastUsedAt)).toBe(firstUse);
      expect(await lastUsed()).toBe(firstUse);

      clock.advance(31_000);
      const later = clock.now().getTime() / 1000;
      const afterMinute = await client.verifyApiKey({ keyHash: hash });
      expect(seconds(afterMinute.apiKey?.lastUsedAt)).toBe(later);
      expect(await lastUsed()).toBe(later);
    });
  });
});
