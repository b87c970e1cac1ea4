import { AppError } from '@relayplane/contract/errors';
import { newId } from '@relayplane/contract/ids';
import type { AdminService } from '@relayplane/proto/admin';
import { currentRequestContext } from '@relayplane/shared/request-context';
import type { ServiceImpl } from '@relayplane/shared/rpc';
import { checkEmail, checkPassword, checkTenantName } from '../domain/validation.ts';
import { throttleKeys } from '../redis/keys.ts';
import type { AdminDeps } from './deps.ts';
import { enforceLimits, throttleClientOf } from './limits.ts';
import { tenantMessage, userMessage } from './messages.ts';
import { valid } from './valid.ts';

export const SIGNUP_RATE_LIMITED_MESSAGE = 'too many sign-ups from this address; retry later';

/**
 * Signup: a new tenant and its owner. The tenant starts on billing's default plan (free),
 * which needs no subscription row, so billing is not called.
 *
 * Sign-ups are limited per client IP (the request context's, as the gateway saw it; none when
 * unknown) and window: every well-formed attempt counts, before the password is hashed, whether
 * it then creates a tenant or finds the email taken (which also limits probing for registered
 * emails). Malformed input (400) costs nothing and is not counted. Over the limit:
 * `rate_limited` with the time left in the window; not an audit event (nothing changed).
 */
export function signup(deps: AdminDeps): ServiceImpl<typeof AdminService>['signup'] {
  return async (req) => {
    if (!deps.signupEnabled) throw new AppError('forbidden', 'signup is disabled');
    const email = valid(checkEmail(req.email));
    const password = valid(checkPassword(req.password));
    const tenantName = valid(checkTenantName(req.tenantName));
    const clientIp = currentRequestContext()?.clientIp;
    if (clientIp !== undefined) {
      await enforceLimits(
        deps.signupThrottle,
        [{ key: throttleKeys.signupIp(throttleClientOf(deps, clientIp)), max: deps.signupLimits.maxPerIp }],
        SIGNUP_RATE_LIMITED_MESSAGE,
      );
    }
    const now = deps.clock.now();
    const tenant = { id: newId('tenant'), name: tenantName, createdAt: now };
    const user = { id: newId('user'), email, platformAdmin: false, createdAt: now };
    const passwordHash = await deps.passwords.hash(password);
    const outcome = await deps.accounts.createTenantWithOwner({ tenant, user, passwordHash }, (trx) =>
      deps.audit.record(trx, {
        action: 'tenant.create',
        tenantId: tenant.id,
        actor: { type: 'user', id: user.id },
        target: { type: 'tenant', id: tenant.id },
        details: { name: tenantName, owner_user_id: user.id, cause: 'signup' },
      }),
    );
    if (outcome === 'email_taken') throw new AppError('conflict', 'email is already registered');
    deps.logger.info({ userId: user.id, tenantId: tenant.id }, 'tenant signed up');
    return { user: userMessage(user), tenant: tenantMessage(tenant) };
  };
}
