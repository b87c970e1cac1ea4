/** Every served operation, for the suites that sweep all of them. */
export type Auth =
  | 'none'
  | 'session'
  | 'platform_admin'
  | 'api_key'
  | 'relay_node'
  | 'relay_credential'
  /** No credentials: the unguessable id in the URL is the capability (built-in checkout page). */
  | 'capability'
  /** No credentials: the provider's signature over the raw body (webhooks). */
  | 'provider_signature'
  /**
   * OAuth device flow (RFC 8628): a public client id, form or JSON, OAuth errors
   * (`{"error": "<code>"}`), tested in routes-device-flow.test.ts.
   */
  | 'oauth_client'
  /** The HTML verification page's form post: the session cookie plus a hidden CSRF field. */
  | 'browser_session';

export interface RouteCase {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  url: string;
  auth: Auth;
  /** A valid body, for routes that take one. */
  body?: Record<string, unknown>;
  /** Every body field is optional (`{}` is valid). */
  optionalBody?: true;
}

/** A project id that exists nowhere (the security suite never gets past authentication). */
const P = 'prj_00000000000000000000';
/** A bot id that exists nowhere. */
const B = 'bot_00000000000000000000';

export const ROUTES: RouteCase[] = [
  { method: 'GET', url: '/healthz', auth: 'none' },
  { method: 'GET', url: '/readyz', auth: 'none' },
  { method: 'GET', url: '/openapi.json', auth: 'none' },
  { method: 'GET', url: '/v1/plans', auth: 'none' },
  { method: 'GET', url: '/v1/credentials/jwks/kid_000.jwk', auth: 'none' },
  { method: 'GET', url: '/v1/pricing', auth: 'none' },
  { method: 'GET', url: '/v1/credentials/jwks', auth: 'none' },
  {
    method: 'POST',
    url: '/admin/v1/auth/signup',
    auth: 'none',
    body: { email: 'x@example.test', password: 'twelve chars!!', tenant_name: 'x' },
  },
  {
    method: 'POST',
    url: '/admin/v1/auth/login',
    auth: 'none',
    body: { email: 'x@example.test', password: 'p' },
  },
  {
    method: 'POST',
    url: '/admin/v1/auth/login/mfa',
    auth: 'none',
    body: { mfa_token: 'rpm_x', code: '123456' },
  },
  { method: 'GET', url: '/admin/v1/auth/session', auth: 'session' },
  { method: 'POST', url: '/admin/v1/auth/logout', auth: 'session' },
  { method: 'GET', url: '/admin/v1/auth/sessions', auth: 'session' },
  { method: 'DELETE', url: '/admin/v1/auth/sessions/ses_00000000000000000000', auth: 'session' },
  { method: 'POST', url: '/admin/v1/auth/sessions/revoke-others', auth: 'session', optionalBody: true },
  { method: 'GET', url: '/admin/v1/auth/mfa', auth: 'session' },
  { method: 'POST', url: '/admin/v1/auth/mfa/totp', auth: 'session' },
  { method: 'POST', url: '/admin/v1/auth/mfa/totp/confirm', auth: 'session', body: { code: '123456' } },
  { method: 'DELETE', url: '/admin/v1/auth/mfa/totp', auth: 'session', optionalBody: true },
  { method: 'POST', url: '/admin/v1/auth/mfa/recovery-codes', auth: 'session', body: { code: '123456' } },
  { method: 'GET', url: '/admin/v1/tenant/settings', auth: 'session' },
  { method: 'PATCH', url: '/admin/v1/tenant/settings', auth: 'session', optionalBody: true },
  {
    method: 'POST',
    url: '/admin/v1/auth/password',
    auth: 'session',
    body: { current_password: 'x', new_password: 'twelve chars!!' },
  },
  {
    method: 'POST',
    url: '/admin/v1/auth/session/tenant',
    auth: 'session',
    body: { tenant_id: 'ten_00000000000000000000' },
  },
  { method: 'GET', url: '/admin/v1/auth/tenants', auth: 'session' },
  { method: 'GET', url: '/admin/v1/audit-events', auth: 'session' },
  { method: 'GET', url: '/admin/v1/audit-events/verify', auth: 'session' },
  { method: 'GET', url: '/admin/v1/audit-events/checkpoints', auth: 'session' },
  { method: 'POST', url: '/admin/v1/audit-events/checkpoints', auth: 'session' },
  { method: 'GET', url: '/v1/audit/keys', auth: 'none' },
  { method: 'GET', url: '/admin/v1/members', auth: 'session' },
  {
    method: 'POST',
    url: '/admin/v1/members',
    auth: 'session',
    body: { email: 'x@example.test', role: 'viewer' },
  },
  {
    method: 'PATCH',
    url: '/admin/v1/members/usr_00000000000000000000',
    auth: 'session',
    body: { role: 'viewer' },
  },
  { method: 'DELETE', url: '/admin/v1/members/usr_00000000000000000000', auth: 'session' },
  { method: 'POST', url: '/admin/v1/projects', auth: 'session', body: { name: 'ok-name' } },
  { method: 'GET', url: '/admin/v1/projects', auth: 'session' },
  { method: 'GET', url: `/admin/v1/projects/${P}`, auth: 'session' },
  { method: 'GET', url: '/admin/v1/signing-keys', auth: 'platform_admin' },
  { method: 'POST', url: '/admin/v1/signing-keys/rotate', auth: 'platform_admin' },
  { method: 'POST', url: '/admin/v1/signing-keys/kid_0000000000000000/revoke', auth: 'platform_admin' },
  { method: 'GET', url: `/admin/v1/projects/${P}/api-keys`, auth: 'session' },
  {
    method: 'POST',
    url: `/admin/v1/projects/${P}/api-keys`,
    auth: 'session',
    body: { name: 'ci' },
    optionalBody: true,
  },
  { method: 'DELETE', url: `/admin/v1/projects/${P}/api-keys/key_00000000000000000000`, auth: 'session' },
  { method: 'GET', url: `/admin/v1/projects/${P}/allowlist`, auth: 'session' },
  { method: 'POST', url: `/admin/v1/projects/${P}/allowlist`, auth: 'session', body: { cidr: '10.0.0.0/8' } },
  { method: 'DELETE', url: `/admin/v1/projects/${P}/allowlist/alw_00000000000000000000`, auth: 'session' },
  { method: 'GET', url: `/admin/v1/projects/${P}/webhooks`, auth: 'session' },
  {
    method: 'POST',
    url: `/admin/v1/projects/${P}/webhooks`,
    auth: 'session',
    body: { url: 'https://hooks.example.com/relayplane', events: ['api_key.created'] },
  },
  { method: 'GET', url: `/admin/v1/projects/${P}/webhooks/whk_00000000000000000000`, auth: 'session' },
  {
    method: 'PATCH',
    url: `/admin/v1/projects/${P}/webhooks/whk_00000000000000000000`,
    auth: 'session',
    body: { enabled: false },
    optionalBody: true,
  },
  { method: 'DELETE', url: `/admin/v1/projects/${P}/webhooks/whk_00000000000000000000`, auth: 'session' },
  {
    method: 'POST',
    url: `/admin/v1/projects/${P}/webhooks/whk_00000000000000000000/rotate-secret`,
    auth: 'session',
    body: { grace_seconds: 60 },
    optionalBody: true,
  },
  {
    method: 'GET',
    url: `/admin/v1/projects/${P}/webhooks/whk_00000000000000000000/deliveries`,
    auth: 'session',
  },
  {
    method: 'POST',
    url: `/admin/v1/projects/${P}/webhooks/whk_00000000000000000000/deliveries/dlv_00000000000000000000/redeliver`,
    auth: 'session',
  },
  { method: 'GET', url: `/admin/v1/projects/${P}/bots`, auth: 'session' },
  { method: 'POST', url: `/admin/v1/projects/${P}/bots`, auth: 'session', body: { name: 'deployer' } },
  { method: 'GET', url: `/admin/v1/projects/${P}/bots/${B}/keys`, auth: 'session' },
  { method: 'POST', url: `/admin/v1/projects/${P}/bots/${B}/keys`, auth: 'session' },
  {
    method: 'DELETE',
    url: `/admin/v1/projects/${P}/bots/${B}/keys/key_00000000000000000000`,
    auth: 'session',
  },
  { method: 'GET', url: `/v1/projects/${P}/identities/${B}/tokens`, auth: 'session' },
  {
    method: 'POST',
    url: `/v1/projects/${P}/identities/${B}/tokens`,
    auth: 'session',
    body: { scopes: ['projects:read'] },
  },
  {
    method: 'DELETE',
    url: `/v1/projects/${P}/identities/${B}/tokens/idt_00000000000000000000`,
    auth: 'session',
  },
  {
    method: 'POST',
    url: '/api/v1/credentials',
    auth: 'api_key',
    body: { ttl_seconds: 600 },
    optionalBody: true,
  },
  { method: 'POST', url: '/admin/v1/credentials/crd_00000000000000000000/revoke', auth: 'session' },
  { method: 'GET', url: `/admin/v1/projects/${P}/credentials`, auth: 'session' },
  {
    method: 'POST',
    url: `/admin/v1/projects/${P}/credentials/revoke`,
    auth: 'session',
    body: { issued_before: '2026-01-01T00:00:00Z' },
  },
  { method: 'GET', url: '/v1/credentials/revocations', auth: 'relay_node' },
  { method: 'POST', url: '/v1/credentials/introspect', auth: 'relay_node', body: { token: 'x.y.z' } },
  { method: 'GET', url: '/admin/v1/relays', auth: 'platform_admin' },
  {
    method: 'POST',
    url: '/admin/v1/relays',
    auth: 'platform_admin',
    body: { region: 'eu', host: 'relay.example', port: 443 },
  },
  { method: 'DELETE', url: '/admin/v1/relays/rly_00000000000000000000', auth: 'platform_admin' },
  { method: 'POST', url: '/v1/relays/heartbeat', auth: 'relay_node', body: { load: 0.5 } },
  { method: 'GET', url: '/v1/relays/assignment', auth: 'relay_credential' },
  {
    method: 'POST',
    url: '/v1/relays/auth',
    auth: 'relay_node',
    body: { id: '00ff', event: 'connect', node: 'rly_00000000000000000000', transport: 'quic', path: '/' },
  },
  { method: 'POST', url: '/admin/v1/sessions/00ff/end', auth: 'session' },
  { method: 'GET', url: `/admin/v1/projects/${P}/sessions`, auth: 'session' },
  { method: 'GET', url: '/admin/v1/billing/subscription', auth: 'session' },
  { method: 'POST', url: '/admin/v1/billing/checkout-sessions', auth: 'session', body: { plan: 'pro' } },
  { method: 'GET', url: '/admin/v1/billing/usage?from=2026-11-01&to=2026-11-02', auth: 'session' },
  { method: 'GET', url: '/admin/v1/tenant/connections', auth: 'session' },
  { method: 'GET', url: '/admin/v1/tenants', auth: 'platform_admin' },
  {
    method: 'PUT',
    url: '/admin/v1/tenants/ten_00000000000000000000/plan',
    auth: 'platform_admin',
    body: { plan: 'pro' },
  },
  { method: 'GET', url: '/billing/checkout/cks_00000000000000000000', auth: 'capability' },
  { method: 'POST', url: '/billing/checkout/cks_00000000000000000000', auth: 'capability' },
  { method: 'POST', url: '/v1/billing/webhooks/stripe', auth: 'provider_signature' },
  { method: 'POST', url: '/admin/v1/auth/device/code', auth: 'oauth_client' },
  { method: 'POST', url: '/admin/v1/auth/token', auth: 'oauth_client' },
  { method: 'GET', url: '/.well-known/oauth-authorization-server', auth: 'none' },
  {
    method: 'POST',
    url: '/admin/v1/auth/device/approve',
    auth: 'session',
    body: { user_code: 'BCDF-GHJK', action: 'approve' },
  },
  { method: 'GET', url: '/device', auth: 'none' },
  { method: 'POST', url: '/device', auth: 'browser_session' },
];
