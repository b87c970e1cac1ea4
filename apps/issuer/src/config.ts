import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SERVICES } from '@relayplane/contract/contract';
import {
  ConfigError,
  EnvReader,
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
import type { TextSetting } from '@relayplane/shared/settings';
import { variablesOf } from '@relayplane/shared/settings-common';
import type { IssuerKeysConfig } from './keys/key-lifecycle.ts';
import { KEK_BYTES } from './keys/key-material.ts';
import { type RelayConfig, readRelayConfig } from './relays/relay-config.ts';
import { ISSUER } from './settings.ts';

/** What relay credentials say about who issued them and for whom (docs/credentials.md). */
export interface CredentialsConfig {
  /** The `iss` claim (`RELAYPLANE_CREDENTIAL_ISSUER`, default `relayplane`). */
  issuer: string;
  /** The `aud` claim (`RELAYPLANE_CREDENTIAL_AUDIENCE`, default `relayplane-relay`). */
  audience: string;
}

/** Relay sessions (docs/credentials.md, "Sessions"). */
export interface RelaySessionsConfig {
  /** The grant's `revalidate` cadence (s). */
  revalidateSeconds: number;
  /** Each grant's `expires` is now + this (s), renewed by every revalidation. */
  expiresSeconds: number;
  /** How long an issued credential holds a slot before it connects (s, at most its TTL). */
  connectWindowSeconds: number;
  /** Refusals are sent as one session.refused per project per this window (s). */
  refusalWindowSeconds: number;
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
  sessions: RelaySessionsConfig;
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

export function readIssuerConfig(
  env: Readonly<Record<string, string | undefined>>,
  overrides: IssuerConfigOverrides = {},
): IssuerConfig {
  const r = new EnvReader(env);
  const S = ISSUER;
  const keys = overrides.keys ?? {
    rotationIntervalSeconds: r.read(S.keyRotationInterval),
    maxCredentialTtlSeconds: r.read(S.maxCredentialTtl),
    maintenanceIntervalSeconds: r.read(S.keyMaintenanceInterval),
  };
  return {
    listen: overrides.listen ?? r.read(S.listen),
    maxConnectionAgeMs: overrides.maxConnectionAgeMs ?? readMaxConnectionAgeMs(r, S.maxConnectionAge.env),
    database:
      overrides.database ??
      readDatabase(r, { url: variablesOf(S.databaseUrl), poolMax: S.databasePoolMax.env }),
    redis:
      'redis' in overrides
        ? overrides.redis
        : readRedis(
            r,
            {
              url: variablesOf(S.redisUrl),
              clusterNodes: variablesOf(S.redisClusterNodes),
              prefix: variablesOf(S.redisPrefix),
            },
            { required: true },
          ),
    kek: overrides.kek ?? readKek(r, 'RELAYPLANE_KEK'),
    previousKeks: overrides.previousKeks ?? readPreviousKeks(r, 'RELAYPLANE_KEK_PREVIOUS'),
    keys,
    credentials: overrides.credentials ?? {
      issuer: claimValue(r, S.credentialIssuer),
      audience: claimValue(r, S.credentialAudience),
    },
    credentialRetentionDays: overrides.credentialRetentionDays ?? r.read(S.credentialRetention),
    redisCommandTimeoutMs: overrides.redisCommandTimeoutMs ?? r.read(S.redisCommandTimeout),
    relays: readRelayConfig(r, overrides.relays),
    sessions: overrides.sessions ?? readSessions(r),
    adminAddress: overrides.adminAddress ?? r.read(S.adminAddress),
    metricsAddress:
      'metricsAddress' in overrides ? overrides.metricsAddress : readMetricsAddress(r, S.metrics.env),
    grpcTls: 'grpcTls' in overrides ? overrides.grpcTls : readGrpcTls(r, SERVICES.issuer),
    healthListen:
      'healthListen' in overrides ? overrides.healthListen : readHealthListen(r, S.healthListen.env),
    logLevel: overrides.logLevel ?? (r.read(S.logLevel) as LogLevel),
  };
}

function readSessions(r: EnvReader): RelaySessionsConfig {
  const S = ISSUER;
  const sessions = {
    revalidateSeconds: r.read(S.sessionRevalidate),
    expiresSeconds: r.read(S.sessionExpires),
    connectWindowSeconds: r.read(S.connectWindow),
    refusalWindowSeconds: r.read(S.refusalWindow),
  };
  if (sessions.expiresSeconds <= sessions.revalidateSeconds) {
    throw new ConfigError(
      S.sessionExpires.env,
      `must be more than RELAYPLANE_RELAY_SESSION_REVALIDATE_SECONDS (${sessions.revalidateSeconds})`,
    );
  }
  return sessions;
}

function claimValue(r: EnvReader, setting: TextSetting): string {
  const value = r.read(setting).trim();
  if (value.length === 0 || value.length > 256) {
    throw new ConfigError(setting.env, 'must be 1-256 characters');
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
