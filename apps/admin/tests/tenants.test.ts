import { INVALID_TOKEN_MESSAGE } from '@relayplane/contract/errors';
import { newId } from '@relayplane/contract/ids';
import { type Principal, PrincipalKind, TenantRole } from '@relayplane/proto/admin';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PLATFORM_ADMINS_ONLY_MESSAGE } from '../src/grpc/get-tenant.ts';
import { CURSOR_MESSAGE, LIMIT_MESSAGE } from '../src/grpc/list-page.ts';
import {
  type AdminRig,
  expectAppError,
  OWNER_EMAIL,
  OWNER_PASSWORD,
  principalFor,
  startAdminRig,
} from './support/harness.ts';

const PASSWORD = 'a long enough password';

/** ListMyTenants (a user's memberships) and ListTenants (the operator's list), over gRPC on PostgreSQL. */
describe('tenant lists over gRPC (real PostgreSQL)', () => {
  let rig: AdminRig;
  let seq = 0;

  beforeAll(async () => {
    rig = await startAdminRig('admintenants', {
      RELAYPLANE_BOOTSTRAP_EMAIL: OWNER_EMAIL,
      RELAYPLANE_BOOTSTRAP_PASSWORD: OWNER_PASSWORD,
      RELAYPLANE_BOOTSTRAP_TENANT: 'Acme Ops',
    });
  });
  afterAll(async () => {
    await rig?.close();
  });

  /** A user who signed up with a tenant named `tenantName`, logged in there. */
  async function newUser(tenantName: string) {
    const email = `user-${++seq}@example.com`;
    const signedUp = await rig.client.signup({ email, password: PASSWORD, tenantName });
    const { token } = await rig.client.login({ email, password: PASSWORD, clientIp: '' });
    return { email, tenantId: signedUp.tenant?.id ?? '', token, principal: await authenticate(token) };
  }

  async function authenticate(token: string): Promise<Principal> {
    const { principal } = await rig.client.authenticate({ token });
    if (!principal) throw new Error('no principal');
    return principal;
  }

  const mine = async (principal: Principal) =>
    (await rig.client.listMyTenants({ principal })).tenants.map((t) => [t.tenant?.name, t.role, t.active]);

  it("lists the user's tenants by name, with the role in each, the session's active one marked", async () => {
    const a = await newUser('alpha co');
    const b = await newUser('zeta co');
    await rig.client.addMember({ principal: a.principal, email: b.email, role: TenantRole.VIEWER });
    expect(await mine(b.principal)).toEqual([
      ['alpha co', TenantRole.VIEWER, false],
      ['zeta co', TenantRole.OWNER, true],
    ]);
    const { tenants } = await rig.client.listMyTenants({ principal: b.principal });
    expect(tenants[0]?.tenant).toMatchObject({
      id: a.tenantId,
      name: 'alpha co',
      createdAt: expect.anything(),
    });

    await rig.client.switchTenant({ principal: b.principal, tenantId: a.tenantId });
    expect(await mine(await authenticate(b.token))).toEqual([
      ['alpha co', TenantRole.VIEWER, true],
      ['zeta co', TenantRole.OWNER, false],
    ]);
    // Another user's list is theirs alone.
    expect(await mine(a.principal)).toEqual([['alpha co', TenantRole.OWNER, true]]);
  });

  it('answers unauthenticated to anything but a live user session', async () => {
    const a = await newUser('gamma co');
    const bot: Principal = { ...a.principal, kind: PrincipalKind.BOT, botId: newId('bot'), sessionId: '' };
    await expectAppError(
      rig.client.listMyTenants({ principal: bot }),
      'unauthenticated',
      INVALID_TOKEN_MESSAGE,
    );
    await expectAppError(rig.client.listMyTenants({}), 'unauthenticated', INVALID_TOKEN_MESSAGE);
    await rig.client.logout({ principal: a.principal });
    await expectAppError(
      rig.client.listMyTenants({ principal: a.principal }),
      'unauthenticated',
      INVALID_TOKEN_MESSAGE,
    );
  });

  it('lists every tenant for a platform admin, oldest first (ties by id), with member counts, page by page', async () => {
    const operator = await principalFor(rig.client, OWNER_EMAIL, OWNER_PASSWORD);
    // Five tenants created in the same microsecond: the cursor must order them by id.
    const db = rig.admin.database.db;
    const at = new Date('2020-01-01T00:00:00.000Z');
    const tied = Array.from({ length: 5 }, (_, i) => ({
      id: newId('tenant'),
      name: `tied ${i}`,
      created_at: at,
    }));
    await db.insertInto('tenants').values(tied).execute();
    const expected = await db
      .selectFrom('tenants as t')
      .select([
        't.id',
        (eb) =>
          eb
            .selectFrom('memberships as m')
            .select((c) => c.fn.countAll<string>().as('n'))
            .whereRef('m.tenant_id', '=', 't.id')
            .as('n'),
      ])
      .orderBy('t.created_at')
      .orderBy('t.id')
      .execute();

    const walked: [string, number][] = [];
    let cursor = '';
    let pages = 0;
    do {
      const page = await rig.client.listTenants({ principal: operator, limit: 2, cursor });
      expect(page.tenants.length).toBeLessThanOrEqual(2);
      walked.push(...page.tenants.map((t): [string, number] => [t.tenant?.id ?? '', t.memberCount]));
      cursor = page.nextCursor;
      pages++;
    } while (cursor !== '');
    expect(walked).toEqual(expected.map((r) => [r.id, Number(r.n)]));
    expect(pages).toBe(Math.ceil(expected.length / 2));
    expect(walked.slice(0, 5).map(([id]) => id)).toEqual(tied.map((t) => t.id).sort());
    // The bootstrap tenant has its owner; the tenant of the first test also its viewer.
    const counts = new Map(walked);
    const bootstrap = await db
      .selectFrom('tenants')
      .select('id')
      .where('name', '=', 'Acme Ops')
      .executeTakeFirstOrThrow();
    expect(counts.get(bootstrap.id)).toBe(1);
    const alpha = await db
      .selectFrom('tenants')
      .select('id')
      .where('name', '=', 'alpha co')
      .executeTakeFirstOrThrow();
    expect(counts.get(alpha.id)).toBe(2);
    // The default page holds them all here.
    const all = await rig.client.listTenants({ principal: operator });
    expect(all.tenants.map((t) => t.tenant?.id)).toEqual(expected.map((r) => r.id));
    expect(all.nextCursor).toBe('');
  });

  it('refuses anyone but a platform admin, and a limit or cursor it did not answer', async () => {
    const owner = await newUser('delta co');
    await expectAppError(
      rig.client.listTenants({ principal: owner.principal }),
      'forbidden',
      PLATFORM_ADMINS_ONLY_MESSAGE,
    );
    const operator = await principalFor(rig.client, OWNER_EMAIL, OWNER_PASSWORD);
    await expectAppError(
      rig.client.listTenants({ principal: operator, limit: 201 }),
      'invalid_request',
      LIMIT_MESSAGE,
    );
    await expectAppError(
      rig.client.listTenants({ principal: operator, cursor: 'not-a-cursor' }),
      'invalid_request',
      CURSOR_MESSAGE,
    );
  });
});
