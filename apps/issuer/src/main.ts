import { runMain } from '@relayplane/shared/process';
import { readIssuerConfig } from './config.ts';
import { IssuerService } from './service.ts';

await runMain(async () => IssuerService.create(readIssuerConfig(process.env)));
