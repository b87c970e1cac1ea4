import type { GatewayClients } from '../clients.ts';
import type { JwksCache } from '../jwks-cache.ts';
import type { AuthGuards } from '../plugins/auth.ts';

export interface RouteDeps {
  clients: GatewayClients;
  jwks: JwksCache;
  guards: AuthGuards;
}
