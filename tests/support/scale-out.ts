/**
 * The scale-out topology as processes on this machine: N gateways, M issuers, one admin and
 * one billing, on the machine's PostgreSQL and Redis, wired the way the Helm chart wires
 * them. The issuers stand behind a DNS name (tests/support/dns-server.ts, the stand-in for
 * the chart's headless Service): each listens on its own loopback address with the same
 * port, and the gateways reach them through `dns://<test resolver>/<name>:<port>`, balancing
 * round-robin. Issuers can be added (a new address in the name) and killed while load runs.
 */

import { HealthService, ServingStatus } from '@relayplane/shared/health';
import { connect, type ServiceClient } from '@relayplane/shared/rpc';
import { TestDnsServer } from './dns-server.ts';
import { freePort, waitFor } from './ports.ts';
import { migrateAll, type Proc, type SystemOptions, startProcess, systemEnv } from './processes.ts';

export const ISSUERS_NAME = 'issuers.relayplane.test';

export interface ScaleOutOptions extends SystemOptions {
  label: string;
  issuers: number;
  gateways: number;
  issuerEnv?: Record<string, string>;
  gatewayEnv?: Record<string, string>;
}

export interface IssuerReplica {
  /** Loopback address it listens on (127.0.0.<n>), port `ScaleOut.issuerPort`. */
  host: string;
  proc: Proc;
  /** Credentials it answered, from its `issuance stream ended` log lines at or after `since` (ms). */
  issued(since?: number): number;
}

export interface ScaleOut {
  baseUrls: string[];
  gateways: Proc[];
  issuers: IssuerReplica[];
  others: Proc[];
  issuerPort: number;
  dns: TestDnsServer;
  /** Starts one more issuer on the next loopback address, waits for SERVING, then adds it to DNS. */
  addIssuer(): Promise<IssuerReplica>;
  /** SIGKILL (no shutdown of any kind), then takes its address out of DNS. */
  killIssuer(replica: IssuerReplica): Promise<void>;
  /** SIGTERM to every process still running; resolves with name → exit code. */
  stop(): Promise<Record<string, number | null>>;
}

export async function startScaleOut(o: ScaleOutOptions): Promise<ScaleOut> {
  const dns = await TestDnsServer.start();
  const issuerPort = await freePort();
  const [billingPort, adminPort] = [await freePort(), await freePort()];
  const httpPorts: number[] = [];
  for (let i = 0; i < o.gateways; i++) httpPorts.push(await freePort());
  const env = systemEnv(o, { billing: billingPort, admin: adminPort });
  await migrateAll(env);

  const issuers: IssuerReplica[] = [];
  const gateways: Proc[] = [];
  const others = [
    startProcess(`${o.label}-billing`, 'apps/billing/src/main.ts', {
      ...env,
      BILLING_ISSUER_ADDRESS: `dns://127.0.0.1:${dns.port}/${ISSUERS_NAME}:${issuerPort}`,
      GRPC_NODE_USE_ALTERNATIVE_RESOLVER: 'true',
    }),
    startProcess(`${o.label}-admin`, 'apps/admin/src/main.ts', env),
  ];
  const health = new Map<string, ServiceClient<typeof HealthService>>();

  async function launchIssuer(): Promise<IssuerReplica> {
    const host = `127.0.0.${issuers.length + 2}`;
    const proc = startProcess(`${o.label}-issuer-${issuers.length}`, 'apps/issuer/src/main.ts', {
      ...env,
      ISSUER_LISTEN_ADDRESS: `${host}:${issuerPort}`,
      ...o.issuerEnv,
    });
    const replica: IssuerReplica = {
      host,
      proc,
      issued: (since = 0) => issuedSince(proc.output(), since),
    };
    issuers.push(replica);
    const client = connect(HealthService, `${host}:${issuerPort}`, { timeoutMs: 1_000 });
    health.set(host, client);
    await waitFor(
      async () => (await client.check({ service: '' })).status === ServingStatus.SERVING,
      60_000,
      `issuer ${host} to serve`,
    );
    return replica;
  }

  const publish = () =>
    dns.set(
      ISSUERS_NAME,
      issuers
        .filter((i) => i.proc.child.exitCode === null && i.proc.child.signalCode === null)
        .map((i) => i.host),
    );

  const stop = async () => {
    const all = [...gateways, ...issuers.map((i) => i.proc), ...others];
    const codes = await Promise.all(all.map((p) => p.stop()));
    for (const c of health.values()) c.close();
    await dns.close();
    return Object.fromEntries(all.map((p, i) => [p.name, codes[i] ?? null]));
  };

  try {
    // Issuers first, one at a time: the first applies migrations and creates the keys.
    for (let i = 0; i < o.issuers; i++) await launchIssuer();
    publish();
    for (const [i, port] of httpPorts.entries()) {
      gateways.push(
        startProcess(`${o.label}-gateway-${i}`, 'apps/gateway/src/main.ts', {
          ...env,
          GATEWAY_ISSUER_ADDRESS: `dns://127.0.0.1:${dns.port}/${ISSUERS_NAME}:${issuerPort}`,
          // grpc-js asks the DNS server named in the target only with its c-ares resolver;
          // in a cluster the plain `dns:///name` form uses the system resolver instead.
          GRPC_NODE_USE_ALTERNATIVE_RESOLVER: 'true',
          PORT: String(port),
          ...o.gatewayEnv,
        }),
      );
    }
    for (const port of httpPorts) {
      await waitFor(
        async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200,
        60_000,
        `gateway ${port} to be ready`,
      );
    }
  } catch (err) {
    await stop();
    throw err;
  }

  return {
    baseUrls: httpPorts.map((p) => `http://127.0.0.1:${p}`),
    gateways,
    issuers,
    others,
    issuerPort,
    dns,
    async addIssuer() {
      const replica = await launchIssuer();
      publish();
      return replica;
    },
    async killIssuer(replica) {
      replica.proc.child.kill('SIGKILL');
      await replica.proc.exited;
      publish();
    },
    stop,
  };
}

/** Sums `issued` of the issuer's per-stream log lines logged at or after `since`. */
function issuedSince(output: string, since: number): number {
  let total = 0;
  for (const line of output.split('\n')) {
    if (!line.includes('issuance stream ended')) continue;
    try {
      const entry = JSON.parse(line) as { time?: string; issued?: number };
      if (Date.parse(entry.time ?? '') >= since) total += entry.issued ?? 0;
    } catch {
      // not a log line of ours
    }
  }
  return total;
}
