/** `pnpm --filter @relayplane/admin migrate`: applies the admin schema's migrations and exits. */
import { SERVICES } from '@relayplane/contract/contract';
import { runMigrations } from '@relayplane/shared/db';
import { readAdminConfig } from './config.ts';
import { migrations } from './db/migrations/index.ts';

// Migrating needs no KEK.
await runMigrations(
  SERVICES.admin,
  readAdminConfig(process.env, { kek: Buffer.alloc(32), kekPrevious: [] }),
  migrations,
);
