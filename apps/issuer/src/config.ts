import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SERVICES } from '@relayplane/contract/contract';
import {
  ConfigError,
  EnvReader,
  LOG_LEVELS,
  type LogLevel,
  readDatabase,
  readKek,
  readMaxConnectionAgeMs,
  readMetricsAddress,
  readPreviousKeks,
  readRedis,
} from '@relayplane/shared/config';
import type { DatabaseConfig } from '@relayplane/shared/db';
import { type GrpcTlsConfig, readGrpcTls, readHealthListen } from '@relayplane/shared/grpc-tls';
import type { RedisConfig } from '@relayplane/shared/redis';
import { type IssuerKeysConfig, JWKS_MAX_AGE_SECONDS } from './keys/key-lifecycle.ts';
import { KEK_BYTES } from './keys/key-material.ts';
import { type RelayConfig, readRelayConfig } from './relays/relay-config.ts';

/** What relay credentials say about who issued them and for whom (docs/credentials.md). */
export interface CredentialsConfig {
  /** The `iss` claim (`RELAYPLANE_CREDENTIAL_ISSUER`, default `relayplane`). */
  issuer: string;
  /** The `aud` claim (`RELAYPLANE_CREDENTIAL_AUDIENCE`, default `relayplane-relay`). */
  audience: string;
}

export interface IssuerConfig {
  /** host:port the gRPC server binds (port 0: any free port). */
  listen: string;
  /** gRPC server max connection age (ms); 0: never. */
  maxConnectionAgeMs: number;
  database: DatabaseConfig;
  /**
   * Redis for the bus, the job scheduler and the request path (slots, revocation markers);
   * required in distributed mode, undefined in embedded mode (in-process twins).
   */
  redis: RedisConfig | undefined;
  /** 32-byte key-encryption key sealing the signing keys' private halves. */
  kek: Buffer;
  /**
   * Earlier KEKs (`RELAYPLANE_KEK_PREVIOUS`, comma-separated): keys they sealed still open, and
   * key maintenance re-encrypts them under `kek` (docs/ARCHITECTURE.md, key life cycle).
   */
  previousKeks: Buffer[];
  keys: IssuerKeysConfig;
  credentials: CredentialsConfig;
  /**
   * Days a credential's row (and its revocation) is kept after the credential expired
   * (`ISSUER_CREDENTIAL_RETENTION_DAYS`); older ones are deleted by the retention job
   * (docs/credentials.md, "Retention").
   */
  credentialRetentionDays: number;
  /**
   * Bound on one request-path Redis command (slot reservation, revocation marker): past it
   * issuance answers `unavailable` (fail closed) rather than waiting.
   */
  redisCommandTimeoutMs: number;
  relays: RelayConfig;
  /** gRPC target of admin (`ISSUER_ADMIN_ADDRESS`): the audit outbox delivers events there. */
  adminAddress: string;
  /** host:port of the Prometheus metrics listener (`ISSUER_METRICS_ADDRESS`); undefined: none. */
  metricsAddress: string | undefined;
  /** Mutual TLS on this service's gRPC links (`RELAYPLANE_GRPC_TLS_*`); undefined: plaintext. */
  grpcTls: GrpcTlsConfig | undefined;
  /** host:port of the plaintext, health-only gRPC listener (`ISSUER_HEALTH_LISTEN_ADDRESS`); undefined: none. */
  healthListen: string | undefined;
  logLevel: LogLevel;
}

/** Overrides of `readIssuerConfig`: whole sections, except relays, merged field by field. */
export type IssuerConfigOverrides = Partial<Omit<IssuerConfig, 'relays'>> & {
  /** Embedded mode passes `DEMO_RELAYS` here when no relays file is set. */
  relays?: Partial<RelayConfig>;
};

const DEFAULT_ROTATION_INTERVAL_SECONDS = 30 * 24 * 3600;
const MIN_ROTATION_INTERVAL_SECONDS = 600;
const DEFAULT_MAX_CREDENTIAL_TTL_SECONDS = 3600;
const DEFAULT_MAINTENANCE_INTERVAL_SECONDS = 30;
const DEFAULT_CREDENTIAL_ISSUER = 'relayplane';
const DEFAULT_CREDENTIAL_AUDIENCE = 'relayplane-relay';
const DEFAULT_REDIS_COMMAND_TIMEOUT_MS = 500;
/**
 * 35 days after expiry. Billing recomputes yesterday and today from these rows, so 2 days is
 * the floor (a day's summary is final before its rows go). Billing reports a completed day to a
 * Stripe meter for up to 30 days (Stripe refuses events older than 35), so any day it may still
 * report can be recomputed from its source, and a month of credentials stays listable
 * (ListCredentials) for an investigation of a leaked key.
 */
export const DEFAULT_CREDENTIAL_RETENTION_DAYS = 35;
export const MIN_CREDENTIAL_RETENTION_DAYS = 2;
const MAX_CREDENTIAL_RETENTION_DAYS = 36_500;

