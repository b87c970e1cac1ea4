export {
  DEFAULT_MAINTENANCE_INTERVAL_SECONDS,
  DEFAULT_MAX_CREDENTIAL_TTL_SECONDS,
  DEFAULT_ROTATION_INTERVAL_SECONDS,
  type IssuerConfig,
  type IssuerKeysConfig,
  loadOrCreateKek,
  readIssuerConfig,
} from './config.ts';
export {
  CLOCK_SKEW_LEEWAY_SECONDS,
  JWKS_MAX_AGE_SECONDS,
  type KeyState,
} from './domain/key-lifecycle.ts';
export type { PublicJwk } from './keys/key-material.ts';
export type { ActiveSigningKey, JwksDocument } from './keys/key-ring.ts';
export {
  type IssuerOverrides,
  IssuerService,
  KEY_MAINTENANCE_JOB,
  type KeysReloadedEvent,
  type KeysReloadReason,
  SIGNING_KEYS_CHANGED_CHANNEL,
} from './service.ts';
