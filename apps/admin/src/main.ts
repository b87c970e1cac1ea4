import { SERVICES } from '@relayplane/contract/contract';
import { warnIfPlaintext } from '@relayplane/shared/grpc-tls';
import { runMain } from '@relayplane/shared/process';
import { withTracing } from '@relayplane/shared/tracing';
import { readAdminConfig } from './config.ts';
import { AdminService } from './service.ts';

// Tracing first (docs/tracing.md): on only when an OTEL_EXPORTER_OTLP_*ENDPOINT is set.
await runMain(() =>
  withTracing(process.env, SERVICES.admin, async () => {
    const service = await AdminService.create(readAdminConfig(process.env));
    warnIfPlaintext(service.logger, service.config.grpcTls);
    return service;
  }),
);
