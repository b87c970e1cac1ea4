import { warnIfPlaintext } from '@relayplane/shared/grpc-tls';
import { runMain } from '@relayplane/shared/process';
import { readBillingConfig } from './config.ts';
import { BillingService } from './service.ts';

await runMain(async () => {
  const service = await BillingService.create(readBillingConfig(process.env));
  warnIfPlaintext(service.logger, service.config.grpcTls);
  return service;
});
