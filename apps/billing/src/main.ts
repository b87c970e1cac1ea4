import { runMain } from '@relayplane/shared/process';
import { readBillingConfig } from './config.ts';
import { BillingService } from './service.ts';

await runMain(async () => BillingService.create(readBillingConfig(process.env)));
