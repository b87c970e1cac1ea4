import { AdminService } from '@relayplane/proto/admin';
import { BillingService } from '@relayplane/proto/billing';
import { IssuerService } from '@relayplane/proto/issuer';
import { HealthService } from '@relayplane/shared/health';
import { connect, type ServiceClient } from '@relayplane/shared/rpc';

/** Every downstream the gateway calls, each a typed gRPC client. */
export interface GatewayClients {
  admin: ServiceClient<typeof AdminService>;
  issuer: ServiceClient<typeof IssuerService>;
  billing: ServiceClient<typeof BillingService>;
  health: Record<'admin' | 'issuer' | 'billing', ServiceClient<typeof HealthService>>;
}

export const SERVICE_NAMES = {
  admin: AdminService.typeName,
  issuer: IssuerService.typeName,
  billing: BillingService.typeName,
} as const;

export function connectClients(
  addresses: { admin: string; issuer: string; billing: string },
  timeoutMs: number,
  dnsMinIntervalMs?: number,
): GatewayClients {
  const options = { timeoutMs, dnsMinIntervalMs };
  const health = { timeoutMs: 1_000, dnsMinIntervalMs };
  return {
    admin: connect(AdminService, addresses.admin, options),
    issuer: connect(IssuerService, addresses.issuer, options),
    billing: connect(BillingService, addresses.billing, options),
    health: {
      admin: connect(HealthService, addresses.admin, health),
      issuer: connect(HealthService, addresses.issuer, health),
      billing: connect(HealthService, addresses.billing, health),
    },
  };
}

export function closeClients(clients: GatewayClients): void {
  clients.admin.close();
  clients.issuer.close();
  clients.billing.close();
  for (const h of Object.values(clients.health)) h.close();
}
