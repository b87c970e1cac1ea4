import { warnIfPlaintext } from '@relayplane/shared/grpc-tls';
import { runMain } from '@relayplane/shared/process';
import { readGatewayConfig } from './config.ts';
import { GatewayService } from './service.ts';

await runMain(async () => {
  const service = await GatewayService.create(readGatewayConfig(process.env));
  warnIfPlaintext(service.logger, service.config.grpcTls);
  return service;
});
