/**
 * The metrics every service keeps of its own health (docs/metrics.md): readiness per gRPC
 * service and its changes, and whether PostgreSQL and Redis answer a ping at scrape time.
 */
import { Gauge, type Registry } from 'prom-client';
import { type HealthState, ServingStatus } from './health.ts';
import { counter } from './metrics.ts';

export function serviceHealthMetrics(
  registry: Registry,
  deps: {
    health: HealthState;
    /** Health service names whose status is readiness. */
    services: readonly string[];
    database: { ping(timeoutMs?: number): Promise<boolean> };
    /** Undefined without Redis (embedded mode): no `redis` series. */
    redis?: { ping(): Promise<unknown> };
  },
): void {
  const { health, services, database, redis } = deps;
  new Gauge({
    name: 'relayplane_ready',
    help: 'Readiness of each gRPC service (its grpc.health.v1 status): 1 SERVING, 0 otherwise.',
    labelNames: ['service'],
    registers: [registry],
    collect() {
      for (const s of services) this.labels(s).set(health.get(s) === ServingStatus.SERVING ? 1 : 0);
    },
  });
  const changes = counter(registry, {
    name: 'relayplane_readiness_changes_total',
    help: 'Changes of a gRPC service readiness between SERVING and not serving, as its health Watch reports them.',
    labelNames: ['service'],
  });
  for (const s of services) followReadiness(health, s, changes.labels(s));
  new Gauge({
    name: 'relayplane_dependency_up',
    help: 'Whether a dependency answered a ping made at this scrape (PostgreSQL: select 1; Redis: PING), within 1 s: 1 yes, 0 no.',
    labelNames: ['dependency'],
    registers: [registry],
    async collect() {
      const [pg, rd] = await Promise.all([database.ping(DEPENDENCY_PING_MS), redis && pingRedis(redis)]);
      this.labels('postgresql').set(pg ? 1 : 0);
      if (redis) this.labels('redis').set(rd ? 1 : 0);
    },
  });
}

const DEPENDENCY_PING_MS = 1_000;

async function pingRedis(redis: { ping(): Promise<unknown> }): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      redis.ping().then(
        () => true,
        () => false,
      ),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), DEPENDENCY_PING_MS);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

type Watch = (
  req: { service: string },
  call: { signal: AbortSignal },
) => AsyncIterable<{ status: ServingStatus }>;

/**
 * Counts the changes of `service` between SERVING and anything else, through the health
 * service's own Watch (every change, not only those a scrape happens to see). The Watch ends
 * itself at shutdown (`health.shutdown()`).
 */
function followReadiness(health: HealthState, service: string, changes: { inc(): void }): void {
  const watch = health.impl.watch as unknown as Watch;
  const signal = new AbortController().signal;
  void (async () => {
    let serving: boolean | undefined;
    for await (const { status } of watch({ service }, { signal })) {
      if (status === ServingStatus.SERVICE_UNKNOWN) continue;
      const now = status === ServingStatus.SERVING;
      if (serving !== undefined && now !== serving) changes.inc();
      serving = now;
    }
  })().catch(() => {});
}
