/** `pnpm --filter @relayplane/billing migrate`: applies the billing schema's migrations and exits. */
import { SERVICES } from '@relayplane/shared/contract';
import { createDatabase } from '@relayplane/shared/db';
import { createLogger } from '@relayplane/shared/logger';
import { readBillingConfig } from './config.ts';
import { migrations } from './db/migrations/index.ts';

const config = readBillingConfig(process.env);
const logger = createLogger({ level: config.logLevel, service: SERVICES.billing });
const database = await createDatabase(config.database, SERVICES.billing, logger);
try {
  const applied = await database.migrate(migrations);
  logger.info({ applied }, applied.length ? 'migrations applied' : 'schema up to date');
} finally {
  await database.destroy();
}
