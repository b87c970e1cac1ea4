/**
 * A second factor for people (issue 31; docs/iam.md, "Second factor"): TOTP enrolment, new
 * recovery codes, its status and removal, and the tenant's `require_mfa`. The caller's own user session (a login,
 * bearer or cookie with `X-CSRF-Token`, or a CLI token); bot and identity tokens: 403. Secrets (the TOTP secret, the
 * recovery codes) are answered once and never stored in clear.
 */
import { principalOf } from '../plugins/auth.ts';
import { iso, required } from '../present.ts';
import { dateTime, errorResponse, noContent, object, Type } from '../schemas.ts';
import type { Api, RouteDeps } from './deps.ts';

const code = Type.String({ minLength: 1, maxLength: 64 });
const RECOVERY_CODES = Type.Array(Type.String(), {
  minItems: 10,
  maxItems: 10,
  description: 'Ten single-use codes (`xxxx-xxxx-xxxx`). Shown only here.',
});
const OWN_LOGIN =
  'Your own user session (a login: bearer, or the cookie with `X-CSRF-Token`; or a CLI token); a bot or identity token: 403.';

export function registerMfa(app: Api, { clients, guards }: RouteDeps): void {
  app.get(
    '/admin/v1/auth/mfa',
    {
      onRequest: guards.session,
      schema: {
        operationId: 'getMfaStatus',
        summary: 'Your second factor: enrolled or not, recovery codes left',
        description: `Whether a TOTP second factor is enrolled (confirmed), since when, how many recovery codes are unused, and whether the session's tenant requires one. ${OWN_LOGIN}`,
        tags: ['auth'],
        response: {
          200: object({
            totp_enabled: Type.Boolean(),
            confirmed_at: Type.Optional(dateTime()),
            recovery_codes_left: Type.Integer({ minimum: 0 }),
            tenant_requires_mfa: Type.Boolean(),
          }),
        },
      },
    },
    async (request) => {
      const res = await clients.admin.getMfaStatus({ principal: principalOf(request) });
      const confirmedAt = iso(res.confirmedAt);
      return {
        totp_enabled: res.totpEnabled,
        ...(confirmedAt ? { confirmed_at: confirmedAt } : {}),
        recovery_codes_left: res.recoveryCodesLeft,
        tenant_requires_mfa: res.tenantRequiresMfa,
      };
    },
  );

  app.post(
    '/admin/v1/auth/mfa/totp',
    {
      onRequest: guards.session,
      schema: {
        operationId: 'startTotpEnrollment',
        summary: 'Start enrolling a TOTP second factor: a new secret',
        description:
          'A new TOTP secret (RFC 6238: SHA-1, 6 digits, 30 s), shown only here: `secret` (base32, to type in) and ' +
          '`otpauth_uri` (for a QR code). Nothing is required until `POST /admin/v1/auth/mfa/totp/confirm` proves ' +
          'the app has it; starting again before that replaces the pending secret. Already enrolled: 409 (remove ' +
          `it first). The secret is stored sealed (AES-256-GCM under a key derived from the KEK). ${OWN_LOGIN}`,
        tags: ['auth'],
        response: {
          200: object({
            secret: Type.String({ description: 'Base32. Shown only here.' }),
            otpauth_uri: Type.String({
              description: '`otpauth://totp/…`; holds the secret. Shown only here.',
            }),
          }),
          409: errorResponse('A second factor is already enrolled.'),
        },
      },
    },
    async (request) => {
      const res = await clients.admin.startTotpEnrollment({ principal: principalOf(request) });
      return { secret: res.secret, otpauth_uri: res.otpauthUri };
    },
  );

  app.post(
    '/admin/v1/auth/mfa/totp/confirm',
    {
      onRequest: guards.session,
      schema: {
        operationId: 'confirmTotpEnrollment',
        summary: 'Confirm the TOTP second factor with a first code: ten recovery codes',
        description:
          'The 6-digit code the app shows for the pending secret (the current 30-second step or one either side). ' +
          'From now on logins, device approvals, password changes and the removal of the factor ask for a code. ' +
          'Answers ten single-use recovery codes, shown only here: each replaces a code once, when the app is lost. ' +
          `A wrong code: 400 (the enrolment stays pending); nothing pending: 409. ${OWN_LOGIN}`,
        tags: ['auth'],
        body: object({ code: code }),
        response: {
          200: object({
            recovery_codes: RECOVERY_CODES,
            confirmed_at: dateTime(),
          }),
          409: errorResponse('No pending enrolment (start one), or it was confirmed meanwhile.'),
        },
      },
    },
    async (request) => {
      const res = await clients.admin.confirmTotpEnrollment({
        principal: principalOf(request),
        code: request.body.code,
      });
      return {
        recovery_codes: res.recoveryCodes,
        confirmed_at: required(iso(res.confirmedAt), 'confirmTotpEnrollment.confirmed_at'),
      };
    },
  );

  app.post(
    '/admin/v1/auth/mfa/recovery-codes',
    {
      onRequest: guards.session,
      schema: {
        operationId: 'renewRecoveryCodes',
        summary: 'New recovery codes for your second factor',
        description:
          'Ten new single-use recovery codes, shown only here; every earlier one, used or not, stops working. ' +
          'Needs a current code (or an unused recovery code) as `code`. A wrong or reused code: 401; nothing ' +
          `enrolled: 404. Recorded as \`user.mfa_recovery_codes\` (never the codes). ${OWN_LOGIN}`,
        tags: ['auth'],
        body: object({ code: code }),
        response: {
          200: object({
            recovery_codes: RECOVERY_CODES,
          }),
          401: errorResponse('The code is wrong or was already used.'),
          404: errorResponse('No second factor is enrolled.'),
          429: errorResponse('Too many attempts: retry after `Retry-After` seconds.'),
        },
      },
    },
    async (request) => {
      const res = await clients.admin.renewRecoveryCodes({
        principal: principalOf(request),
        code: request.body.code,
      });
      return { recovery_codes: res.recoveryCodes };
    },
  );

  app.delete(
    '/admin/v1/auth/mfa/totp',
    {
      onRequest: guards.session,
      // The body is optional (its fields are): a bare request is `{}`.
      preValidation: async (request) => {
        request.body ??= {};
      },
      schema: {
        operationId: 'disableTotp',
        summary: 'Remove the TOTP second factor',
        description:
          'Needs proof beyond the session: a current code or an unused recovery code as `code`, or the password as ' +
          '`password` (throttled like a login). The secret and the recovery codes are deleted. A wrong or reused ' +
          `code: 401; a wrong password: 403; neither sent: 400; nothing enrolled: 404. ${OWN_LOGIN}`,
        tags: ['auth'],
        body: object({
          code: Type.Optional(code),
          password: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
        }),
        response: {
          204: noContent('Removed.'),
          401: errorResponse('The code is wrong or was already used.'),
          403: errorResponse('The password is wrong, or a bot or identity token.'),
          404: errorResponse('No second factor is enrolled.'),
          429: errorResponse('Too many attempts: retry after `Retry-After` seconds.'),
        },
      },
    },
    async (request, reply) => {
      await clients.admin.disableTotp({
        principal: principalOf(request),
        code: request.body.code ?? '',
        password: request.body.password ?? '',
      });
      return reply.code(204).send();
    },
  );

  app.get(
    '/admin/v1/tenant/settings',
    {
      onRequest: guards.session,
      schema: {
        operationId: 'getTenantSettings',
        summary: "The session's tenant settings",
        description: `\`require_mfa\`: whether every member needs a second factor. Any member may read it. ${OWN_LOGIN}`,
        tags: ['tenants'],
        response: { 200: object({ require_mfa: Type.Boolean() }) },
      },
    },
    async (request) => {
      const res = await clients.admin.getTenantSettings({ principal: principalOf(request) });
      return { require_mfa: res.requireMfa };
    },
  );

  app.patch(
    '/admin/v1/tenant/settings',
    {
      onRequest: guards.session,
      // The body is optional (its fields are): a bare request is `{}`.
      preValidation: async (request) => {
        request.body ??= {};
      },
      schema: {
        operationId: 'updateTenantSettings',
        summary: "Change the session's tenant settings (owner only)",
        description:
          '`require_mfa: true`: members without a confirmed second factor may then do nothing but read their ' +
          'session, log out, manage their sessions and enrol (everything else answers 403 naming the fix); bots, ' +
          'identity tokens and API keys are not people and are unaffected. The owner must have a second factor to ' +
          `turn it on (409 otherwise). Not the owner: 403. ${OWN_LOGIN}`,
        tags: ['tenants'],
        body: object({ require_mfa: Type.Optional(Type.Boolean()) }),
        response: {
          200: object({ require_mfa: Type.Boolean() }),
          403: errorResponse("Not the tenant's owner (or a bot or identity token)."),
          409: errorResponse('The owner has no second factor yet.'),
        },
      },
    },
    async (request) => {
      const res = await clients.admin.updateTenantSettings({
        principal: principalOf(request),
        ...(request.body.require_mfa === undefined ? {} : { requireMfa: request.body.require_mfa }),
      });
      return { require_mfa: res.requireMfa };
    },
  );
}
