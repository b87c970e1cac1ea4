#!/usr/bin/env node
// The `relayplane` command. In the workspace it runs the TypeScript sources through Node's
// type stripping; Node refuses that under node_modules, so an installed copy runs the build.
import { sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const installed = fileURLToPath(import.meta.url)
  .split(sep)
  .includes('node_modules');
if (!installed && !process.features.typescript) {
  process.stderr.write(
    `relayplane: Node ${process.version} cannot run TypeScript sources; use Node 24 ` +
      '(`pnpm exec relayplane`, or node_modules/.bin/node apps/cli/bin/relayplane.js)\n',
  );
  process.exit(1);
}
if (installed) {
  // An installed copy resolves the workspace packages it uses (@relayplane/shared/contract) to
  // their builds, under the same export condition the service images run with.
  const { registerHooks } = await import('node:module');
  registerHooks({
    resolve: (specifier, context, next) =>
      next(specifier, { ...context, conditions: [...context.conditions, 'relayplane-dist'] }),
  });
}
await import(installed ? '../dist/main.js' : '../src/main.ts');
