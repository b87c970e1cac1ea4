import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { LeasedRateLimiter } from '@relayplane/shared/rate-limit';
import type {
  FastifyBaseLogger,
  FastifyInstance,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
} from 'fastify';
import type { GatewayClients } from '../clients.ts';
import type { EntitlementCache } from '../entitlements.ts';
import type { IssuanceClient } from '../issuance-client.ts';
import type { JwksCache } from '../jwks-cache.ts';
import type { AuthGuards } from '../plugins/auth.ts';

/**
 * What routes register on: Fastify typed by the TypeBox provider, so a route's request and its
 * answers take their types from the one schema that also validates them and documents them.
 */
export type Api = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;

export interface RouteDeps {
  clients: GatewayClients;
  jwks: JwksCache;
  guards: AuthGuards;
  entitlements: EntitlementCache;
  issuance: IssuanceClient;
  /** `max_issuance_per_second_per_key`, per API key id, counted across gateways (Redis leases). */
  issuanceRate: LeasedRateLimiter;
  /**
   * Drops this gateway's cached verification of an API key at once (the key was revoked through
   * it). Other replicas learn of it from the bus, and their cache entries expire within a second.
   */
  forgetApiKey(keyId: string): void;
  /** Aborted at SIGTERM: /readyz answers 503 (the gateway serves on for GATEWAY_SHUTDOWN_DELAY_MS). */
  stopping: AbortSignal;
  /** Aborted when the server closes (after that delay): held long-polls answer at once. */
  shutdown: AbortSignal;
}
