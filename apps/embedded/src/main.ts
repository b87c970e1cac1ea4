import { runMain } from '@relayplane/shared/process';
import { withTracing } from '@relayplane/shared/tracing';
import { banner } from './banner.ts';
import { Embedded } from './embedded.ts';

// Tracing first (OTEL_* variables; off unless an endpoint is set): docs/tracing.md.
await runMain(() =>
  withTracing(process.env, 'embedded', async () => {
    let embedded: Embedded | undefined;
    return {
      async start() {
        embedded = await Embedded.start(process.env);
        process.stdout.write(`${banner(embedded.info, { showSecrets: process.stdout.isTTY === true })}\n`);
      },
      async destroy() {
        await embedded?.destroy();
      },
    };
  }),
);
