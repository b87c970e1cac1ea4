/** `pnpm --filter @relayplane/issuer migrate`: applies the issuer schema's migrations and exits. */
import { SERVICES } from '@relayplane/contract/contract';
import { runMigrations } from '@relayplane/shared/db';
import { readIssuerConfig } from './config.ts';
import { migrations } from './db/migrations/index.ts';

// Migrating needs neither the KEK nor Redis.
await runMigrations(
  SERVICES.issuer,
  readIssuerConfig(process.env, { kek: Buffer.alloc(32), previousKeks: [], redis: undefined }),
  migrations,
);
