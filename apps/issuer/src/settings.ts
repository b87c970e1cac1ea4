/**
 * Every environment variable the issuer reads, declared once (packages/shared/src/settings.ts):
 * config.ts and relays/relay-config.ts read them, `pnpm docs:config` documents them.
 */
import { integer, other, type Setting, text } from '@relayplane/shared/settings';
import {
  databaseSettings,
  GRPC_TLS_SETTINGS,
  grpcServerSettings,
  KEK,
  KEK_PREVIOUS,
  LOG_LEVEL,
  metricsSetting,
  redisSettings,
} from '@relayplane/shared/settings-common';
import { JWKS_MAX_AGE_SECONDS } from './keys/key-lifecycle.ts';

/**
 * 35 days after expiry. Billing recomputes yesterday and today from these rows, so 2 days is
 * the floor (a day's summary is final before its rows go). Billing reports a completed day to a
 * Stripe meter for up to 30 days (Stripe refuses events older than 35), so any day it may still
 * report can be recomputed from its source, and a month of credentials stays listable
 * (ListCredentials) for an investigation of a leaked key.
 */
const DEFAULT_CREDENTIAL_RETENTION_DAYS = 35;
const MIN_CREDENTIAL_RETENTION_DAYS = 2;

const server = grpcServerSettings('ISSUER', '127.0.0.1:50051');
const database = databaseSettings('ISSUER');
const redis = redisSettings(
  'ISSUER',
  'Required in the distributed mode: connection slots, revocation marks, the bus, the maintenance queue.',
);

export const ISSUER = {
  listen: server.listen,
  maxConnectionAge: server.maxConnectionAge,
  databaseUrl: database.url,
  databasePoolMax: database.poolMax,
  redisUrl: redis.url,
  redisClusterNodes: redis.clusterNodes,
  redisPrefix: redis.prefix,
  kek: KEK,
  kekPrevious: KEK_PREVIOUS,
  keyRotationInterval: integer('ISSUER_KEY_ROTATION_INTERVAL_SECONDS', {
    default: 30 * 24 * 3600,
    min: 600,
    max: 366 * 24 * 3600,
    description: 'How often the signing key rotates (30 days by default).',
  }),
  maxCredentialTtl: integer('ISSUER_MAX_CREDENTIAL_TTL_SECONDS', {
    default: 3600,
    min: 60,
    max: 7 * 24 * 3600,
    description:
      "The longest credential lifetime: how long a previous key stays published, and the bound on every request's `ttl_seconds` over the plan's.",
  }),
  keyMaintenanceInterval: integer('ISSUER_KEY_MAINTENANCE_INTERVAL_SECONDS', {
    default: 30,
    min: 1,
    max: JWKS_MAX_AGE_SECONDS,
    description:
      'How often key maintenance (due rotations, removals, re-sealing) runs, once across replicas.',
  }),
  redisCommandTimeout: integer('ISSUER_REDIS_COMMAND_TIMEOUT_MS', {
    default: 500,
    min: 50,
    max: 10_000,
    description: 'A slow Redis fails issuance closed (503) after this.',
  }),
  credentialRetention: integer('ISSUER_CREDENTIAL_RETENTION_DAYS', {
    default: DEFAULT_CREDENTIAL_RETENTION_DAYS,
    min: MIN_CREDENTIAL_RETENTION_DAYS,
    max: 36_500,
    description:
      "Days a credential's row and revocation entry are kept after it expired; deleted in batches once across replicas, never before billing's usage of their days is final (docs/credentials.md, Retention). Also read in the embedded mode.",
  }),
  credentialIssuer: text('RELAYPLANE_CREDENTIAL_ISSUER', 'string', {
    default: 'relayplane',
    description: "The credentials' `iss` (1–256 characters).",
  }),
  credentialAudience: text('RELAYPLANE_CREDENTIAL_AUDIENCE', 'string', {
    default: 'relayplane-relay',
    description: "The credentials' `aud` (1–256 characters).",
  }),
  relaysFile: other('RELAYPLANE_RELAYS_FILE', 'file', {
    description:
      'Static relays and fallback entry points, YAML or JSON; unset: none (embedded: demo relays).',
  }),
  relayHealthWindow: integer('ISSUER_RELAY_HEALTH_WINDOW_SECONDS', {
    default: 30,
    min: 5,
    max: 3600,
    description: 'A relay without a heartbeat for this long is not assigned.',
  }),
  maxAssignedRelays: integer('ISSUER_MAX_ASSIGNED_RELAYS', {
    default: 3,
    min: 1,
    max: 20,
    description: 'Relays answered with each credential.',
  }),
  relayRefresh: integer('ISSUER_RELAY_REFRESH_MS', {
    default: 1_000,
    min: 100,
    max: 60_000,
    description: 'How often the relay registry is re-read.',
  }),
  sessionRevalidate: integer('RELAYPLANE_RELAY_SESSION_REVALIDATE_SECONDS', {
    default: 15,
    min: 1,
    max: 3600,
    description:
      "Relay sessions: the grant's `revalidate` cadence. Revocation ends a live session within one cadence; a relay that dies without `end` frees its sessions' slots after two (docs/credentials.md, Sessions).",
  }),
  sessionExpires: integer('RELAYPLANE_RELAY_SESSION_EXPIRES_SECONDS', {
    default: 120,
    min: 2,
    max: 86_400,
    description:
      "Relay sessions: each grant's `expires` is now + this, renewed by every revalidation: how long sessions outlive an outage of Relayplane. More than the cadence.",
  }),
  connectWindow: integer('RELAYPLANE_RELAY_CONNECT_WINDOW_SECONDS', {
    default: 60,
    min: 1,
    max: 3600,
    description:
      'A credential issued holds a concurrent-connection slot for this long (at most its TTL) unless it connects first; a session then holds it until it ends.',
  }),
  refusalWindow: integer('RELAYPLANE_WEBHOOKS_REFUSAL_WINDOW_SECONDS', {
    default: 60,
    min: 1,
    max: 3600,
    description:
      'Refused relay connects are counted per project and sent as one session.refused webhook per window per issuer replica (docs/webhooks.md).',
  }),
  adminAddress: text('ISSUER_ADMIN_ADDRESS', 'target', {
    default: '127.0.0.1:50052',
    description:
      "gRPC target of admin (the gateway's forms): the audit outbox delivers the issuer's events there.",
  }),
  metrics: metricsSetting('ISSUER'),
  healthListen: server.healthListen,
  logLevel: LOG_LEVEL,
} as const;

/** Every variable the issuer reads, in the order documented. */
export const ISSUER_SETTINGS: readonly Setting[] = [...Object.values(ISSUER), ...GRPC_TLS_SETTINGS];
