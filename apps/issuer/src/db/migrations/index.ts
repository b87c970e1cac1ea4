import type { Migration } from 'kysely/migration';
import * as signingKeys from './20261122T2000-signing-keys.ts';
import * as relays from './20261122T2100-relays.ts';
import * as credentials from './20261122T2200-credentials.ts';
import * as credentialsIssuedAt from './20261123T1000-credentials-issued-at.ts';
import * as dropCredentialsTenantIssued from './20261125T1600-drop-credentials-tenant-issued.ts';
import * as credentialsTenantLive from './20261127T1000-credentials-tenant-live.ts';
import * as credentialContainment from './20261128T2000-credential-containment.ts';
import * as auditOutbox from './20261129T1000-audit-outbox.ts';
import * as relaysLiveOrder from './20261130T1000-relays-live-order.ts';
import * as signingKeyRevocations from './20261201T1000-signing-key-revocations.ts';
import * as relaySessions from './20261202T1000-relay-sessions.ts';
import * as relaySessionPatterns from './20261204T1000-relay-session-patterns.ts';
import * as relayClientCertificates from './20261204T1100-relay-client-certificates.ts';
import * as webhookNotices from './20261205T1000-webhook-notices.ts';

/** Every migration of the issuer schema, by name (applied in name order). */
export const migrations: Record<string, Migration> = {
  '20261122T2000-signing-keys': signingKeys,
  '20261122T2100-relays': relays,
  '20261122T2200-credentials': credentials,
  '20261123T1000-credentials-issued-at': credentialsIssuedAt,
  '20261125T1600-drop-credentials-tenant-issued': dropCredentialsTenantIssued,
  '20261127T1000-credentials-tenant-live': credentialsTenantLive,
  '20261128T2000-credential-containment': credentialContainment,
  '20261129T1000-audit-outbox': auditOutbox,
  '20261130T1000-relays-live-order': relaysLiveOrder,
  '20261201T1000-signing-key-revocations': signingKeyRevocations,
  '20261202T1000-relay-sessions': relaySessions,
  '20261204T1000-relay-session-patterns': relaySessionPatterns,
  '20261204T1100-relay-client-certificates': relayClientCertificates,
  '20261205T1000-webhook-notices': webhookNotices,
};
