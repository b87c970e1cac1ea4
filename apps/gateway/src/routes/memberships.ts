import type { Member } from '@relayplane/proto/admin';
import { ROLE_NAMES, type RoleName } from '@relayplane/shared/contract';
import { AppError } from '@relayplane/shared/errors';
import { roleName, tenantRole } from '@relayplane/shared/iam';
import type { FastifyInstance } from 'fastify';
import { principalOf } from '../plugins/auth.ts';
import { csrfTokenFor, sessionCookieOf } from '../plugins/csrf.ts';
import { iso, presentSession, presentUser } from '../present.ts';
import { AUTH_ERRORS, BODY_ERRORS, COMMON_ERRORS, errorResponse, ref } from '../schemas.ts';
import type { RouteDeps } from './deps.ts';

const roleSchema = { type: 'string', enum: ROLE_NAMES } as const;

const MEMBER_SCHEMA = {
  type: 'object',
  required: ['user', 'tenant_id', 'role', 'created_at'],
  additionalProperties: false,
  properties: {
    user: ref('User'),
    tenant_id: { type: 'string' },
    role: roleSchema,
    created_at: { type: 'string', format: 'date-time', description: 'When the user joined the tenant.' },
  },
} as const;

function presentMember(m: Member) {
  const role = roleName(m.role);
  const createdAt = iso(m.createdAt);
  if (!m.user || !role || !createdAt)
    throw new AppError('internal', 'member incomplete in a service response');
  return { user: presentUser(m.user), tenant_id: m.tenantId, role, created_at: createdAt };
}

function memberOf(res: { member?: Member }, rpc: string) {
  if (!res.member) throw new AppError('internal', `${rpc} returned no member`);
  return presentMember(res.member);
}

const userParams = {
  type: 'object',
  required: ['user_id'],
  properties: { user_id: { type: 'string', maxLength: 64 } },
} as const;

const FORBIDDEN = errorResponse(
  'Or an admin tried to grant the owner role or to change or remove an owner (owners only).',
);
const MEMBER_NOT_FOUND = errorResponse('The user is not a member of the active tenant.');
const LAST_OWNER = errorResponse('The change would leave the tenant without an owner.');

export function registerMemberships(app: FastifyInstance, { clients, guards }: RouteDeps): void {
  app.post<{ Body: { tenant_id: string } }>(
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
        security: [{ bearerAuth: [] }],
        body: {
          type: 'object',
          required: ['tenant_id'],
          additionalProperties: false,
          properties: { tenant_id: { type: 'string', maxLength: 64 } },
        },
        response: {
          200: ref('Session'),
          ...BODY_ERRORS,
          ...AUTH_ERRORS,
          403: errorResponse('You are not a member of that tenant.'),
          ...COMMON_ERRORS,
        },
      },
    },
    async (request) => {
      const res = await clients.admin.switchTenant({
        principal: principalOf(request),
        tenantId: request.body.tenant_id,
      });
      if (!res.session) throw new AppError('internal', 'switchTenant returned no session');
      if (request.auth?.via !== 'cookie') return presentSession(res.session);
      const token = sessionCookieOf(request) ?? '';
      return {
        ...presentSession(res.session),
        authenticated_by: 'cookie' as const,
        csrf_token: csrfTokenFor(token),
      };
    },
  );

  app.get(
    '/admin/v1/members',
    {
      onRequest: guards.allow('members:read'),
      schema: {
        operationId: 'listMembers',
        summary: 'List the members of the active tenant',
        description: 'Every member may list them, oldest membership first.',
        tags: ['members'],
        security: [{ bearerAuth: [] }],
        response: {
          200: {
            type: 'object',
            required: ['members'],
            additionalProperties: false,
            properties: { members: { type: 'array', items: MEMBER_SCHEMA } },
          },
          ...AUTH_ERRORS,
          ...COMMON_ERRORS,
        },
      },
    },
    async (request) => {
      const res = await clients.admin.listMembers({ principal: principalOf(request) });
      return { members: res.members.map(presentMember) };
    },
  );

  app.post<{ Body: { email: string; role: RoleName } }>(
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
        security: [{ bearerAuth: [] }],
        body: {
          type: 'object',
          required: ['email', 'role'],
          additionalProperties: false,
          properties: { email: { type: 'string', minLength: 3, maxLength: 254 }, role: roleSchema },
        },
        response: {
          201: MEMBER_SCHEMA,
          ...BODY_ERRORS,
          ...AUTH_ERRORS,
          403: FORBIDDEN,
          404: errorResponse('No user is registered with that email.'),
          409: errorResponse('The user is already a member of the active tenant.'),
          ...COMMON_ERRORS,
        },
      },
    },
    async (request, reply) => {
      const res = await clients.admin.addMember({
        principal: principalOf(request),
        email: request.body.email,
        role: tenantRole(request.body.role),
      });
      return reply.code(201).send(memberOf(res, 'addMember'));
    },
  );

  app.patch<{ Params: { user_id: string }; Body: { role: RoleName } }>(
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
        security: [{ bearerAuth: [] }],
        params: userParams,
        body: {
          type: 'object',
          required: ['role'],
          additionalProperties: false,
          properties: { role: roleSchema },
        },
        response: {
          200: MEMBER_SCHEMA,
          ...BODY_ERRORS,
          ...AUTH_ERRORS,
          403: FORBIDDEN,
          404: MEMBER_NOT_FOUND,
          409: LAST_OWNER,
          ...COMMON_ERRORS,
        },
      },
    },
    async (request) => {
      const res = await clients.admin.changeMemberRole({
        principal: principalOf(request),
        userId: request.params.user_id,
        role: tenantRole(request.body.role),
      });
      return memberOf(res, 'changeMemberRole');
    },
  );

  app.delete<{ Params: { user_id: string } }>(
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
        security: [{ bearerAuth: [] }],
        params: userParams,
        response: {
          200: MEMBER_SCHEMA,
          ...AUTH_ERRORS,
          403: FORBIDDEN,
          404: MEMBER_NOT_FOUND,
          409: LAST_OWNER,
          ...COMMON_ERRORS,
        },
      },
    },
    async (request) => {
      const res = await clients.admin.removeMember({
        principal: principalOf(request),
        userId: request.params.user_id,
      });
      return memberOf(res, 'removeMember');
    },
  );
}
