import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError, EnvReader, LOG_LEVELS, type LogLevel } from '@relayplane/shared/config';
import type { DatabaseConfig } from '@relayplane/shared/db';
import type { RedisConfig } from '@relayplane/shared/redis';
import { JWKS_MAX_AGE_SECONDS, type RotationPolicy } from './domain/key-lifecycle.ts';
import { KEK_BYTES } from './keys/key-material.ts';

export interface IssuerKeysConfig extends RotationPolicy {
  /** How often the maintenance tick runs (scheduled rotation, next-key creation, removal). */
  maintenanceIntervalSeconds: number;
}

export interface IssuerConfig {
  /** host:port the gRPC server binds (port 0: any free port). */
  listen: string;
  database: DatabaseConfig;
  /** Redis for the bus and the job scheduler; null in embedded mode (in-process twins). */
  redis: RedisConfig | null;
  /** 32-byte key-encryption key sealing the signing keys' private halves. */
  kek: Buffer;
  keys: IssuerKeysConfig;
  logLevel: LogLevel;
}

export const DEFAULT_ROTATION_INTERVAL_SECONDS = 30 * 24 * 3600;
export const MIN_ROTATION_INTERVAL_SECONDS = 600;
export const DEFAULT_MAX_CREDENTIAL_TTL_SECONDS = 3600;
export const DEFAULT_MAINTENANCE_INTERVAL_SECONDS = 30;

export function readIssuerConfig(
  env: Readonly<Record<string, string | undefined>>,
  overrides: Partial<IssuerConfig> = {},
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
    database: overrides.database ?? {
      kind: 'postgres',
      url: r.url('ISSUER_DATABASE_URL', ['postgres:', 'postgresql:'], r.optional('DATABASE_URL')),
      poolMax: r.int('ISSUER_DATABASE_POOL_MAX', 10, { min: 1, max: 200 }),
    },
    redis:
      overrides.redis !== undefined
        ? overrides.redis
        : {
            url: r.url('ISSUER_REDIS_URL', ['redis:', 'rediss:'], r.optional('REDIS_URL')),
            prefix: r.string('ISSUER_REDIS_PREFIX', r.optional('RELAYPLANE_REDIS_PREFIX') ?? 'relayplane:'),
          },
    kek: overrides.kek ?? requiredKek(r),
    keys,
    logLevel: overrides.logLevel ?? r.oneOf('LOG_LEVEL', LOG_LEVELS, 'info'),
  };
}

function requiredKek(r: EnvReader): Buffer {
  const kek = r.base64Key('RELAYPLANE_KEK', KEK_BYTES);
  if (!kek) {
    throw new ConfigError(
      'RELAYPLANE_KEK',
      `is required but not set (base64 of ${KEK_BYTES} random bytes, e.g. \`openssl rand -base64 32\`)`,
    );
  }
  return kek;
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
