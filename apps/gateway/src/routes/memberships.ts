import { ROLE_NAMES } from '@relayplane/contract/contract';
import type { MyTenant } from '@relayplane/proto/admin';
import { roleName, tenantRole } from '@relayplane/shared/iam';
import { Member, Session, Tenant } from '../components.ts';
import { principalOf } from '../plugins/auth.ts';
import { presentMember, presentOwnSession, presentTenant, required } from '../present.ts';
import {
  errorResponse,
  listOf,
  object,
  oneOf,
  PAGE_BAD_REQUEST,
  PAGING,
  pageOf,
  pageParams,
  pageQuery,
  pathParams,
  ref,
  type Static,
  Type,
} from '../schemas.ts';
import type { Api, RouteDeps } from './deps.ts';

const ROLE = oneOf(ROLE_NAMES);
const FORBIDDEN = errorResponse(
  'Or an admin tried to grant the owner role or to change or remove an owner (owners only).',
);
const MEMBER_NOT_FOUND = errorResponse('The user is not a member of the active tenant.');
const LAST_OWNER = errorResponse('The change would leave the tenant without an owner.');

/** One of the caller's memberships. */
const MY_TENANT = object({
  tenant: ref(Tenant),
  role: ROLE,
  active: Type.Boolean({ description: 'The tenant the session acts in now.' }),
});

function presentMyTenant(t: MyTenant): Static<typeof MY_TENANT> {
  return {
    tenant: presentTenant(required(t.tenant, 'my_tenant.tenant')),
    role: required(roleName(t.role), 'my_tenant.role'),
    active: t.active,
  };
}

export function registerMemberships(app: Api, { clients, guards }: RouteDeps): void {
  app.post(
    '/admin/v1/auth/session/tenant',
    {
      onRequest: guards.session,
      schema: {
        operationId: 'switchTenant',
        summary: 'Switch the active tenant of the session',
        description:
          'The same session token now acts in `tenant_id`, with the role of that membership. Answers the ' +
          'session as `GET /admin/v1/auth/session` would now. A tenant the user is not a member of: 403.',
        tags: ['auth'],
        body: object({ tenant_id: Type.String({ maxLength: 64 }) }),
        response: { 200: ref(Session), 403: errorResponse('You are not a member of that tenant.') },
      },
    },
    async (request) => {
      const res = await clients.admin.switchTenant({
        principal: principalOf(request),
        tenantId: request.body.tenant_id,
      });
      return presentOwnSession(request, required(res.session, 'switchTenant.session'));
    },
  );

  app.get(
    '/admin/v1/auth/tenants',
    {
      onRequest: guards.session,
      schema: {
        operationId: 'listMyTenants',
        summary: "The caller's tenants",
        description:
          'Every tenant the user is a member of, with the role there, by tenant name; `active` marks the one ' +
          'the session acts in (`POST /admin/v1/auth/session/tenant` moves it to another). A user session or CLI ' +
          "token only. Not paged: one user's memberships are few.",
        tags: ['auth'],
        response: { 200: listOf('tenants', MY_TENANT) },
      },
    },
    async (request) => {
      const res = await clients.admin.listMyTenants({ principal: principalOf(request) });
      return { tenants: res.tenants.map(presentMyTenant) };
    },
  );

  app.get(
    '/admin/v1/members',
    {
      onRequest: guards.allow('members:read'),
      schema: {
        operationId: 'listMembers',
        summary: 'List the members of the active tenant',
        description: `Every member may list them, oldest membership first. ${PAGING}`,
        tags: ['members'],
        querystring: pageQuery(),
        response: { 200: pageOf('members', ref(Member)), 400: PAGE_BAD_REQUEST },
      },
    },
    async (request) => {
      const res = await clients.admin.listMembers({
        principal: principalOf(request),
        ...pageParams(request.query),
      });
      return { members: res.members.map(presentMember), next_cursor: res.nextCursor || null };
    },
  );

  app.post(
    '/admin/v1/members',
    {
      onRequest: guards.allow('members:write'),
      schema: {
        operationId: 'addMember',
        summary: 'Add an existing user to the active tenant',
        description:
          'Adds the user registered with `email`, with `role`. No invitation is sent: an email nobody is ' +
          'registered with answers 404. Only owners may add an owner.',
        tags: ['members'],
        body: object({ email: Type.String({ minLength: 3, maxLength: 254 }), role: ROLE }),
        response: {
          201: ref(Member),
          403: FORBIDDEN,
          404: errorResponse('No user is registered with that email.'),
          409: errorResponse('The user is already a member of the active tenant.'),
        },
      },
    },
    async (request, reply) => {
      const res = await clients.admin.addMember({
        principal: principalOf(request),
        email: request.body.email,
        role: tenantRole(request.body.role),
      });
      return reply.code(201).send(presentMember(required(res.member, 'addMember.member')));
    },
  );

  app.patch(
    '/admin/v1/members/:user_id',
    {
      onRequest: guards.allow('members:write'),
      schema: {
        operationId: 'changeMemberRole',
        summary: "Change a member's role",
        description:
          'Only owners may grant the owner role or change an owner. The last owner ' +
          'cannot be demoted: 409.',
        tags: ['members'],
        params: pathParams('user_id'),
        body: object({ role: ROLE }),
        response: { 200: ref(Member), 403: FORBIDDEN, 404: MEMBER_NOT_FOUND, 409: LAST_OWNER },
      },
    },
    async (request) => {
      const res = await clients.admin.changeMemberRole({
        principal: principalOf(request),
        userId: request.params.user_id,
        role: tenantRole(request.body.role),
      });
      return presentMember(required(res.member, 'changeMemberRole.member'));
    },
  );

  app.delete(
    '/admin/v1/members/:user_id',
    {
      onRequest: guards.allow('members:write'),
      schema: {
        operationId: 'removeMember',
        summary: 'Remove a member from the active tenant',
        description:
          'Answers the membership as it was. Its sessions in this tenant stop working at once. Owners and ' +
          'admins only; only owners may remove an owner; the last owner cannot be removed: 409.',
        tags: ['members'],
        params: pathParams('user_id'),
        response: { 200: ref(Member), 403: FORBIDDEN, 404: MEMBER_NOT_FOUND, 409: LAST_OWNER },
      },
    },
    async (request) => {
      const res = await clients.admin.removeMember({
        principal: principalOf(request),
        userId: request.params.user_id,
      });
      return presentMember(required(res.member, 'removeMember.member'));
    },
  );
}
