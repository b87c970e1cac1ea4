import { createServer } from 'node:net';
import type { BillingService } from '@relayplane/billing';
import { AdminService as AdminRpc } from '@relayplane/proto/admin';
import { BillingService as BillingRpc } from '@relayplane/proto/billing';
import { HealthService, ServingStatus } from '@relayplane/shared/health';
import { connect } from '@relayplane/shared/rpc';
import { createTestDatabase, type TestDatabase } from '@relayplane/testing/storage';
import { afterEach, describe, expect, it } from 'vitest';
import type { AdminService } from '../src/service.ts';
import { captureLogs, createAdmin, OWNER_EMAIL, OWNER_PASSWORD, startBilling } from './support/harness.ts';

const BOOTSTRAP = { RELAYPLANE_BOOTSTRAP_EMAIL: OWNER_EMAIL, RELAYPLANE_BOOTSTRAP_PASSWORD: OWNER_PASSWORD };
/** Logged once when the bootstrap step first fails (start-up retries it: serving.ts). */
const BOOTSTRAP_WAITING = 'bootstrap owner: waiting for a dependency, retrying with backoff';

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

describe('bootstrap owner (real PostgreSQL, real billing)', () => {
  const cleanup: (() => Promise<void>)[] = [];

  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn();
  });

  async function freshDatabase(): Promise<TestDatabase> {
    const database = await createTestDatabase('adminboot');
    cleanup.push(() => database.drop());
    return database;
  }

  function track<T extends AdminService | BillingService>(service: T): T {
    cleanup.push(() => service.destroy());
    return service;
  }

  it('creates exactly one owner when several replicas start at once', async () => {
    const database = await freshDatabase();
    const billing = track(await startBilling(database.url));
    const replicas = await Promise.all(
      ['a', 'b', 'c', 'd'].map(async (name) =>
        track(
          await createAdmin(database.url, `127.0.0.1:${billing.port}`, {
            RELAYPLANE_BOOTSTRAP_EMAIL: `owner-${name}@example.com`,
            RELAYPLANE_BOOTSTRAP_PASSWORD: OWNER_PASSWORD,
          }),
        ),
      ),
    );
    await Promise.all(replicas.map((r) => r.start()));
    const db = replicas[0]?.database.db;
    if (!db) throw new Error('no replica');
    expect(await db.selectFrom('users').select(['platform_admin']).execute()).toEqual([
      { platform_admin: true },
    ]);
    expect(await db.selectFrom('tenants').select('id').execute()).toHaveLength(1);
    expect(await db.selectFrom('memberships').select('role').execute()).toEqual([{ role: 'owner' }]);
  });

  it('logs the owner email once and never the password', async () => {
    const database = await freshDatabase();
    const billing = track(await startBilling(database.url));
    const logs = captureLogs();
    const admin = track(
      await createAdmin(database.url, `127.0.0.1:${billing.port}`, BOOTSTRAP, { logger: logs.logger }),
    );
    await admin.start();
    const entry = await logs.waitFor('bootstrap owner created');
    expect(entry).toMatchObject({ email: OWNER_EMAIL, plan: 'enterprise', tenant: 'default' });
    expect(logs.lines.join('\n')).not.toContain(OWNER_PASSWORD);
  });

  it('waits for a billing service that starts after admin, then sets the plan', async () => {
    const database = await freshDatabase();
    const port = await freePort();
    const logs = captureLogs();
    const admin = track(
      await createAdmin(
        database.url,
        `127.0.0.1:${port}`,
        { ...BOOTSTRAP, RELAYPLANE_BOOTSTRAP_PLAN: 'pro' },
        { logger: logs.logger },
      ),
    );
    const started = admin.start();
    await logs.waitFor(BOOTSTRAP_WAITING);
    expect(await admin.database.db.selectFrom('users').select('id').execute()).toEqual([]);

    const billing = track(await startBilling(database.url, `127.0.0.1:${port}`));
    await started;
    const tenant = await admin.database.db.selectFrom('tenants').select('id').executeTakeFirstOrThrow();
    const billingClient = connect(BillingRpc, `127.0.0.1:${billing.port}`);
    try {
      const sub = await billingClient.getSubscription({ tenantId: tenant.id });
      expect(sub.subscription?.planId).toBe('pro');
    } finally {
      billingClient.close();
    }
    const client = connect(AdminRpc, `127.0.0.1:${admin.port}`);
    try {
      const res = await client.login({ email: OWNER_EMAIL, password: OWNER_PASSWORD, clientIp: '' });
      expect(res.session?.user?.platformAdmin).toBe(true);
    } finally {
      client.close();
    }
  });

  it('waits as long as billing is away: alive but not ready, answering unavailable, creating nothing; destroy() ends the wait', async () => {
    const database = await freshDatabase();
    const port = await freePort();
    const logs = captureLogs();
    const admin = await createAdmin(database.url, `127.0.0.1:${port}`, BOOTSTRAP, { logger: logs.logger });
    const started = admin.start();
    // Settles either way; the assertion on it comes after destroy().
    const outcome = started.then(
      () => 'started',
      (err: Error) => err.message,
    );
    await logs.waitFor(BOOTSTRAP_WAITING);
    const health = connect(HealthService, `127.0.0.1:${admin.port}`);
    const client = connect(AdminRpc, `127.0.0.1:${admin.port}`);
    try {
      expect((await health.check({ service: '' })).status).toBe(ServingStatus.SERVING);
      expect((await health.check({ service: AdminRpc.typeName })).status).toBe(ServingStatus.NOT_SERVING);
      await expect(
        client.login({ email: OWNER_EMAIL, password: OWNER_PASSWORD, clientIp: '' }),
      ).rejects.toMatchObject({ code: 'unavailable' });
    } finally {
      health.close();
      client.close();
    }
    expect(await admin.database.db.selectFrom('users').select('id').execute()).toEqual([]);
    expect(await admin.database.db.selectFrom('tenants').select('id').execute()).toEqual([]);
    await admin.destroy();
    expect(await outcome).toMatch(/admin is stopping/);
  });
});
