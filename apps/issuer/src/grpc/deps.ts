import type { Logger } from '@relayplane/shared/logger';
import type { CredentialList } from '../issuance/credential-list.ts';
import type { Introspection } from '../issuance/introspection.ts';
import type { Issuance } from '../issuance/issuance.ts';
import type { SlotStore } from '../issuance/slot-store.ts';
import type { UsageSummaryStore } from '../issuance/usage-summary.ts';
import type { SigningKeys } from '../keys/signing-keys.ts';
import type { IssuerMetrics } from '../metrics.ts';
import type { RelayDirectory } from '../relays/relay-directory.ts';
import type { RevocationFeed } from '../revocation/revocation-feed.ts';
import type { Revocations } from '../revocation/revocations.ts';
import type { SigningKeyRevocation } from '../revocation/signing-key-revocation.ts';
import type { RelaySessions } from '../sessions/relay-sessions.ts';
import type { RelaySessionStore } from '../sessions/session-store.ts';

/** What the issuer RPC handlers work with; each handler takes only the part it uses. */
export interface IssuerDeps {
  keys: SigningKeys;
  keyRevocation: SigningKeyRevocation;
  issuance: Issuance;
  introspection: Introspection;
  credentialList: CredentialList;
  revocations: Revocations;
  feed: RevocationFeed;
  relays: RelayDirectory;
  usage: UsageSummaryStore;
  sessions: RelaySessions;
  sessionStore: RelaySessionStore;
  /** Connection slots, read by GetTenantConnections (issuance and sessions decide through their own). */
  slots: SlotStore;
  logger: Logger;
  /** Absent: nothing is counted (handlers built outside the service). */
  metrics?: IssuerMetrics;
}
