import { AdminService } from '@relayplane/proto/admin';
import { BillingService } from '@relayplane/proto/billing';
import { IssuerService } from '@relayplane/proto/issuer';
import type { GrpcTls } from '@relayplane/shared/grpc-tls';
import { HealthService } from '@relayplane/shared/health';
import { connect, type ServiceClient } from '@relayplane/shared/rpc';

export type AdminClient = ServiceClient<typeof AdminService>;
export type IssuerClient = ServiceClient<typeof IssuerService>;
export type BillingClient = ServiceClient<typeof BillingService>;

/** The gRPC service name of each downstream (its health check asks for it). */
export const SERVICE_NAMES = {
  admin: AdminService.typeName,
  issuer: IssuerService.typeName,
  billing: BillingService.typeName,
} as const;
export type Downstream = keyof typeof SERVICE_NAMES;
export const DOWNSTREAMS = Object.keys(SERVICE_NAMES) as Downstream[];

/** Every downstream the gateway calls, each a typed gRPC client. */
export interface GatewayClients {
  admin: AdminClient;
  issuer: IssuerClient;
  billing: BillingClient;
  health: Record<Downstream, ServiceClient<typeof HealthService>>;
}

/** The clients of every downstream; with `tls`, each over mutual TLS expecting that service's identity. */
export function connectClients(
  addresses: Record<Downstream, string>,
  timeoutMs: number,
  dnsMinIntervalMs?: number,
  tls?: GrpcTls,
): GatewayClients {
  const options = (to: Downstream) => ({ timeoutMs, dnsMinIntervalMs, tls: tls?.client(to) });
  const health = (to: Downstream) => ({ timeoutMs: 1_000, dnsMinIntervalMs, tls: tls?.client(to) });
  return {
    admin: connect(AdminService, addresses.admin, options('admin')),
    issuer: connect(IssuerService, addresses.issuer, options('issuer')),
    billing: connect(BillingService, addresses.billing, options('billing')),
    health: {
      admin: connect(HealthService, addresses.admin, health('admin')),
      issuer: connect(HealthService, addresses.issuer, health('issuer')),
      billing: connect(HealthService, addresses.billing, health('billing')),
    },
  };
}

export function closeClients(clients: GatewayClients): void {
  clients.admin.close();
  clients.issuer.close();
  clients.billing.close();
  for (const h of Object.values(clients.health)) h.close();
}
