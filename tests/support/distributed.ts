/**
 * The four apps as separate processes, wired the way the Helm chart wires them: every client
 * of a service reaches all of its replicas, balancing round-robin over an `ipv4:` list of
 * their addresses (the stand-in for the chart's headless Services).
 *
 * Start-up order: billing, admin and the issuers first, each awaited until its gRPC health
 * says SERVING (an issuer also for issuance, which needs its Redis connection); the gateways
 * only then, awaited until `/readyz` answers 200. Started all at once, a gateway could call
 * an issuer before that issuer listened (a JWKS refresh on the first issuer's "signing keys
 * changed" message): the refused connection puts the gateway's issuer channel into gRPC's
 * reconnect backoff (1 s, then ×1.6 each time), while `/readyz`, asked over a channel of its
 * own, soon said ready. The first issuances then answered 503 until the next reconnect
 * attempt (issue 16, item 7). Whatever is awaited, a process that exits meanwhile fails the
 * start at once with its output, instead of after the whole timeout.
 *
 * `restart()` is one step of a rolling restart, as Kubernetes does it: SIGTERM, the exit
 * awaited, the same process started again on the same port and awaited until ready.
 *
 * `tls`: mutual TLS on every gRPC link (issue 19), each app with its own certificate
 * (`SystemTls`); the readiness probes then check health over mTLS too, as the gateway does.
 */
import { connect as dial } from 'node:net';
import type { ServiceName } from '@relayplane/contract/contract';
import { AdminService } from '@relayplane/proto/admin';
import { BillingService } from '@relayplane/proto/billing';
import { IssuerService } from '@relayplane/proto/issuer';
import type { GrpcTls } from '@relayplane/shared/grpc-tls';
import { HealthService, ServingStatus } from '@relayplane/shared/health';
import { connect, type ServiceClient } from '@relayplane/shared/rpc';
import { freePort, waitFor } from './ports.ts';
import { migrateAll, type Proc, type SystemOptions, startProcess, systemEnv } from './processes.ts';
import type { SystemTls } from './tls.ts';

/** The issuer's health status of issuance alone (ISSUANCE_HEALTH_SERVICE in apps/issuer/src/service.ts). */
const ISSUANCE_HEALTH_SERVICE = `${IssuerService.typeName}/issuance`;
/** How long a process may take to be ready. */
const READY_TIMEOUT_MS = 60_000;

export interface DistributedOptions extends SystemOptions {
  /** Label for log files (tests/.logs/<label>-<app>.log). */
  label: string;
  /** What the services connect to (may be a proxy). */
  databaseUrl: string;
  /** What the migrate commands use (defaults to databaseUrl). */
  migrateDatabaseUrl?: string;
  /** Replicas of each app (default 1 each). */
  replicas?: { issuer?: number; gateway?: number; admin?: number; billing?: number };
  /** Variables for one app's processes only, over the shared ones (e.g. admin's malloc settings). */
  appEnv?: Partial<Record<'billing' | 'admin' | 'issuer' | 'gateway', Record<string, string>>>;
  /** Redis as the issuers reach it (e.g. through a proxy a test can cut); default redisUrl. */
  issuerRedisUrl?: string;
  /** Mutual TLS on every gRPC link, with these certificates; absent: plaintext. */
  tls?: SystemTls;
}

/** What one step of a rolling restart took. */
export interface Restarted {
  /** The process started in place of the old one (it also replaces it in `procs`). */
  proc: Proc;
  /** The old process's exit code: 0 for a clean shutdown, null if it had to be killed. */
  code: number | null;
  /** From SIGTERM to the exit. */
  stopMs: number;
  /** From the exit to the new process being ready. */
  startMs: number;
}

