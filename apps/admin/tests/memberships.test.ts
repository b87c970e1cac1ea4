import type { BillingService } from '@relayplane/billing';
import { AppError, INVALID_TOKEN_MESSAGE } from '@relayplane/contract/errors';
import { AdminService as AdminRpc, type Principal, TenantRole } from '@relayplane/proto/admin';
import { connect, type ServiceClient } from '@relayplane/shared/rpc';
import { createTestDatabase, type TestDatabase } from '@relayplane/testing/storage';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALREADY_MEMBER_MESSAGE, NO_SUCH_USER_MESSAGE } from '../src/grpc/add-member.ts';
import { LAST_OWNER_MESSAGE, MEMBER_NOT_FOUND_MESSAGE, OWNER_ONLY_MESSAGE } from '../src/grpc/members.ts';
import { NOT_A_MEMBER_MESSAGE } from '../src/grpc/switch-tenant.ts';
import type { AdminService } from '../src/service.ts';
import { createAdmin, startBilling } from './support/harness.ts';

const PASSWORD = 'a long enough password';

describe('tenant switching and memberships over gRPC (real PostgreSQL)', () => {
  let database: TestDatabase;
  let billing: BillingService;
  let admin: AdminService;
  let client: ServiceClient<typeof AdminRpc>;
  let seq = 0;

  beforeAll(async () => {
    database = await createTestDatabase('adminmembers');
    billing = await startBilling(database.url);
    admin = await createAdmin(database.url, `127.0.0.1:${billing.port}`);
    await admin.start();
    client = connect(AdminRpc, `127.0.0.1:${admin.port}`);
  });

  afterAll(async () => {
    client?.close();
    await admin?.destroy();
    await billing?.destroy();
    await database?.drop();
  });

  /** A user who signed up (owning a tenant of their own), logged in there. */
  async function newUser(label: string) {
    const email = `${label}-${++seq}@example.com`;
    const signedUp = await client.signup({ email, password: PASSWORD, tenantName: `${label} inc` });
    const userId = signedUp.user?.id ?? '';
    const tenantId = signedUp.tenant?.id ?? '';
    const { token, principal } = await login(email);
    expect(principal.tenantId).toBe(tenantId);
    return { email, userId, tenantId, token, principal };
  }

  async function login(email: string) {
    const { token } = await client.login({ email, password: PASSWORD, clientIp: '' });
    return { token, principal: await authenticate(token) };
  }

  async function authenticate(token: string): Promise<Principal> {
    const { principal } = await client.authenticate({ token });
    if (!principal) throw new Error('no principal');
    return principal;
  }

  /** `user`, added to `owner`'s tenant with `role` and switched there; the principal acting there. */
  async function joined(owner: Principal, role: TenantRole, label = 'member') {
    const user = await newUser(label);
    await client.addMember({ principal: owner, email: user.email, role });
    await client.switchTenant({ principal: user.principal, tenantId: owner.tenantId });
    return { ...user, principal: await authenticate(user.token) };
  }

  async function errorOf(call: Promise<unknown>): Promise<AppError> {
    const err = await call.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(AppError);
    return err as AppError;
  }

  async function expectAppError(call: Promise<unknown>, code: string, message: string) {
    const err = await errorOf(call);
    expect({ code: err.code, message: err.message }).toEqual({ code, message });
  }

  async function rolesOf(principal: Principal): Promise<Record<string, TenantRole>> {
    const { members } = await client.listMembers({ principal });
    return Object.fromEntries(members.map((m) => [m.user?.id ?? '', m.role]));
  }

  it('switches a session to another tenant of its user, keeping its token, with that role', async () => {
    const a = await newUser('a');
    const b = await newUser('b');
    const { member } = await client.addMember({
      principal: a.principal,
      email: b.email,
      role: TenantRole.DEVELOPER,
    });
    expect(member).toMatchObject({
      tenantId: a.tenantId,
      role: TenantRole.DEVELOPER,
      user: { id: b.userId },
    });

    const { session } = await client.switchTenant({ principal: b.principal, tenantId: a.tenantId });
    expect(session).toMatchObject({
      id: b.principal.sessionId,
      tenant: { id: a.tenantId },
      role: TenantRole.DEVELOPER,
      user: { id: b.userId },
    });
    const now = await client.authenticate({ token: b.token });
    expect(now.principal).toMatchObject({
      sessionId: b.principal.sessionId,
      tenantId: a.tenantId,
      role: TenantRole.DEVELOPER,
    });
    expect(now.session?.tenant?.id).toBe(a.tenantId);
    // The principal of the tenant it left no longer acts.
    await expectAppError(
      client.listProjects({ principal: b.principal }),
      'unauthenticated',
      INVALID_TOKEN_MESSAGE,
    );

    const back = await client.switchTenant({ principal: now.principal, tenantId: b.tenantId });
    expect(back.session).toMatchObject({ tenant: { id: b.tenantId }, role: TenantRole.OWNER });
  });

  it('refuses to switch to a tenant the user is not a member of, and leaves the session as it was', async () => {
    const a = await newUser('a');
    const b = await newUser('b');
    for (const tenantId of [a.tenantId, 'ten_00000000000000000000', 'nonsense', '']) {
      await expectAppError(
        client.switchTenant({ principal: b.principal, tenantId }),
        'forbidden',
        NOT_A_MEMBER_MESSAGE,
      );
    }
    expect(NOT_A_MEMBER_MESSAGE).toBe('you are not a member of that tenant');
    expect((await authenticate(b.token)).tenantId).toBe(b.tenantId);
  });

  it('lets every member list members, but only owners and admins add, change and remove them', async () => {
    const owner = await newUser('owner');
    const byRole = {
      admin: await joined(owner.principal, TenantRole.ADMIN, 'admin'),
      developer: await joined(owner.principal, TenantRole.DEVELOPER, 'dev'),
      viewer: await joined(owner.principal, TenantRole.VIEWER, 'viewer'),
    };
    for (const actor of [owner, byRole.admin, byRole.developer, byRole.viewer]) {
      const roles = await rolesOf(actor.principal);
      expect(Object.keys(roles).sort()).toEqual(
        [owner.userId, byRole.admin.userId, byRole.developer.userId, byRole.viewer.userId].sort(),
      );
    }

    for (const [role, actor] of [
      ['developer', byRole.developer],
      ['viewer', byRole.viewer],
    ] as const) {
      const CANNOT_MANAGE_MEMBERS_MESSAGE = `your role (${role}) does not grant permission members:write`;
      const target = await newUser('target');
      await expectAppError(
        client.addMember({ principal: actor.principal, email: target.email, role: TenantRole.VIEWER }),
        'forbidden',
        CANNOT_MANAGE_MEMBERS_MESSAGE,
      );
      await expectAppError(
        client.changeMemberRole({
          principal: actor.principal,
          userId: byRole.viewer.userId,
          role: TenantRole.ADMIN,
        }),
        'forbidden',
        CANNOT_MANAGE_MEMBERS_MESSAGE,
      );
      await expectAppError(
        client.removeMember({ principal: actor.principal, userId: byRole.viewer.userId }),
        'forbidden',
        CANNOT_MANAGE_MEMBERS_MESSAGE,
      );
    }
    expect((await rolesOf(owner.principal))[byRole.viewer.userId]).toBe(TenantRole.VIEWER);

    for (const actor of [owner, byRole.admin]) {
      const target = await newUser('target');
      const added = await client.addMember({
        principal: actor.principal,
        email: target.email,
        role: TenantRole.VIEWER,
      });
      expect(added.member?.role).toBe(TenantRole.VIEWER);
      const changed = await client.changeMemberRole({
        principal: actor.principal,
        userId: target.userId,
        role: TenantRole.ADMIN,
      });
      expect(changed.member).toMatchObject({ user: { id: target.userId }, role: TenantRole.ADMIN });
      expect((await rolesOf(owner.principal))[target.userId]).toBe(TenantRole.ADMIN);
      const removed = await client.removeMember({ principal: actor.principal, userId: target.userId });
      expect(removed.member?.user?.id).toBe(target.userId);
      expect((await rolesOf(owner.principal))[target.userId]).toBeUndefined();
    }
  });

  it('keeps the owner role with owners: an admin can neither grant it nor change or remove an owner', async () => {
    const owner = await newUser('owner');
    const admin2 = await joined(owner.principal, TenantRole.ADMIN, 'admin');
    const viewer = await joined(owner.principal, TenantRole.VIEWER, 'viewer');
    const outsider = await newUser('outsider');
    const p = admin2.principal;
    await expectAppError(
      client.addMember({ principal: p, email: outsider.email, role: TenantRole.OWNER }),
      'forbidden',
      OWNER_ONLY_MESSAGE,
    );
    await expectAppError(
      client.changeMemberRole({ principal: p, userId: viewer.userId, role: TenantRole.OWNER }),
      'forbidden',
      OWNER_ONLY_MESSAGE,
    );
    await expectAppError(
      client.changeMemberRole({ principal: p, userId: owner.userId, role: TenantRole.VIEWER }),
      'forbidden',
      OWNER_ONLY_MESSAGE,
    );
    await expectAppError(
      client.removeMember({ principal: p, userId: owner.userId }),
      'forbidden',
      OWNER_ONLY_MESSAGE,
    );
    expect(await rolesOf(owner.principal)).toEqual({
      [owner.userId]: TenantRole.OWNER,
      [admin2.userId]: TenantRole.ADMIN,
      [viewer.userId]: TenantRole.VIEWER,
    });
    // An owner may make someone an owner.
    const promoted = await client.changeMemberRole({
      principal: owner.principal,
      userId: viewer.userId,
      role: TenantRole.OWNER,
    });
    expect(promoted.member?.role).toBe(TenantRole.OWNER);
  });

  it('never demotes or removes the last owner', async () => {
    const owner = await newUser('owner');
    await expectAppError(
      client.removeMember({ principal: owner.principal, userId: owner.userId }),
      'conflict',
      LAST_OWNER_MESSAGE,
    );
    await expectAppError(
      client.changeMemberRole({ principal: owner.principal, userId: owner.userId, role: TenantRole.ADMIN }),
      'conflict',
      LAST_OWNER_MESSAGE,
    );
    expect(LAST_OWNER_MESSAGE).toBe('a tenant needs at least one owner');
    expect(await rolesOf(owner.principal)).toEqual({ [owner.userId]: TenantRole.OWNER });

    // With a second owner, one of them may step down.
    const second = await joined(owner.principal, TenantRole.OWNER, 'second');
    const demoted = await client.changeMemberRole({
      principal: second.principal,
      userId: owner.userId,
      role: TenantRole.ADMIN,
    });
    expect(demoted.member?.role).toBe(TenantRole.ADMIN);
    await expectAppError(
      client.removeMember({ principal: second.principal, userId: second.userId }),
      'conflict',
      LAST_OWNER_MESSAGE,
    );
  });

  it('leaves exactly one owner when the last two owners remove themselves at the same time', async () => {
    for (let round = 0; round < 8; round++) {
      const first = await newUser('first');
      const second = await joined(first.principal, TenantRole.OWNER, 'second');
      const results = await Promise.allSettled([
        client.removeMember({ principal: first.principal, userId: first.userId }),
        client.removeMember({ principal: second.principal, userId: second.userId }),
      ]);
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      const rejected = results.flatMap((r) => (r.status === 'rejected' ? [r.reason] : []));
      expect(rejected).toHaveLength(1);
      expect(rejected[0]).toBeInstanceOf(AppError);
      expect({ code: rejected[0].code, message: rejected[0].message }).toEqual({
        code: 'conflict',
        message: LAST_OWNER_MESSAGE,
      });
      const remaining = results[0]?.status === 'fulfilled' ? second : first;
      expect(Object.values(await rolesOf(remaining.principal))).toEqual([TenantRole.OWNER]);
    }
  });

  it("answers not_found for another tenant's user, an unknown email, and conflict for an existing member", async () => {
    const a = await newUser('a');
    const b = await newUser('b');
    const member = await joined(a.principal, TenantRole.VIEWER, 'member');
    for (const userId of [b.userId, 'usr_00000000000000000000', 'nonsense']) {
      await expectAppError(
        client.changeMemberRole({ principal: a.principal, userId, role: TenantRole.ADMIN }),
        'not_found',
        MEMBER_NOT_FOUND_MESSAGE,
      );
      await expectAppError(
        client.removeMember({ principal: a.principal, userId }),
        'not_found',
        MEMBER_NOT_FOUND_MESSAGE,
      );
    }
    // B's own tenant is untouched by A's attempts.
    expect(await rolesOf(b.principal)).toEqual({ [b.userId]: TenantRole.OWNER });
    await expectAppError(
      client.addMember({ principal: a.principal, email: 'nobody-here@example.com', role: TenantRole.VIEWER }),
      'not_found',
      NO_SUCH_USER_MESSAGE,
    );
    await expectAppError(
      client.addMember({ principal: a.principal, email: member.email.toUpperCase(), role: TenantRole.ADMIN }),
      'conflict',
      ALREADY_MEMBER_MESSAGE,
    );
    await expectAppError(
      client.addMember({ principal: a.principal, email: b.email, role: TenantRole.UNSPECIFIED }),
      'invalid_request',
      'role must be one of owner, admin, developer, viewer',
    );
  });

  it("ends a removed member's sessions in that tenant at once", async () => {
    const owner = await newUser('owner');
    const member = await joined(owner.principal, TenantRole.DEVELOPER, 'member');
    await client.removeMember({ principal: owner.principal, userId: member.userId });
    await expectAppError(
      client.authenticate({ token: member.token }),
      'unauthenticated',
      INVALID_TOKEN_MESSAGE,
    );
    // Their own tenant still welcomes them at the next login.
    expect((await login(member.email)).principal.tenantId).toBe(member.tenantId);
  });
});
