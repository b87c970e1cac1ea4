import type { Migration } from 'kysely/migration';
import * as accountsAndProjects from './20261122T2000-accounts-and-projects.ts';
import * as apiKeys from './20261123T1000-api-keys.ts';
import * as allowlist from './20261124T1000-allowlist.ts';
import * as bots from './20261125T1000-bots.ts';
import * as deviceGrants from './20261126T1000-device-grants.ts';
import * as identityTokens from './20261126T1100-identity-tokens.ts';
import * as auditEvents from './20261127T1000-audit-events.ts';
import * as sessionDetails from './20261128T1100-session-details.ts';
import * as auditEventFilters from './20261129T1100-audit-event-filters.ts';
import * as listOrderIndexes from './20261202T1000-list-order-indexes.ts';
import * as credentialsEpoch from './20261203T1000-credentials-epoch.ts';
import * as loginChallenges from './20261203T1100-login-challenges.ts';
import * as secondFactor from './20261203T1200-second-factor.ts';
import * as auditCheckpoints from './20261203T1300-audit-checkpoints.ts';
import * as apiKeyCeilings from './20261204T1000-api-key-ceilings.ts';
import * as webhooks from './20261205T1000-webhooks.ts';
import * as tenantListIndex from './20261206T1000-tenant-list-index.ts';

/** Every migration of the admin schema, by name (applied in name order). */
export const migrations: Record<string, Migration> = {
  '20261122T2000-accounts-and-projects': accountsAndProjects,
  '20261123T1000-api-keys': apiKeys,
  '20261124T1000-allowlist': allowlist,
  '20261125T1000-bots': bots,
  '20261126T1000-device-grants': deviceGrants,
  '20261126T1100-identity-tokens': identityTokens,
  '20261127T1000-audit-events': auditEvents,
  '20261128T1100-session-details': sessionDetails,
  '20261129T1100-audit-event-filters': auditEventFilters,
  '20261202T1000-list-order-indexes': listOrderIndexes,
  '20261203T1000-credentials-epoch': credentialsEpoch,
  '20261203T1100-login-challenges': loginChallenges,
  '20261203T1200-second-factor': secondFactor,
  '20261203T1300-audit-checkpoints': auditCheckpoints,
  '20261204T1000-api-key-ceilings': apiKeyCeilings,
  '20261205T1000-webhooks': webhooks,
  '20261206T1000-tenant-list-index': tenantListIndex,
};