export interface Distributed {
  baseUrl: string;
  baseUrls: string[];
  /**
   * Every process, in start order: billing, admin, the issuers, the gateways (`<label>-admin`,
   * or `<label>-admin-<i>` with several replicas; `<label>-issuer-<i>`, `<label>-gateway-<i>`).
   */
  procs: Proc[];
  env: Record<string, string>;
  /** SIGTERM to every process; resolves with their exit codes. */
  stop(): Promise<(number | null)[]>;
  /**
   * SIGTERM to `proc` and its exit awaited (SIGKILL after Proc.stop's grace period, as the
   * kubelet does), then the same script started again with the same environment and port and
   * awaited until ready: gRPC health SERVING for a service, `/readyz` 200 for a gateway.
   * `envOverrides` change its environment from this restart on (as a changed Secret would; an
   * empty value unsets a variable for the apps).
   */
  restart(proc: Proc, envOverrides?: Record<string, string>): Promise<Restarted>;
}

/** How to start one process again, and how to tell it is ready. */
interface Launch {
  script: string;
  env: Record<string, string>;
  ready: Probe;
}

/** Answers true once the process is ready; `close` frees what the checks opened. */
interface Probe {
  check(): Promise<boolean>;
  close(): void;
}

export async function startDistributed(o: DistributedOptions): Promise<Distributed> {
  const ports = async (n = 1) => {
    const list: number[] = [];
    for (let i = 0; i < n; i++) list.push(await freePort());
    return list;
  };
  const billingPorts = await ports(o.replicas?.billing);
  const adminPorts = await ports(o.replicas?.admin);
  const issuerPorts = await ports(o.replicas?.issuer);
  const httpPorts = await ports(o.replicas?.gateway);
  const every = (list: number[]) => `ipv4:${list.map((p) => `127.0.0.1:${p}`).join(',')}`;
  const env = {
    ...systemEnv(o, { billing: billingPorts[0] ?? 0, admin: adminPorts[0] ?? 0 }),
    ADMIN_BILLING_ADDRESS: every(billingPorts),
    BILLING_ISSUER_ADDRESS: every(issuerPorts),
    BILLING_ADMIN_ADDRESS: every(adminPorts),
    ISSUER_ADMIN_ADDRESS: every(adminPorts),
    GATEWAY_ADMIN_ADDRESS: every(adminPorts),
    GATEWAY_BILLING_ADDRESS: every(billingPorts),
    GATEWAY_ISSUER_ADDRESS: every(issuerPorts),
  };
  await migrateAll({ ...env, DATABASE_URL: o.migrateDatabaseUrl ?? o.databaseUrl }, o.root);
  /** `<label>-<app>`, with the replica's index when there are several. */
  const nameOf = (app: string, i: number, of: number[]) => `${o.label}-${app}${of.length > 1 ? `-${i}` : ''}`;

  /** The variables of one app's processes: the shared ones, its TLS files, its own. */
  const appEnv = (app: ServiceName) => ({ ...env, ...o.tls?.env(app), ...o.appEnv?.[app] });
  // The probes present a gateway certificate: health answers any peer with a certificate of the CA.
  const probeTls = o.tls?.client('gateway');

  const procs: Proc[] = [];
  const launches = new Map<string, Launch>();
  const launch = (name: string, script: string, procEnv: Record<string, string>, ready: Probe) => {
    launches.set(name, { script, env: procEnv, ready });
    const proc = startProcess(name, script, procEnv, { root: o.root });
    procs.push(proc);
    return proc;
  };
  const stop = () => Promise.all(procs.map((p) => p.stop()));

  const baseUrls = httpPorts.map((port) => `http://127.0.0.1:${port}`);
  try {
    const services = [
      ...billingPorts.map((port, i) =>
        launch(
          nameOf('billing', i, billingPorts),
          'apps/billing/src/main.ts',
          { ...appEnv('billing'), BILLING_LISTEN_ADDRESS: `127.0.0.1:${port}` },
          serving(port, 'billing', [BillingService.typeName], probeTls),
        ),
      ),
      ...adminPorts.map((port, i) =>
        launch(
          nameOf('admin', i, adminPorts),
          'apps/admin/src/main.ts',
          { ...appEnv('admin'), ADMIN_LISTEN_ADDRESS: `127.0.0.1:${port}` },
          serving(port, 'admin', [AdminService.typeName], probeTls),
        ),
      ),
      ...issuerPorts.map((port, i) =>
        launch(
          `${o.label}-issuer-${i}`,
          'apps/issuer/src/main.ts',
          {
            ...appEnv('issuer'),
            ...(o.issuerRedisUrl ? { ISSUER_REDIS_URL: o.issuerRedisUrl } : {}),
            ISSUER_LISTEN_ADDRESS: `127.0.0.1:${port}`,
          },
          serving(port, 'issuer', [IssuerService.typeName, ISSUANCE_HEALTH_SERVICE], probeTls),
        ),
      ),
    ];
    await Promise.all(services.map((p) => untilReady(p, launches)));
    const started = httpPorts.map((port, i) =>
      launch(
        `${o.label}-gateway-${i}`,
        'apps/gateway/src/main.ts',
        { ...appEnv('gateway'), PORT: String(port) },
        readyz(baseUrls[i] ?? ''),
      ),
    );
    await Promise.all(started.map((p) => untilReady(p, launches)));
  } catch (err) {
    await stop();
    throw err;
  }

  async function restart(proc: Proc, envOverrides?: Record<string, string>): Promise<Restarted> {
    const index = procs.findIndex((p) => p.name === proc.name);
    const how = launches.get(proc.name);
    if (index < 0 || !how) throw new Error(`${proc.name} is not a process of this system`);
    if (envOverrides) how.env = { ...how.env, ...envOverrides };
    const stopping = Date.now();
    const code = await proc.stop();
    const stopped = Date.now();
    const next = startProcess(proc.name, how.script, how.env, { appendLog: true, root: o.root });
    procs[index] = next;
    await untilReady(next, launches);
    return { proc: next, code, stopMs: stopped - stopping, startMs: Date.now() - stopped };
  }

  return { baseUrl: baseUrls[0] ?? '', baseUrls, procs, env, stop, restart };
}

