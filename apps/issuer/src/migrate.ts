/** `pnpm --filter @relayplane/issuer migrate`: applies the issuer schema's migrations and exits. */
import { SERVICES } from '@relayplane/shared/contract';
import { createDatabase } from '@relayplane/shared/db';
import { createLogger } from '@relayplane/shared/logger';
import { readIssuerConfig } from './config.ts';
import { migrations } from './db/migrations/index.ts';

// Migrating needs neither the KEK nor Redis.
const config = readIssuerConfig(process.env, { kek: Buffer.alloc(32), redis: undefined });
const logger = createLogger({ level: config.logLevel, service: SERVICES.issuer });
const database = await createDatabase(config.database, SERVICES.issuer, logger);
try {
  const applied = await database.migrate(migrations);
  logger.info({ applied }, applied.length ? 'migrations applied' : 'schema up to date');
} finally {
  await database.destroy();
}
