import type { GatewayClients } from '../clients.ts';
import type { EntitlementCache } from '../entitlements.ts';
import type { IssuanceClient } from '../issuance-client.ts';
import type { JwksCache } from '../jwks-cache.ts';
import type { AuthGuards } from '../plugins/auth.ts';

export interface RouteDeps {
  clients: GatewayClients;
  jwks: JwksCache;
  guards: AuthGuards;
  entitlements: EntitlementCache;
  issuance: IssuanceClient;
  /** Aborted when the gateway starts shutting down: held long-polls answer at once. */
  shutdown: AbortSignal;
}
