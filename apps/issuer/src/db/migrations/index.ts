import type { Migration } from 'kysely/migration';
import * as signingKeys from './20261122T2000-signing-keys.ts';

/** Every migration of the issuer schema, by name (applied in name order). */
export const migrations: Record<string, Migration> = {
  '20261122T2000-signing-keys': signingKeys,
};
