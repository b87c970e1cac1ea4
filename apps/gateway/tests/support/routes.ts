/** Every served operation, for the suites that sweep all of them. */
export type Auth = 'none' | 'session' | 'platform_admin';

export interface RouteCase {
  method: 'GET' | 'POST';
  url: string;
  auth: Auth;
  /** A valid body, for routes that take one. */
  body?: Record<string, unknown>;
}

export const ROUTES: RouteCase[] = [
  { method: 'GET', url: '/healthz', auth: 'none' },
  { method: 'GET', url: '/readyz', auth: 'none' },
  { method: 'GET', url: '/openapi.json', auth: 'none' },
  { method: 'GET', url: '/v1/plans', auth: 'none' },
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
  { method: 'GET', url: '/admin/v1/auth/session', auth: 'session' },
  { method: 'POST', url: '/admin/v1/auth/logout', auth: 'session' },
  { method: 'POST', url: '/admin/v1/projects', auth: 'session', body: { name: 'ok-name' } },
  { method: 'GET', url: '/admin/v1/projects', auth: 'session' },
  { method: 'GET', url: '/admin/v1/signing-keys', auth: 'platform_admin' },
  { method: 'POST', url: '/admin/v1/signing-keys/rotate', auth: 'platform_admin' },
];
