/**
 * The console's URLs. The gateway answers index.html for exactly these (CONSOLE_PATHS in
 * apps/gateway/src/console.ts mirrors the patterns); everything else stays the API's.
 */
export const paths = {
  overview: '/',
  signIn: '/sign-in',
  activate: '/activate',
  projects: '/projects',
  project: (id: string, tab = 'api-keys') => `/projects/${encodeURIComponent(id)}/${tab}`,
  webhook: (projectId: string, webhookId: string) =>
    `/projects/${encodeURIComponent(projectId)}/webhooks/${encodeURIComponent(webhookId)}`,
  members: '/members',
  audit: '/audit',
  account: '/account',
  billing: '/billing',
  relays: '/platform/relays',
  signingKeys: '/platform/signing-keys',
  tenants: '/platform/tenants',
} as const;

/** The tabs of a project page, in order. */
export const PROJECT_TABS = [
  { tab: 'api-keys', label: 'API keys' },
  { tab: 'credentials', label: 'Credentials' },
  { tab: 'sessions', label: 'Relay sessions' },
  { tab: 'bots', label: 'Bots' },
  { tab: 'identity-tokens', label: 'Identity tokens' },
  { tab: 'allowlist', label: 'Allowlist' },
  { tab: 'webhooks', label: 'Webhooks' },
] as const;
