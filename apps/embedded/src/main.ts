import { runMain } from '@relayplane/shared/process';
import { banner } from './banner.ts';
import { Embedded } from './embedded.ts';

await runMain(async () => {
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
});
