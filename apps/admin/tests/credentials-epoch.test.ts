/**
 * The credentials epoch over real gRPC and PostgreSQL (issue 31): a login whose password check
 * overlaps a password change keeps no session, whichever commits first; a CLI token from a grant
 * approved before the change is never minted; what the epoch refuses is what the change ended.
 * The races are made deterministic by holding a login's password verification open.
 */

import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INVALID_CREDENTIALS_MESSAGE } from '../src/grpc/login.ts';
import { createPasswordHasher, type PasswordHasher } from '../src/security/passwords.ts';
import { type AdminRig, expectAppError, startAdminRig } from './support/harness.ts';

const PASSWORD = 'a long enough password';
const NEW_PASSWORD = 'another long enough password';
const CLIENT = 'relayplane-cli';

/** A hasher whose next verification of `held` waits until released (the login is "checking"). */
function holdingHasher(inner: PasswordHasher) {
  let gate: { entered: () => void; release: Promise<void> } | undefined;
  let entered: Promise<void> = Promise.resolve();
  let release: () => void = () => {};
  const hasher: PasswordHasher = {
    hash: (p) => inner.hash(p),
    verifyNobody: (p) => inner.verifyNobody(p),
    async verify(hash, password) {
      const ok = await inner.verify(hash, password);
      const g = gate;
      if (g) {
        gate = undefined;
        g.entered();
        await g.release;
      }
      return ok;
    },
  };
  return {
    hasher,
    /** Holds the next verification after it has checked the password; resolves once it is held. */
    holdNext(): Promise<void> {
      let markEntered: () => void = () => {};
      entered = new Promise<void>((r) => {
        markEntered = r;
      });
      const released = new Promise<void>((r) => {
        release = r;
      });
      gate = { entered: markEntered, release: released };
      return entered;
    },
    release: () => release(),
  };
}

describe('the credentials epoch (real PostgreSQL, real billing)', () => {
  let rig: AdminRig;
  let hold: ReturnType<typeof holdingHasher>;
  let seq = 0;

  beforeAll(async () => {
    hold = holdingHasher(await createPasswordHasher());
    rig = await startAdminRig('adminepoch', { ADMIN_DEVICE_CLIENT_IDS: CLIENT }, { passwords: hold.hasher });
  });
  afterAll(async () => {
    await rig?.close();
  });

  async function newUser() {
    const email = `epoch${++seq}@example.com`;
    await rig.client.signup({ email, password: PASSWORD, tenantName: `epoch ${seq}` });
    const first = await rig.client.login({ email, password: PASSWORD, clientIp: '' });
    const { principal } = await rig.client.authenticate({ token: first.token });
    return { email, principal, token: first.token };
  }

  it('a login that verified the old password while it was changed keeps no session (the change commits first)', async () => {
    const user = await newUser();
    const held = hold.holdNext();
    const racing = rig.client.login({ email: user.email, password: PASSWORD, clientIp: '' });
    await held;
    // The password check passed and is held; the password changes meanwhile.
    await rig.client.changePassword({
      principal: user.principal,
      currentPassword: PASSWORD,
      newPassword: NEW_PASSWORD,
    });
    hold.release();
    await expectAppError(racing, 'unauthenticated', INVALID_CREDENTIALS_MESSAGE);
    const { rows } = await sql<{ n: number }>`
      select count(*)::int as n from admin.sessions s join admin.users u on u.id = s.user_id
      where u.email = ${user.email}
    `.execute(rig.admin.database.db);
    // Only the session that changed the password.
    expect(rows[0]?.n).toBe(1);
    await expect(rig.client.authenticate({ token: user.token })).resolves.toMatchObject({
      principal: expect.anything(),
    });
  });

  it('a login that committed its session before the change loses it to the change', async () => {
    const user = await newUser();
    const early = await rig.client.login({ email: user.email, password: PASSWORD, clientIp: '' });
    await rig.client.changePassword({
      principal: user.principal,
      currentPassword: PASSWORD,
      newPassword: NEW_PASSWORD,
    });
    await expectAppError(rig.client.authenticate({ token: early.token }), 'unauthenticated');
  });

  it('a session row that escaped the deletion is refused by its epoch', async () => {
    const user = await newUser();
    const other = await rig.client.login({ email: user.email, password: PASSWORD, clientIp: '' });
    const { principal } = await rig.client.authenticate({ token: other.token });
    // An old row put back (a restore, a replica lagging): the epoch still refuses it.
    const { rows } = await sql<Record<string, unknown>>`
      select * from admin.sessions where id = ${principal?.sessionId ?? ''}
    `.execute(rig.admin.database.db);
    await rig.client.revokeOtherSessions({ principal: user.principal });
    const row = rows[0] as Record<string, unknown>;
    const columns = Object.keys(row);
    await sql`insert into admin.sessions (${sql.join(columns.map((c) => sql.ref(c)))})
      values (${sql.join(columns.map((c) => row[c]))})`.execute(rig.admin.database.db);
    await expectAppError(rig.client.authenticate({ token: other.token }), 'unauthenticated');
    await expect(rig.client.authenticate({ token: user.token })).resolves.toMatchObject({
      principal: expect.anything(),
    });
  });

  it('an approved grant redeemed after the approver signed out everywhere mints no CLI token', async () => {
    const user = await newUser();
    const approver = await rig.client.login({ email: user.email, password: PASSWORD, clientIp: '' });
    const { principal } = await rig.client.authenticate({ token: approver.token });
    const start = await rig.client.startDeviceAuthorization({ clientId: CLIENT, scope: '', clientIp: '' });
    await rig.client.decideDeviceGrant({ principal, userCode: start.userCode, approve: true, clientIp: '' });
    // The other session signs out everywhere: the approver's session and its grant end.
    const ended = await rig.client.revokeOtherSessions({ principal: user.principal });
    expect(ended).toMatchObject({ revoked: 1, revokedDeviceGrants: 1 });
    await expectAppError(
      rig.client.exchangeDeviceCode({ clientId: CLIENT, deviceCode: start.deviceCode }),
      'invalid_request',
      'access_denied',
    );
    const { rows } = await sql<{ status: string }>`
      select status from admin.device_grants where user_id = (select id from admin.users where email = ${user.email})
    `.execute(rig.admin.database.db);
    expect(rows.map((r) => r.status)).toEqual(['denied']);
  });
});
