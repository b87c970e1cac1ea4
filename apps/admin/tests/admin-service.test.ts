import { createHash } from 'node:crypto';
import type { BillingService } from '@relayplane/billing';
import { INVALID_TOKEN_MESSAGE } from '@relayplane/contract/errors';
import { newId } from '@relayplane/contract/ids';
import { newToken } from '@relayplane/contract/tokens';
import { AdminService as AdminRpc, type Principal, PrincipalKind, TenantRole } from '@relayplane/proto/admin';
import type { BillingService as BillingRpc } from '@relayplane/proto/billing';
import { ManualClock } from '@relayplane/shared/clock';
import { HealthService, ServingStatus } from '@relayplane/shared/health';
import { connect, type ServiceClient } from '@relayplane/shared/rpc';
import type { TestDatabase } from '@relayplane/testing/storage';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AdminService } from '../src/service.ts';
import { ProjectStore } from '../src/stores/projects.ts';
import {
  type AdminRig,
  createAdmin,
  expectAppError,
  OWNER_EMAIL,
  OWNER_PASSWORD,
  startAdminRig,
} from './support/harness.ts';

const TTL_SECONDS = 3_600;
const PASSWORD = 'a long enough password';

describe('admin service over gRPC (real PostgreSQL, real billing)', () => {
  let rig: AdminRig | undefined;
  let database: TestDatabase;
  let billing: BillingService;
  let billingClient: ServiceClient<typeof BillingRpc>;
  let admin: AdminService;
  let client: ServiceClient<typeof AdminRpc>;
  const clock = new ManualClock(Date.parse('2026-11-22T12:00:00Z'));
  let seq = 0;
  const uniqueEmail = (label: string) => `${label}-${++seq}@example.com`;

  beforeAll(async () => {
    rig = await startAdminRig(
      'admin',
      {
        RELAYPLANE_BOOTSTRAP_EMAIL: ` ${OWNER_EMAIL.toUpperCase()} `,
        RELAYPLANE_BOOTSTRAP_PASSWORD: OWNER_PASSWORD,
        RELAYPLANE_BOOTSTRAP_TENANT: 'Acme Ops',
        RELAYPLANE_BOOTSTRAP_PLAN: 'pro',
        ADMIN_SESSION_TTL_SECONDS: String(TTL_SECONDS),
      },
      { clock },
    );
    ({ database, billing, billingClient, admin, client } = rig);
  });

  afterAll(async () => {
    await rig?.close();
  });

  /** Signs up a fresh tenant and logs its owner in. */
  async function newTenant(label: string, plan?: 'pro') {
    const email = uniqueEmail(label);
    const signedUp = await client.signup({ email, password: PASSWORD, tenantName: `${label} inc` });
    if (plan) await billingClient.setPlan({ tenantId: signedUp.tenant?.id ?? '', planId: plan });
    const session = await client.login({ email, password: PASSWORD, clientIp: '127.0.0.1' });
    const { principal } = await client.authenticate({ token: session.token });
    if (!principal) throw new Error('no principal');
    return { email, tenantId: signedUp.tenant?.id ?? '', token: session.token, principal };
  }

  describe('bootstrap', () => {
    it('creates the bootstrap tenant with one owner who is a platform admin', async () => {
      const db = admin.database.db;
      const users = await db.selectFrom('users').selectAll().execute();
      expect(users).toHaveLength(1);
      expect(users[0]).toMatchObject({ email: OWNER_EMAIL, platform_admin: true });
      const tenants = await db.selectFrom('tenants').selectAll().execute();
      expect(tenants.map((t) => t.name)).toEqual(['Acme Ops']);
      const memberships = await db.selectFrom('memberships').selectAll().execute();
      expect(memberships).toEqual([
        expect.objectContaining({ tenant_id: tenants[0]?.id, user_id: users[0]?.id, role: 'owner' }),
      ]);
    });

    it('puts the bootstrap tenant on the configured plan in billing', async () => {
      const tenant = await admin.database.db.selectFrom('tenants').select('id').executeTakeFirstOrThrow();
      const sub = await billingClient.getSubscription({ tenantId: tenant.id });
      expect(sub.subscription?.planId).toBe('pro');
    });

    it('lets the bootstrap owner log in as an owner and platform admin', async () => {
      const res = await client.login({ email: OWNER_EMAIL, password: OWNER_PASSWORD, clientIp: '' });
      expect(res.session?.role).toBe(TenantRole.OWNER);
      expect(res.session?.tenant?.name).toBe('Acme Ops');
      const { principal } = await client.authenticate({ token: res.token });
      expect(principal).toMatchObject({ platformAdmin: true, role: TenantRole.OWNER });
    });

    it('does not create another owner when a later start finds a user', async () => {
      const second = await createAdmin(database.url, `127.0.0.1:${billing.port}`, {
        RELAYPLANE_BOOTSTRAP_EMAIL: 'someone-else@example.com',
        RELAYPLANE_BOOTSTRAP_PASSWORD: 'another password 123',
      });
      await second.start();
      expect(second.bootstrapped).toBe(false);
      expect(admin.bootstrapped).toBe(true);
      await second.destroy();
      const bootstrapped = await admin.database.db
        .selectFrom('users')
        .select('email')
        .where('platform_admin', '=', true)
        .execute();
      expect(bootstrapped).toEqual([{ email: OWNER_EMAIL }]);
      await expectAppError(
        client.login({ email: 'someone-else@example.com', password: 'another password 123', clientIp: '' }),
        'unauthenticated',
      );
    });
  });

  describe('signup', () => {
    it('creates a tenant and its owner, who is not a platform admin', async () => {
      const email = uniqueEmail('signup');
      const res = await client.signup({ email, password: PASSWORD, tenantName: '  Globex  ' });
      expect(res.user).toMatchObject({ email, platformAdmin: false });
      expect(res.user?.id).toMatch(/^usr_/);
      expect(res.tenant).toMatchObject({ name: 'Globex' });
      expect(res.tenant?.id).toMatch(/^ten_/);
      const login = await client.login({ email, password: PASSWORD, clientIp: '' });
      expect(login.session).toMatchObject({ role: TenantRole.OWNER, tenant: { id: res.tenant?.id } });
    });

    it('does not give a signed-up tenant a billing subscription (free is the default)', async () => {
      const { tenantId } = await newTenant('free');
      const sub = await billingClient.getSubscription({ tenantId });
      expect(sub.subscription?.planId).toBe('free');
      expect(sub.subscription?.updatedAt).toBeUndefined();
    });

    it('stores the password as an argon2id hash with the OWASP parameters, never the password', async () => {
      const { email } = await newTenant('hash');
      const row = await admin.database.db
        .selectFrom('users')
        .select('password_hash')
        .where('email', '=', email)
        .executeTakeFirstOrThrow();
      expect(row.password_hash.startsWith('$argon2id$')).toBe(true);
      const params = row.password_hash.split('$')[3]?.split(',').sort();
      expect(params).toEqual(['m=19456', 'p=1', 't=2']);
      expect(row.password_hash).not.toContain(PASSWORD);
    });

    it('rejects an email already registered, whatever its case', async () => {
      const email = uniqueEmail('dup');
      await client.signup({ email, password: PASSWORD, tenantName: 'first' });
      await expectAppError(
        client.signup({ email: email.toUpperCase(), password: PASSWORD, tenantName: 'second' }),
        'conflict',
        'email is already registered',
      );
      const tenants = await admin.database.db
        .selectFrom('tenants')
        .select('id')
        .where('name', '=', 'second')
        .execute();
      expect(tenants).toEqual([]);
    });

    it.each([
      [{ email: 'not-an-email' }, 'email is not a valid address'],
      [{ email: '' }, 'email is required'],
      [{ password: 'short' }, 'password must be 12 to 256 characters long'],
      [{ password: 'x'.repeat(257) }, 'password must be 12 to 256 characters long'],
      [{ tenantName: '   ' }, 'tenant_name is required'],
      [{ tenantName: 'x'.repeat(65) }, 'tenant_name must be at most 64 characters'],
      [{ tenantName: 'bad\u0007name' }, 'tenant_name must contain only printable characters'],
    ])('rejects %j with invalid_request', async (bad, message) => {
      const req = { email: uniqueEmail('bad'), password: PASSWORD, tenantName: 'ok', ...bad };
      await expectAppError(client.signup(req), 'invalid_request', message);
    });

    it('answers forbidden when signup is disabled', async () => {
      const closed = await createAdmin(database.url, `127.0.0.1:${billing.port}`, {
        RELAYPLANE_SIGNUP_ENABLED: 'false',
      });
      await closed.start();
      const closedClient = connect(AdminRpc, `127.0.0.1:${closed.port}`);
      try {
        const email = uniqueEmail('closed');
        await expectAppError(
          closedClient.signup({ email, password: PASSWORD, tenantName: 'closed' }),
          'forbidden',
          'signup is disabled',
        );
        const users = await admin.database.db
          .selectFrom('users')
          .select('id')
          .where('email', '=', email)
          .execute();
        expect(users).toEqual([]);
      } finally {
        closedClient.close();
        await closed.destroy();
      }
    });
  });

  describe('login, authenticate, logout', () => {
    it('logs in, authenticates the token to a user-session principal and logs out', async () => {
      const email = uniqueEmail('flow');
      const { user, tenant } = await client.signup({ email, password: PASSWORD, tenantName: 'Flow' });
      const login = await client.login({
        email: email.toUpperCase(),
        password: PASSWORD,
        clientIp: '10.0.0.1',
      });
      expect(login.token).toMatch(/^rpu_[0-9a-f]{72}$/);
      expect(login.session).toMatchObject({
        user: { id: user?.id, email },
        tenant: { id: tenant?.id, name: 'Flow' },
        role: TenantRole.OWNER,
      });
      expect(login.session?.id).toMatch(/^ses_/);
      const created = Number(login.session?.createdAt?.seconds);
      expect(created).toBe(clock.now().getTime() / 1000);
      expect(Number(login.session?.expiresAt?.seconds)).toBe(created + TTL_SECONDS);

      const auth = await client.authenticate({ token: login.token });
      expect(auth.principal).toMatchObject({
        kind: PrincipalKind.USER_SESSION,
        userId: user?.id,
        tenantId: tenant?.id,
        role: TenantRole.OWNER,
        platformAdmin: false,
        sessionId: login.session?.id,
      });
      expect(auth.session?.id).toBe(login.session?.id);

      await client.logout({ principal: auth.principal });
      await expectAppError(
        client.authenticate({ token: login.token }),
        'unauthenticated',
        INVALID_TOKEN_MESSAGE,
      );
      // Idempotent: logging out an ended session succeeds.
      await client.logout({ principal: auth.principal });
    });

    it('answers a wrong password and an unknown email identically', async () => {
      const { email } = await newTenant('wrong');
      await expectAppError(
        client.login({ email, password: 'not the password!', clientIp: '' }),
        'unauthenticated',
        'invalid email or password',
      );
      await expectAppError(
        client.login({ email: uniqueEmail('nobody'), password: PASSWORD, clientIp: '' }),
        'unauthenticated',
        'invalid email or password',
      );
    });

    it('rejects a login without email or password as invalid_request', async () => {
      await expectAppError(client.login({ email: '', password: PASSWORD, clientIp: '' }), 'invalid_request');
      await expectAppError(
        client.login({ email: OWNER_EMAIL, password: '', clientIp: '' }),
        'invalid_request',
      );
    });

    it('stores only the SHA-256 of the session token', async () => {
      const { token, principal } = await newTenant('stored');
      const rows = await admin.database.db.selectFrom('sessions').selectAll().execute();
      expect(JSON.stringify(rows)).not.toContain(token);
      expect(JSON.stringify(rows)).not.toContain(token.slice(4, 68));
      const mine = rows.find((r) => r.id === principal.sessionId);
      expect(mine?.token_hash).toBe(createHash('sha256').update(token).digest('hex'));
    });

    it.each([
      ['an empty token', () => ''],
      ['a malformed token', () => 'not-a-token'],
      ['a token with a bad checksum', () => `${newToken('userSession').slice(0, -1)}x`],
      ['a well-formed token never issued', () => newToken('userSession')],
      ['a token of another kind', () => newToken('bot')],
      ['an API key', () => `svc_live_${'a'.repeat(64)}`],
    ])('rejects %s with "invalid or expired token"', async (_label, token) => {
      await expectAppError(client.authenticate({ token: token() }), 'unauthenticated', INVALID_TOKEN_MESSAGE);
    });

    it('rejects a session token from its expiry on, and the sweep deletes it', async () => {
      const { token, principal } = await newTenant('expiry');
      clock.advance(TTL_SECONDS * 1000 - 1000);
      await expect(client.authenticate({ token })).resolves.toMatchObject({
        principal: { sessionId: principal.sessionId },
      });
      clock.advance(1000);
      await expectAppError(client.authenticate({ token }), 'unauthenticated', INVALID_TOKEN_MESSAGE);
      await expectAppError(client.listProjects({ principal }), 'unauthenticated', INVALID_TOKEN_MESSAGE);

      expect(await admin.sweepExpiredSessions()).toBeGreaterThanOrEqual(1);
      const left = await admin.database.db
        .selectFrom('sessions')
        .select('id')
        .where('id', '=', principal.sessionId)
        .execute();
      expect(left).toEqual([]);
    });

    it('a replica deletes expired sessions when it starts, not only every 10 minutes', async () => {
      const { principal } = await newTenant('swept-at-start');
      clock.advance((TTL_SECONDS + 1) * 1000);
      // A second replica on the same database and clock: its start() sweeps before it serves.
      const replica = await createAdmin(database.url, `127.0.0.1:${billing.port}`, {}, { clock });
      await replica.start();
      await replica.destroy();
      const left = await admin.database.db
        .selectFrom('sessions')
        .select('id')
        .where('id', '=', principal.sessionId)
        .execute();
      expect(left).toEqual([]);
    });

    it('records when a session was last seen', async () => {
      const { token, principal } = await newTenant('seen');
      clock.advance(90_000);
      await client.authenticate({ token });
      const row = await admin.database.db
        .selectFrom('sessions')
        .select('last_seen_at')
        .where('id', '=', principal.sessionId)
        .executeTakeFirstOrThrow();
      expect(row.last_seen_at?.getTime()).toBe(clock.now().getTime());
    });
  });

  describe('projects', () => {
    it('creates a project in the active tenant, in production unless told otherwise', async () => {
      const { principal, tenantId } = await newTenant('proj');
      const { project } = await client.createProject({ principal, name: 'web-app', environment: '' });
      expect(project).toMatchObject({ name: 'web-app', tenantId, environment: 'production' });
      expect(project?.id).toMatch(/^prj_/);
      const staging = await client.createProject({ principal, name: 'web-staging', environment: 'staging' });
      expect(staging.project?.environment).toBe('staging');
    });

    const namePattern =
      'name must contain only lowercase letters, digits and hyphens, and start with a letter or digit';
    it.each([
      [{ name: '' }, 'name is required'],
      [{ name: 'x'.repeat(65) }, 'name must be at most 64 characters'],
      [{ name: '-leading' }, namePattern],
      [{ name: 'Upper' }, namePattern],
      [{ name: 'under_score' }, namePattern],
      [{ name: 'has space' }, namePattern],
      [{ name: 'ok', environment: 'prod' }, 'environment must be one of production, staging, development'],
      [
        { name: 'ok', environment: 'PRODUCTION' },
        'environment must be one of production, staging, development',
      ],
    ])('rejects %j with invalid_request', async (bad, message) => {
      const { principal } = await newTenant('badproj');
      await expectAppError(
        client.createProject({ principal, environment: '', ...bad }),
        'invalid_request',
        message,
      );
      expect((await client.listProjects({ principal })).projects).toEqual([]);
    });

    it('rejects a duplicate name in the same tenant with conflict, and allows it in another', async () => {
      const a = await newTenant('dupa');
      const b = await newTenant('dupb');
      await client.createProject({ principal: a.principal, name: 'api', environment: '' });
      await expectAppError(
        client.createProject({ principal: a.principal, name: 'api', environment: 'staging' }),
        'conflict',
        'a project named "api" already exists',
      );
      await expect(
        client.createProject({ principal: b.principal, name: 'api', environment: '' }),
      ).resolves.toMatchObject({ project: { tenantId: b.tenantId } });
    });

    it('lets exactly one of many concurrent creations of the same name succeed', async () => {
      const { principal } = await newTenant('race');
      const results = await Promise.allSettled(
        Array.from({ length: 8 }, () =>
          client.createProject({ principal, name: 'contested', environment: '' }),
        ),
      );
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      for (const r of results.filter((r) => r.status === 'rejected')) {
        expect((r as PromiseRejectedResult).reason).toMatchObject({ code: 'conflict' });
      }
    });

    it('forbids a viewer from creating projects, whatever role the principal claims', async () => {
      const owner = await newTenant('viewed');
      const viewer = await newTenant('viewer');
      // An older viewer membership in the owner's tenant makes it the viewer's active tenant at login.
      await admin.accounts.addMembership(owner.tenantId, viewer.principal.userId, 'viewer', new Date(0));
      const login = await client.login({ email: viewer.email, password: PASSWORD, clientIp: '' });
      expect(login.session).toMatchObject({ role: TenantRole.VIEWER, tenant: { id: owner.tenantId } });
      const { principal } = await client.authenticate({ token: login.token });
      if (!principal) throw new Error('no principal');

      await expectAppError(
        client.createProject({ principal, name: 'nope', environment: '' }),
        'forbidden',
        'your role (viewer) does not grant permission projects:write',
      );
      const forged: Principal = { ...principal, role: TenantRole.OWNER };
      await expectAppError(
        client.createProject({ principal: forged, name: 'nope', environment: '' }),
        'forbidden',
      );
      // A viewer may still read.
      await expect(client.listProjects({ principal })).resolves.toMatchObject({ projects: [] });
    });

    it('refuses principals that do not match a live session', async () => {
      const a = await newTenant('forge');
      const b = await newTenant('victim');
      const cases: { label: string; principal: Principal | undefined }[] = [
        { label: 'missing', principal: undefined },
        { label: 'unspecified kind', principal: { ...a.principal, kind: PrincipalKind.UNSPECIFIED } },
        { label: 'unknown session', principal: { ...a.principal, sessionId: newId('session') } },
        { label: 'other tenant', principal: { ...a.principal, tenantId: b.tenantId } },
        { label: 'other user', principal: { ...a.principal, userId: b.principal.userId } },
      ];
      for (const { label, principal } of cases) {
        await expectAppError(
          client.createProject({ principal, name: `p-${label.replace(/\s/g, '-')}`, environment: '' }),
          'unauthenticated',
          INVALID_TOKEN_MESSAGE,
        );
        await expectAppError(client.listProjects({ principal }), 'unauthenticated', INVALID_TOKEN_MESSAGE);
      }
      expect((await client.listProjects({ principal: b.principal })).projects).toEqual([]);
    });

    it('does not let a forged principal log out another user', async () => {
      const a = await newTenant('logouta');
      const b = await newTenant('logoutb');
      await client.logout({ principal: { ...b.principal, userId: a.principal.userId } });
      await expect(client.authenticate({ token: b.token })).resolves.toBeDefined();
    });

    it('rejects a logged-out principal', async () => {
      const { principal } = await newTenant('gone');
      await client.logout({ principal });
      await expectAppError(
        client.createProject({ principal, name: 'late', environment: '' }),
        'unauthenticated',
        INVALID_TOKEN_MESSAGE,
      );
    });

    it("lists only the active tenant's projects, oldest first", async () => {
      const a = await newTenant('lista', 'pro');
      const b = await newTenant('listb');
      await client.createProject({ principal: a.principal, name: 'first', environment: '' });
      clock.advance(1000);
      await client.createProject({ principal: b.principal, name: 'theirs', environment: '' });
      await client.createProject({ principal: a.principal, name: 'second', environment: 'development' });
      clock.advance(1000);
      await client.createProject({ principal: a.principal, name: 'third', environment: '' });

      const listA = await client.listProjects({ principal: a.principal });
      expect(listA.projects.map((p) => p.name)).toEqual(['first', 'second', 'third']);
      expect(listA.projects.every((p) => p.tenantId === a.tenantId)).toBe(true);
      const listB = await client.listProjects({ principal: b.principal });
      expect(listB.projects.map((p) => p.name)).toEqual(['theirs']);
    });

    it("refuses a project beyond the plan's limit with unprocessable until the plan is upgraded", async () => {
      // The free plan allows 2 projects.
      const { principal, tenantId } = await newTenant('limit');
      const results = await Promise.allSettled(
        Array.from({ length: 6 }, (_, i) =>
          client.createProject({ principal, name: `p${i}`, environment: '' }),
        ),
      );
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(2);
      for (const r of results.filter((r) => r.status === 'rejected')) {
        expect((r as PromiseRejectedResult).reason).toMatchObject({
          code: 'unprocessable',
          message: 'the free plan allows at most 2 projects (max_projects); upgrade the plan to create more',
        });
      }
      expect((await client.listProjects({ principal })).projects).toHaveLength(2);

      await billingClient.setPlan({ tenantId, planId: 'pro' });
      await expect(
        client.createProject({ principal, name: 'after-upgrade', environment: '' }),
      ).resolves.toMatchObject({ project: { name: 'after-upgrade' } });
    });

    it('never lets concurrent creations overshoot the project limit', async () => {
      const { tenantId } = await newTenant('overshoot');
      const projects = new ProjectStore(admin.database.db);
      const outcomes = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          projects.create(
            {
              id: newId('project'),
              tenantId,
              name: `c${i}`,
              environment: 'production',
              createdAt: clock.now(),
            },
            3,
            (trx, project) =>
              admin.audit.record(trx, {
                action: 'project.create',
                tenantId,
                target: { type: 'project', id: project.id },
              }),
          ),
        ),
      );
      expect(outcomes.filter((o) => o === 'created')).toHaveLength(3);
      expect(outcomes.filter((o) => o === 'limit_reached')).toHaveLength(17);
    });

    it('orders projects created in the same instant by id', async () => {
      const { principal } = await newTenant('sameinstant', 'pro');
      for (const name of ['p1', 'p2', 'p3', 'p4'])
        await client.createProject({ principal, name, environment: '' });
      const { projects } = await client.listProjects({ principal });
      expect(projects.map((p) => p.id)).toEqual(projects.map((p) => p.id).sort());
      expect(projects).toHaveLength(4);
    });
  });

  it('reports SERVING on the standard health service while its database answers', async () => {
    const health = connect(HealthService, `127.0.0.1:${admin.port}`);
    try {
      const res = await health.check({ service: AdminRpc.typeName });
      expect(res.status).toBe(ServingStatus.SERVING);
    } finally {
      health.close();
    }
  });
});
