import { SERVICES } from '@relayplane/contract/contract';
import { warnIfPlaintext } from '@relayplane/shared/grpc-tls';
import { runMain } from '@relayplane/shared/process';
import { withTracing } from '@relayplane/shared/tracing';
import { readIssuerConfig } from './config.ts';
import { IssuerApp } from './service.ts';

// Tracing first (docs/tracing.md): on only when an OTEL_EXPORTER_OTLP_*ENDPOINT is set.
await runMain(() =>
  withTracing(process.env, SERVICES.issuer, async () => {
    const service = await IssuerApp.create(readIssuerConfig(process.env));
    warnIfPlaintext(service.logger, service.config.grpcTls);
    return service;
  }),
);
