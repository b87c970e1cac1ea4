import type { Bus } from '@relayplane/shared/bus';
import type { Logger } from '@relayplane/shared/logger';
import type { Registry } from '@relayplane/shared/metrics';
import { buildApp, type GatewayApp } from '../../src/app.ts';
import type { GatewayClients } from '../../src/clients.ts';
import { type ContextConfig, GatewayContext } from '../../src/context.ts';

export interface TestApp extends GatewayApp {
  ctx: GatewayContext;
  /** Closes the app, then its context (as GatewayService.destroy does). */
  close(): Promise<void>;
}

/** A gateway app on a context of its own, on the given clients; not listening unless the test listens. */
export async function testApp(deps: {
  config: ContextConfig;
  clients: GatewayClients;
  logger: Logger;
  bus?: Bus;
  metrics?: Registry;
}): Promise<TestApp> {
  const { config, ...overrides } = deps;
  const ctx = await GatewayContext.fromConfig(config, overrides);
  const built = await buildApp(ctx);
  return {
    ...built,
    ctx,
    async close() {
      await built.app.close();
      await ctx.close();
    },
  };
}
