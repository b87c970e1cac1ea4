/** `pnpm --filter @relayplane/billing migrate`: applies the billing schema's migrations and exits. */
import { SERVICES } from '@relayplane/contract/contract';
import { runMigrations } from '@relayplane/shared/db';
import { readBillingConfig } from './config.ts';
import { migrations } from './db/migrations/index.ts';

await runMigrations(SERVICES.billing, readBillingConfig(process.env), migrations);
