import { warnIfPlaintext } from '@relayplane/shared/grpc-tls';
import { runMain } from '@relayplane/shared/process';
import { readAdminConfig } from './config.ts';
import { AdminService } from './service.ts';

await runMain(async () => {
  const service = await AdminService.create(readAdminConfig(process.env));
  warnIfPlaintext(service.logger, service.config.grpcTls);
  return service;
});
