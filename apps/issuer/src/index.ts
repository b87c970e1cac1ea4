export {
  type CredentialsConfig,
  DEFAULT_CREDENTIAL_AUDIENCE,
  DEFAULT_CREDENTIAL_ISSUER,
  DEFAULT_MAINTENANCE_INTERVAL_SECONDS,
  DEFAULT_MAX_CREDENTIAL_TTL_SECONDS,
  DEFAULT_REDIS_COMMAND_TIMEOUT_MS,
  DEFAULT_ROTATION_INTERVAL_SECONDS,
  type IssuerConfig,
  type IssuerConfigOverrides,
  type IssuerKeysConfig,
  loadOrCreateKek,
  readIssuerConfig,
} from './config.ts';
export {
  CREDENTIALS_REVOKED_CHANNEL,
  DEFAULT_SCOPES,
  DEFAULT_TTL_SECONDS,
  MAX_TTL_SECONDS,
  MIN_TTL_SECONDS,
} from './credentials/credentials.ts';
export { CREDENTIAL_MODES, CREDENTIAL_SCOPES, type CredentialClaims } from './credentials/jwt.ts';
export {
  CLOCK_SKEW_LEEWAY_SECONDS,
  JWKS_MAX_AGE_SECONDS,
  type KeyState,
} from './domain/key-lifecycle.ts';
export type { PublicJwk } from './keys/key-material.ts';
export type { ActiveSigningKey, JwksDocument } from './keys/key-ring.ts';
export { DEMO_RELAYS, type RelayConfig, type StaticRelay } from './relays/relay-config.ts';
export {
  type IssuerOverrides,
  IssuerService,
  KEY_MAINTENANCE_JOB,
  type KeysReloadedEvent,
  type KeysReloadReason,
  SIGNING_KEYS_CHANGED_CHANNEL,
} from './service.ts';
