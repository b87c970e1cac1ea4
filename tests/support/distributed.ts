/** The four apps as separate processes, wired the way the Helm chart wires them. */
import { freePort, waitFor } from './ports.ts';
import { type Proc, runToCompletion, startProcess } from './processes.ts';

export interface DistributedOptions {
  /** Label for log files (tests/.logs/<label>-<app>.log). */
  label: string;
  /** What the services connect to (may be a proxy). */
  databaseUrl: string;
  /** What the migrate commands use (defaults to databaseUrl). */
  migrateDatabaseUrl?: string;
  redisUrl: string;
  redisPrefix: string;
  kek: string;
  bootstrap: { email: string; password: string };
  logLevel?: string;
  /** More variables for every process (e.g. RELAYPLANE_PLANS_FILE). */
  extraEnv?: Record<string, string>;
}

export interface Distributed {
  baseUrl: string;
  procs: Proc[];
  env: Record<string, string>;
  /** SIGTERM to every process; resolves with their exit codes. */
  stop(): Promise<(number | null)[]>;
}

export async function startDistributed(o: DistributedOptions): Promise<Distributed> {
  const [billingPort, adminPort, issuerPort, httpPort] = await Promise.all([
    freePort(),
    freePort(),
    freePort(),
    freePort(),
  ]);
  const env = {
    LOG_LEVEL: o.logLevel ?? 'info',
    DATABASE_URL: o.databaseUrl,
    REDIS_URL: o.redisUrl,
    RELAYPLANE_REDIS_PREFIX: o.redisPrefix,
    RELAYPLANE_KEK: o.kek,
    RELAYPLANE_BOOTSTRAP_EMAIL: o.bootstrap.email,
    RELAYPLANE_BOOTSTRAP_PASSWORD: o.bootstrap.password,
    BILLING_LISTEN_ADDRESS: `127.0.0.1:${billingPort}`,
    ADMIN_LISTEN_ADDRESS: `127.0.0.1:${adminPort}`,
    ADMIN_BILLING_ADDRESS: `127.0.0.1:${billingPort}`,
    ISSUER_LISTEN_ADDRESS: `127.0.0.1:${issuerPort}`,
    GATEWAY_ADMIN_ADDRESS: `127.0.0.1:${adminPort}`,
    GATEWAY_ISSUER_ADDRESS: `127.0.0.1:${issuerPort}`,
    GATEWAY_BILLING_ADDRESS: `127.0.0.1:${billingPort}`,
    HOST: '127.0.0.1',
    PORT: String(httpPort),
    ...o.extraEnv,
  };
  // The migrate commands, as an operator runs them before a rollout.
  for (const app of ['billing', 'admin', 'issuer']) {
    const { code, output } = await runToCompletion(`apps/${app}/src/migrate.ts`, {
      ...env,
      DATABASE_URL: o.migrateDatabaseUrl ?? o.databaseUrl,
    });
    if (code !== 0) throw new Error(`${app} migrate exited ${code}:\n${output}`);
  }
  const procs = ['billing', 'admin', 'issuer', 'gateway'].map((app) =>
    startProcess(`${o.label}-${app}`, `apps/${app}/src/main.ts`, env),
  );
  const stop = () => Promise.all(procs.map((p) => p.stop()));
  const baseUrl = `http://127.0.0.1:${httpPort}`;
  try {
    await waitFor(
      async () => (await fetch(`${baseUrl}/readyz`)).status === 200,
      60_000,
      'the gateway to be ready',
    );
  } catch (err) {
    await stop();
    throw err;
  }
  return { baseUrl, procs, env, stop };
}
