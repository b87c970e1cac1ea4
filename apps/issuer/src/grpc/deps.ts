import type { Logger } from '@relayplane/shared/logger';
import type { Credentials } from '../credentials/credentials.ts';
import type { SigningKeys } from '../keys/signing-keys.ts';
import type { IssuerMetrics } from '../metrics.ts';
import type { RelayDirectory } from '../relays/relay-directory.ts';
import type { UsageSummaryStore } from '../stores/usage-summary.ts';

/** What the issuer RPC handlers work with; each handler takes only the part it uses. */
export interface IssuerDeps {
  keys: SigningKeys;
  credentials: Credentials;
  relays: RelayDirectory;
  usage: UsageSummaryStore;
  logger: Logger;
  /** Absent: nothing is counted (handlers built outside the service). */
  metrics?: IssuerMetrics;
}
