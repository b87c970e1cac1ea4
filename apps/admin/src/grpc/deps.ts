import type { BillingService as BillingRpc } from '@relayplane/proto/billing';
import type { Bus } from '@relayplane/shared/bus';
import type { Clock } from '@relayplane/shared/clock';
import type { Logger } from '@relayplane/shared/logger';
import type { RateLimiter } from '@relayplane/shared/rate-limit';
import type { ServiceClient } from '@relayplane/shared/rpc';
import type { Resolve } from '@relayplane/shared/webhook-target';
import type { AuditCheckpoints } from '../audit/checkpoints.ts';
import type { AuditTrail } from '../audit/trail.ts';
import type { DeviceFlowConfig, LoginLimits, SignupLimits, WebhookSettings } from '../config.ts';
import type { AdminMetrics } from '../metrics.ts';
import type { SecretSealer } from '../mfa/sealing.ts';
import type { DeviceTokens } from '../security/device-tokens.ts';
import type { PasswordHasher } from '../security/passwords.ts';
import type { AccountStore } from '../stores/accounts.ts';
import type { AllowlistStore } from '../stores/allowlist.ts';
import type { ApiKeyStore } from '../stores/api-keys.ts';
import type { BotStore } from '../stores/bots.ts';
import type { DeviceGrantStore } from '../stores/device-grants.ts';
import type { IdentityTokenStore } from '../stores/identity-tokens.ts';
import type { LoginChallengeStore } from '../stores/login-challenges.ts';
import type { ProjectStore } from '../stores/projects.ts';
import type { SecondFactorStore } from '../stores/second-factors.ts';
import type { SessionStore } from '../stores/sessions.ts';
import type { ThrottledRefusals } from '../stores/throttled-refusals.ts';
import type { WebhookDeliveryStore } from '../webhooks/delivery-store.ts';
import type { WebhookEndpointStore } from '../webhooks/endpoint-store.ts';
import type { Webhooks } from '../webhooks/webhooks.ts';

/**
 * A person's second factor (TOTP or a recovery code), as login, device approval and password
 * change ask for it.
 */
export interface SecondFactor {
  /** Whether the user has a confirmed second factor. */
  isEnrolled(userId: string): Promise<boolean>;
  /**
   * Accepts a current TOTP code (each time step once) or an unused recovery code (consumed), and
   * answers which it was; a wrong, replayed or throttled code throws (`unauthenticated`,
   * `rate_limited`), counted and recorded.
   */
  verify(
    user: { id: string; email: string },
    code: string,
    context: { tenantId: string | null; clientIp: string },
  ): Promise<'totp' | 'recovery_code'>;
}

/** What the admin RPC handlers work with. */
export interface AdminDeps {
  /**
   * The audit trail (docs/audit.md): `record(trx, event)` inside a change's transaction (the
   * stores take an audit step for it), `recordAlone(event)` for outcomes that change nothing.
   */
  audit: AuditTrail;
  /** Signed checkpoints of the chains' heads (audit/checkpoints.ts). */
  checkpoints: AuditCheckpoints;
  accounts: AccountStore;
  sessions: SessionStore;
  projects: ProjectStore;
  apiKeys: ApiKeyStore;
  allowlist: AllowlistStore;
  /** Webhook endpoints, deliveries, and the dispatcher (issue 34). */
  webhookEndpoints: WebhookEndpointStore;
  webhookDeliveries: WebhookDeliveryStore;
  webhooks: Webhooks;
  webhookSettings: WebhookSettings;
  /** How the URL of an endpoint resolves when it is created or changed (tests). */
  webhookResolve: Resolve;
  bots: BotStore;
  identityTokens: IdentityTokenStore;
  passwords: PasswordHasher;
  /** Plan limits (project, API key, bot and allowlist entry counts). */
  billing: ServiceClient<typeof BillingRpc>;
  /** Announces revoked API keys to every gateway. */
  bus: Bus;
  clock: Clock;
  logger: Logger;
  /** Absent: nothing is counted (handlers built outside the service). */
  metrics?: AdminMetrics;
  /** Counts login attempts per account, per client IP, and per account and client IP. */
  loginThrottle: RateLimiter;
  loginLimits: LoginLimits;
  /** Counts sign-ups per client IP (its own window: `signupLimits.windowSeconds`). */
  signupThrottle: RateLimiter;
  signupLimits: SignupLimits;
  /** Past the account-wide login limit: one attempt of unknown clients per `loginLimits.slowSeconds` (its window). */
  loginSlowdown: RateLimiter;
  /** Signs and checks the device tokens of clients that have logged in before (security/device-tokens.ts). */
  deviceTokens: DeviceTokens;
  /** Checks a person's second factor (mfa/second-factor.ts). */
  secondFactor: SecondFactor;
  /** TOTP enrolments, recovery codes and the tenants' `require_mfa`. */
  secondFactors: SecondFactorStore;
  /** Seals TOTP secrets under a key derived from the KEK. */
  sealer: SecretSealer;
  /** The password steps waiting for a second factor. */
  loginChallenges: LoginChallengeStore;
  /** The IPv6 prefix every per-client-IP throttle key groups by (throttleClient). */
  throttleIpv6Prefix: number;
  /** Which throttled login refusals are recorded: one per throttle key and window, with a count. */
  throttledRefusals: ThrottledRefusals;
  sessionTtlSeconds: number;
  signupEnabled: boolean;
  /** OAuth device authorization grants (RFC 8628). */
  deviceGrants: DeviceGrantStore;
  /** Counts device codes issued per client IP and user codes entered per user and per client IP. */
  deviceThrottle: RateLimiter;
  deviceFlow: DeviceFlowConfig;
}
