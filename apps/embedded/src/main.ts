import { ensureConsoleBuilt } from '@relayplane/console/build';
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
        // The web console is built here when its sources changed since the last build (a fresh
        // clone: the first start), so install and start are the only commands (docs/console.md).
        // A failed build leaves the API running; the console's pages then say it is not built.
        let consoleProblem: string | undefined;
        try {
          // GATEWAY_CONSOLE_DIR names a build of the operator's: the package's own is not built then.
          if (!process.env.GATEWAY_CONSOLE_DIR)
            await ensureConsoleBuilt((line) => process.stdout.write(`${line}\n`));
        } catch (error) {
          consoleProblem = error instanceof Error ? error.message : String(error);
        }
        embedded = await Embedded.start(process.env);
        process.stdout.write(
          `${banner(embedded.info, { showSecrets: process.stdout.isTTY === true, consoleProblem })}\n`,
        );
      },
      async destroy() {
        await embedded?.destroy();
      },
    };
  }),
);
