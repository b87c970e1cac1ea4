/** `pnpm --filter @relayplane/admin migrate`: applies the admin schema's migrations and exits. */
import { SERVICES } from '@relayplane/shared/contract';
import { createDatabase } from '@relayplane/shared/db';
import { createLogger } from '@relayplane/shared/logger';
import { readAdminConfig } from './config.ts';
import { migrations } from './db/migrations/index.ts';

const config = readAdminConfig(process.env);
const logger = createLogger({ level: config.logLevel, service: SERVICES.admin });
const database = await createDatabase(config.database, SERVICES.admin, logger);
try {
  const applied = await database.migrate(migrations);
  logger.info({ applied }, applied.length ? 'migrations applied' : 'schema up to date');
} finally {
  await database.destroy();
}
