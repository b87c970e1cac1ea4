/**
 * A tenant created through the gateway's own API, as a customer would: sign-up, login, and what
 * its owner then creates (projects, API keys). Each step asserts the call that made it
 * succeeded, so a broken setup fails where it broke. (Support names: `start*` for what runs,
 * nouns for fixtures.)
 */
import { expect } from 'vitest';
import type { Stack } from './stack.ts';

export const PASSWORD = 'a long enough password';

type Bearer = { authorization: string };

export interface Tenant {
  email: string;
  userId: string;
  tenantId: string;
  /** The owner's session token (`rpu_…`). */
  token: string;
  /** `Authorization: Bearer <token>`. */
  auth: Bearer;
  /** A project of the tenant, created by the owner: its id. */
  project(name: string): Promise<string>;
  /** An API key of one of its projects: the key (shown once) and its id. */
  apiKey(
    projectId: string,
    body?: {
      name?: string;
      scopes?: string[];
      ceiling?: { root?: string; publish?: string[]; subscribe?: string[] };
    },
  ): Promise<{ key: string; id: string }>;
}

/** A user signed up with a tenant of their own (the free plan), logged in. */
export async function tenant(
  stack: Pick<Stack, 'app'>,
  user: { email: string; name: string; password?: string },
): Promise<Tenant> {
  const password = user.password ?? PASSWORD;
  const signup = await stack.app.inject({
    method: 'POST',
    url: '/admin/v1/auth/signup',
    payload: { email: user.email, password, tenant_name: user.name },
  });
  expect(signup.statusCode, signup.body).toBe(201);
  const login = await stack.app.inject({
    method: 'POST',
    url: '/admin/v1/auth/login',
    payload: { email: user.email, password },
  });
  expect(login.statusCode, login.body).toBe(200);
  const token = login.json<{ token: string }>().token;
  const auth = { authorization: `Bearer ${token}` };
  const { user: created, tenant: of } = signup.json<{ user: { id: string }; tenant: { id: string } }>();
  return {
    email: user.email,
    userId: created.id,
    tenantId: of.id,
    token,
    auth,
    async project(name) {
      const res = await stack.app.inject({
        method: 'POST',
        url: '/admin/v1/projects',
        headers: auth,
        payload: { name },
      });
      expect(res.statusCode, res.body).toBe(201);
      return res.json<{ id: string }>().id;
    },
    async apiKey(projectId, body = {}) {
      const res = await stack.app.inject({
        method: 'POST',
        url: `/admin/v1/projects/${projectId}/api-keys`,
        headers: auth,
        payload: body,
      });
      expect(res.statusCode, res.body).toBe(201);
      const key = res.json<{ key: string; api_key: { id: string } }>();
      return { key: key.key, id: key.api_key.id };
    },
  };
}
