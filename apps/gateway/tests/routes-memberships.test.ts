import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from './support/stack.ts';
import { tenant } from './support/tenant.ts';

/** Tenant switching and member management through the gateway, on the real services. */
describe('gateway routes: tenant switching and members', () => {
  let stack: Stack;
  let seq = 0;

  beforeAll(async () => {
    stack = await startStack('gw_members');
  });
  afterAll(async () => {
    await stack?.close();
  });

  /** A user who signed up with a tenant of their own, and a bearer header for their session. */
  const signup = (label: string) =>
    tenant(stack, { email: `${label}-${++seq}@example.test`, name: `${label} co` });

  const call = (
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
    url: string,
    headers: Record<string, string>,
    payload?: object,
  ) => stack.app.inject({ method, url, headers, ...(payload ? { payload } : {}) });

  const session = async (auth: Record<string, string>) =>
    (await call('GET', '/admin/v1/auth/session', auth)).json();
  const switchTo = (auth: Record<string, string>, tenantId: string) =>
    call('POST', '/admin/v1/auth/session/tenant', auth, { tenant_id: tenantId });

  it('adds a user of another tenant, who switches to it and then acts there with that role', async () => {
    const a = await signup('a');
    const b = await signup('b');
    const added = await call('POST', '/admin/v1/members', a.auth, { email: b.email, role: 'developer' });
    expect(added.statusCode).toBe(201);
    expect(added.json()).toEqual({
      user: { id: b.userId, email: b.email, platform_admin: false, created_at: expect.any(String) },
      tenant_id: a.tenantId,
      role: 'developer',
      created_at: expect.any(String),
    });

    expect((await session(b.auth)).tenant.id).toBe(b.tenantId);
    const switched = await switchTo(b.auth, a.tenantId);
    expect(switched.statusCode).toBe(200);
    expect(switched.json()).toMatchObject({
      user: { id: b.userId },
      tenant: { id: a.tenantId, name: 'a co' },
      role: 'developer',
      authenticated_by: 'bearer',
    });
    const now = await session(b.auth);
    expect(now).toMatchObject({ tenant: { id: a.tenantId }, role: 'developer' });
    expect(now.id).toBe(switched.json().id);

    // A developer of tenant A lists A's members, and cannot manage them.
    const list = await call('GET', '/admin/v1/members', b.auth);
    expect(list.statusCode).toBe(200);
    expect(
      list.json().members.map((m: { user: { id: string }; role: string }) => [m.user.id, m.role]),
    ).toEqual([
      [a.userId, 'owner'],
      [b.userId, 'developer'],
    ]);
    const refused = await call('PATCH', `/admin/v1/members/${b.userId}`, b.auth, { role: 'admin' });
    expect(refused.statusCode).toBe(403);
    expect(refused.json()).toEqual({
      error: 'your role (developer) does not grant permission members:write',
    });

    const back = await switchTo(b.auth, b.tenantId);
    expect(back.statusCode).toBe(200);
    expect(back.json()).toMatchObject({ tenant: { id: b.tenantId }, role: 'owner' });
  });

  it('answers 403 to a switch to a tenant the user is not a member of, and keeps the session where it was', async () => {
    const a = await signup('a');
    const b = await signup('b');
    for (const tenantId of [a.tenantId, 'ten_00000000000000000000']) {
      const res = await switchTo(b.auth, tenantId);
      expect(res.statusCode).toBe(403);
      expect(res.json()).toEqual({ error: 'you are not a member of that tenant' });
    }
    expect((await session(b.auth)).tenant.id).toBe(b.tenantId);
  });

  it('changes a role and removes a member; the removed member is locked out of that tenant', async () => {
    const a = await signup('a');
    const b = await signup('b');
    await call('POST', '/admin/v1/members', a.auth, { email: b.email, role: 'viewer' });
    await switchTo(b.auth, a.tenantId);

    const changed = await call('PATCH', `/admin/v1/members/${b.userId}`, a.auth, { role: 'admin' });
    expect(changed.statusCode).toBe(200);
    expect(changed.json()).toMatchObject({ user: { id: b.userId }, tenant_id: a.tenantId, role: 'admin' });
    expect((await session(b.auth)).role).toBe('admin');

    // An admin may not touch the owner role.
    const promote = await call('PATCH', `/admin/v1/members/${b.userId}`, b.auth, { role: 'owner' });
    expect(promote.statusCode).toBe(403);
    expect(promote.json()).toEqual({ error: 'only an owner can grant the owner role or change an owner' });
    const dropOwner = await call('DELETE', `/admin/v1/members/${a.userId}`, b.auth);
    expect(dropOwner.statusCode).toBe(403);
    expect(dropOwner.json()).toEqual({ error: 'only an owner can grant the owner role or change an owner' });

    const removed = await call('DELETE', `/admin/v1/members/${b.userId}`, a.auth);
    expect(removed.statusCode).toBe(200);
    expect(removed.json()).toMatchObject({ user: { id: b.userId }, role: 'admin' });
    const gone = await call('GET', '/admin/v1/auth/session', b.auth);
    expect(gone.statusCode).toBe(401);
    expect(gone.json()).toEqual({ error: 'invalid or expired token' });
    const list = await call('GET', '/admin/v1/members', a.auth);
    expect(list.json().members.map((m: { user: { id: string } }) => m.user.id)).toEqual([a.userId]);
  });

  it('keeps the last owner, refuses duplicates and unknown emails, and hides other tenants’ users', async () => {
    const a = await signup('a');
    const b = await signup('b');

    const lastRemove = await call('DELETE', `/admin/v1/members/${a.userId}`, a.auth);
    expect(lastRemove.statusCode).toBe(409);
    expect(lastRemove.json()).toEqual({ error: 'a tenant needs at least one owner' });
    const lastDemote = await call('PATCH', `/admin/v1/members/${a.userId}`, a.auth, { role: 'viewer' });
    expect(lastDemote.statusCode).toBe(409);
    expect(lastDemote.json()).toEqual({ error: 'a tenant needs at least one owner' });

    for (const [method, payload] of [
      ['PATCH', { role: 'viewer' }],
      ['DELETE', undefined],
    ] as const) {
      const res = await call(method, `/admin/v1/members/${b.userId}`, a.auth, payload);
      expect(res.statusCode).toBe(404);
      expect(res.json()).toEqual({ error: 'member not found' });
    }
    expect((await session(b.auth)).role).toBe('owner');

    const unknown = await call('POST', '/admin/v1/members', a.auth, {
      email: 'nobody@example.test',
      role: 'viewer',
    });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toEqual({ error: 'no user with that email' });

    await call('POST', '/admin/v1/members', a.auth, { email: b.email, role: 'viewer' });
    const again = await call('POST', '/admin/v1/members', a.auth, { email: b.email, role: 'admin' });
    expect(again.statusCode).toBe(409);
    expect(again.json()).toEqual({ error: 'the user is already a member of this tenant' });

    const badRole = await call('POST', '/admin/v1/members', a.auth, { email: b.email, role: 'superuser' });
    expect(badRole.statusCode).toBe(400);
  });
});
