/** The four apps as separate processes, wired the way the Helm chart wires them. */
import { freePort, waitFor } from './ports.ts';
import { migrateAll, type Proc, type SystemOptions, startProcess, systemEnv } from './processes.ts';

export interface DistributedOptions extends SystemOptions {
  /** Label for log files (tests/.logs/<label>-<app>.log). */
  label: string;
  /** What the services connect to (may be a proxy). */
  databaseUrl: string;
  /** What the migrate commands use (defaults to databaseUrl). */
  migrateDatabaseUrl?: string;
  /** Replicas of the issuer and the gateway (default 1 each). */
  replicas?: { issuer?: number; gateway?: number };
  /** Redis as the issuers reach it (e.g. through a proxy a test can cut); default redisUrl. */
  issuerRedisUrl?: string;
}

export interface Distributed {
  baseUrl: string;
  baseUrls: string[];
  procs: Proc[];
  env: Record<string, string>;
  /** SIGTERM to every process; resolves with their exit codes. */
  stop(): Promise<(number | null)[]>;
}

export async function startDistributed(o: DistributedOptions): Promise<Distributed> {
  const issuers = o.replicas?.issuer ?? 1;
  const gateways = o.replicas?.gateway ?? 1;
  const [billingPort, adminPort] = [await freePort(), await freePort()];
  const issuerPorts: number[] = [];
  for (let i = 0; i < issuers; i++) issuerPorts.push(await freePort());
  const httpPorts: number[] = [];
  for (let i = 0; i < gateways; i++) httpPorts.push(await freePort());
  const env = systemEnv(o, { billing: billingPort, admin: adminPort });
  await migrateAll({ ...env, DATABASE_URL: o.migrateDatabaseUrl ?? o.databaseUrl });
  const procs = [
    startProcess(`${o.label}-billing`, 'apps/billing/src/main.ts', {
      ...env,
      BILLING_ISSUER_ADDRESS: `ipv4:${issuerPorts.map((p) => `127.0.0.1:${p}`).join(',')}`,
    }),
    startProcess(`${o.label}-admin`, 'apps/admin/src/main.ts', env),
    ...issuerPorts.map((port, i) =>
      startProcess(`${o.label}-issuer-${i}`, 'apps/issuer/src/main.ts', {
        ...env,
        ...(o.issuerRedisUrl ? { ISSUER_REDIS_URL: o.issuerRedisUrl } : {}),
        ISSUER_LISTEN_ADDRESS: `127.0.0.1:${port}`,
      }),
    ),
    // Gateway i talks to issuer i mod n: load spreads over every replica of both.
    ...httpPorts.map((port, i) =>
      startProcess(`${o.label}-gateway-${i}`, 'apps/gateway/src/main.ts', {
        ...env,
        GATEWAY_ISSUER_ADDRESS: `127.0.0.1:${issuerPorts[i % issuers]}`,
        PORT: String(port),
      }),
    ),
  ];
  const stop = () => Promise.all(procs.map((p) => p.stop()));
  const baseUrls = httpPorts.map((port) => `http://127.0.0.1:${port}`);
  try {
    for (const baseUrl of baseUrls) {
      await waitFor(
        async () => (await fetch(`${baseUrl}/readyz`)).status === 200,
        60_000,
        `${baseUrl} to be ready`,
      );
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return { baseUrl: baseUrls[0] ?? '', baseUrls, procs, env, stop };
}