/**
 * Waits until `proc` is ready by its launch's probe; fails at once, with the end of its
 * output, if it exits meanwhile.
 */
async function untilReady(proc: Proc, launches: Map<string, Launch>): Promise<void> {
  const probe = launches.get(proc.name)?.ready;
  if (!probe) throw new Error(`no readiness probe for ${proc.name}`);
  const exited = () => proc.child.exitCode !== null || proc.child.signalCode !== null;
  try {
    await waitFor(
      async () => exited() || (await probe.check()),
      READY_TIMEOUT_MS,
      `${proc.name} to be ready`,
    );
  } finally {
    probe.close();
  }
  if (exited()) {
    const code = proc.child.exitCode ?? proc.child.signalCode;
    throw new Error(`${proc.name} exited (${code}) before it was ready:\n${proc.output().slice(-4_000)}`);
  }
}

/**
 * Every one of `services` SERVING on the gRPC server of `app` at 127.0.0.1:`port` (over mutual
 * TLS with `tls`). The health client is made once the port accepts connections: made earlier,
 * its first attempt would be refused and gRPC's reconnect backoff would delay the checks by up
 * to seconds after the server listens.
 */
function serving(port: number, app: ServiceName, services: string[], tls: GrpcTls | undefined): Probe {
  let client: ServiceClient<typeof HealthService> | undefined;
  return {
    async check() {
      if (!client) {
        if (!(await accepts(port))) return false;
        client = connect(HealthService, `127.0.0.1:${port}`, { timeoutMs: 1_000, tls: tls?.client(app) });
      }
      const answers = await Promise.all(services.map((service) => client?.check({ service })));
      return answers.every((a) => a?.status === ServingStatus.SERVING);
    },
    close() {
      client?.close();
      client = undefined;
    },
  };
}

function readyz(baseUrl: string): Probe {
  return {
    check: async () => (await fetch(`${baseUrl}/readyz`)).status === 200,
    close() {},
  };
}

/** Whether something accepts TCP connections on 127.0.0.1:`port`. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = dial(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
