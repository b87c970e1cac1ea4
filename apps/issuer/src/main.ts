import { warnIfPlaintext } from '@relayplane/shared/grpc-tls';
import { runMain } from '@relayplane/shared/process';
import { readIssuerConfig } from './config.ts';
import { IssuerService } from './service.ts';

await runMain(async () => {
  const service = await IssuerService.create(readIssuerConfig(process.env));
  warnIfPlaintext(service.logger, service.config.grpcTls);
  return service;
});
