import { SERVICES } from '@relayplane/contract/contract';
import { warnIfPlaintext } from '@relayplane/shared/grpc-tls';
import { runMain } from '@relayplane/shared/process';
import { withTracing } from '@relayplane/shared/tracing';
import { readBillingConfig } from './config.ts';
import { BillingService } from './service.ts';

// Tracing first (docs/tracing.md): on only when an OTEL_EXPORTER_OTLP_*ENDPOINT is set.
await runMain(() =>
  withTracing(process.env, SERVICES.billing, async () => {
    const service = await BillingService.create(readBillingConfig(process.env));
    warnIfPlaintext(service.logger, service.config.grpcTls);
    return service;
  }),
);
