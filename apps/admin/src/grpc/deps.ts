import type { BillingService as BillingRpc } from '@relayplane/proto/billing';
import type { Clock } from '@relayplane/shared/clock';
import type { Logger } from '@relayplane/shared/logger';
import type { ServiceClient } from '@relayplane/shared/rpc';
import type { PasswordHasher } from '../security/passwords.ts';
import type { AccountStore } from '../stores/accounts.ts';
import type { ProjectStore } from '../stores/projects.ts';
import type { SessionStore } from '../stores/sessions.ts';

/** What the admin RPC handlers work with. */
export interface AdminDeps {
  accounts: AccountStore;
  sessions: SessionStore;
  projects: ProjectStore;
  passwords: PasswordHasher;
  /** Plan limits (project count). */
  billing: ServiceClient<typeof BillingRpc>;
  clock: Clock;
  logger: Logger;
  sessionTtlSeconds: number;
  signupEnabled: boolean;
}
