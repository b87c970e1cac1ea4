import { runMain } from '@relayplane/shared/process';
import { readGatewayConfig } from './config.ts';
import { GatewayService } from './service.ts';

await runMain(async () => GatewayService.create(readGatewayConfig(process.env)));
