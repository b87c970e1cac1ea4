/** Starts a real billing service (PostgreSQL, Redis) for a test file, and listens on its bus. */

import { BUS_CHANNELS } from '@relayplane/contract/contract';
import { BillingService as BillingRpc } from '@relayplane/proto/billing';
import { RedisBus } from '@relayplane/shared/bus';
import { connect, type ServiceClient } from '@relayplane/shared/rpc';
import { testLogger } from '@relayplane/testing/logger';
import { Redis } from 'ioredis';
import { type BillingConfig, readBillingConfig } from '../../src/config.ts';
import { type BillingOverrides, BillingService } from '../../src/service.ts';

export interface Billing {
  service: BillingService;
  client: ServiceClient<typeof BillingRpc>;
  close(): Promise<void>;
}

export async function startBilling(
  env: Record<string, string>,
  configOverrides: Partial<BillingConfig> = {},
  overrides: BillingOverrides = {},
): Promise<Billing> {
  const config = readBillingConfig({ BILLING_LISTEN_ADDRESS: '127.0.0.1:0', ...env }, configOverrides);
  const service = await BillingService.create(config, { logger: testLogger('billing'), ...overrides });
  await service.start();
  const client = connect(BillingRpc, `127.0.0.1:${service.port}`, { retries: false });
  return {
    service,
    client,
    async close() {
      client.close();
      await service.destroy();
    },
  };
}

/** Every `plans.changed` message on the real Redis bus, as another replica would see them. */
export class PlanChangeListener {
  readonly received: string[] = [];
  readonly #bus: RedisBus;
  readonly #waiters: { tenantId: string; resolve: () => void }[] = [];

  private constructor(bus: RedisBus) {
    this.#bus = bus;
  }

  static async start(url: string, prefix: string): Promise<PlanChangeListener> {
    const pub = new Redis(url);
    const bus = new RedisBus(pub, new Redis(url), prefix);
    const listener = new PlanChangeListener(bus);
    await bus.subscribe(BUS_CHANNELS.plansChanged, (tenantId) => {
      listener.received.push(tenantId);
      for (const w of listener.#waiters.filter((w) => w.tenantId === tenantId)) w.resolve();
    });
    listener.#pub = pub;
    return listener;
  }

  #pub: Redis | undefined;

  /** Resolves once `tenantId` was announced (at once when it already was). */
  announced(tenantId: string): Promise<void> {
    if (this.received.includes(tenantId)) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push({ tenantId, resolve }));
  }

  async close(): Promise<void> {
    await this.#bus.close();
    this.#pub?.disconnect();
  }
}