export function readIssuerConfig(
  env: Readonly<Record<string, string | undefined>>,
  overrides: IssuerConfigOverrides = {},
): IssuerConfig {
  const r = new EnvReader(env);
  const keys = overrides.keys ?? {
    rotationIntervalSeconds: r.int(
      'ISSUER_KEY_ROTATION_INTERVAL_SECONDS',
      DEFAULT_ROTATION_INTERVAL_SECONDS,
      {
        min: MIN_ROTATION_INTERVAL_SECONDS,
        max: 366 * 24 * 3600,
      },
    ),
    maxCredentialTtlSeconds: r.int('ISSUER_MAX_CREDENTIAL_TTL_SECONDS', DEFAULT_MAX_CREDENTIAL_TTL_SECONDS, {
      min: 60,
      max: 7 * 24 * 3600,
    }),
    maintenanceIntervalSeconds: r.int(
      'ISSUER_KEY_MAINTENANCE_INTERVAL_SECONDS',
      DEFAULT_MAINTENANCE_INTERVAL_SECONDS,
      { min: 1, max: JWKS_MAX_AGE_SECONDS },
    ),
  };
  return {
    listen: overrides.listen ?? r.address('ISSUER_LISTEN_ADDRESS', '127.0.0.1:50051'),
    maxConnectionAgeMs:
      overrides.maxConnectionAgeMs ?? readMaxConnectionAgeMs(r, 'ISSUER_GRPC_MAX_CONNECTION_AGE_MS'),
    database:
      overrides.database ??
      readDatabase(r, { url: ['ISSUER_DATABASE_URL', 'DATABASE_URL'], poolMax: 'ISSUER_DATABASE_POOL_MAX' }),
    redis:
      'redis' in overrides
        ? overrides.redis
        : readRedis(
            r,
            {
              url: ['ISSUER_REDIS_URL', 'REDIS_URL'],
              clusterNodes: ['ISSUER_REDIS_CLUSTER_NODES', 'RELAYPLANE_REDIS_CLUSTER_NODES'],
              prefix: ['ISSUER_REDIS_PREFIX', 'RELAYPLANE_REDIS_PREFIX'],
            },
            { required: true },
          ),
    kek: overrides.kek ?? readKek(r, 'RELAYPLANE_KEK'),
    previousKeks: overrides.previousKeks ?? readPreviousKeks(r, 'RELAYPLANE_KEK_PREVIOUS'),
    keys,
    credentials: overrides.credentials ?? {
      issuer: claimValue(r, 'RELAYPLANE_CREDENTIAL_ISSUER', DEFAULT_CREDENTIAL_ISSUER),
      audience: claimValue(r, 'RELAYPLANE_CREDENTIAL_AUDIENCE', DEFAULT_CREDENTIAL_AUDIENCE),
    },
    credentialRetentionDays:
      overrides.credentialRetentionDays ??
      r.int('ISSUER_CREDENTIAL_RETENTION_DAYS', DEFAULT_CREDENTIAL_RETENTION_DAYS, {
        min: MIN_CREDENTIAL_RETENTION_DAYS,
        max: MAX_CREDENTIAL_RETENTION_DAYS,
      }),
    redisCommandTimeoutMs:
      overrides.redisCommandTimeoutMs ??
      r.int('ISSUER_REDIS_COMMAND_TIMEOUT_MS', DEFAULT_REDIS_COMMAND_TIMEOUT_MS, { min: 50, max: 10_000 }),
    relays: readRelayConfig(r, overrides.relays),
    adminAddress: overrides.adminAddress ?? r.target('ISSUER_ADMIN_ADDRESS', '127.0.0.1:50052'),
    metricsAddress:
      'metricsAddress' in overrides
        ? overrides.metricsAddress
        : readMetricsAddress(r, 'ISSUER_METRICS_ADDRESS'),
    grpcTls: 'grpcTls' in overrides ? overrides.grpcTls : readGrpcTls(r, SERVICES.issuer),
    healthListen:
      'healthListen' in overrides
        ? overrides.healthListen
        : readHealthListen(r, 'ISSUER_HEALTH_LISTEN_ADDRESS'),
    logLevel: overrides.logLevel ?? r.oneOf('LOG_LEVEL', LOG_LEVELS, 'info'),
  };
}

function claimValue(r: EnvReader, name: string, fallback: string): string {
  const value = r.string(name, fallback).trim();
  if (value.length === 0 || value.length > 256) {
    throw new ConfigError(name, 'must be 1-256 characters');
  }
  return value;
}

/**
 * Embedded mode: the KEK lives in `<dataDir>/kek` (base64, mode 0600). Reads it, or creates
 * it when absent; `created` tells the caller to warn that a generated key now guards the data.
 */
export function loadOrCreateKek(dataDir: string): { kek: Buffer; created: boolean; path: string } {
  const path = join(dataDir, 'kek');
  const read = (): Buffer => {
    const text = readFileSync(path, 'utf8').trim();
    const kek = Buffer.from(text, 'base64');
    if (kek.length !== KEK_BYTES || kek.toString('base64').replace(/=+$/, '') !== text.replace(/=+$/, '')) {
      throw new ConfigError(
        'RELAYPLANE_DATA_DIR',
        `holds ${path}, which is not ${KEK_BYTES} bytes of base64`,
      );
    }
    return kek;
  };
  try {
    return { kek: read(), created: false, path };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const kek = randomBytes(KEK_BYTES);
  try {
    // `wx`: if another process created it first, use theirs.
    writeFileSync(path, `${kek.toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return { kek: read(), created: false, path };
    throw err;
  }
  return { kek, created: true, path };
}
