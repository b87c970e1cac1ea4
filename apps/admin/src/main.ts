import { runMain } from '@relayplane/shared/process';
import { readAdminConfig } from './config.ts';
import { AdminService } from './service.ts';

await runMain(async () => AdminService.create(readAdminConfig(process.env)));
