/**
 * A private Redis Cluster for tests: `masters` redis-server processes with cluster mode on,
 * joined by `redis-cli --cluster create` with no replicas, on free ports of 127.0.0.1, never
 * the machine's shared Redis. Nothing is written to disk but each node's cluster config file
 * (in a temporary directory). Every server is stopped by its PID.
 *
 * The servers run with `cluster-require-full-coverage no`, as docs/ARCHITECTURE.md asks: with
 * a master down, the others keep serving their own slots instead of refusing every command
 * (CLUSTERDOWN). `cluster-node-timeout` is short so that a dead master is marked failed soon.
 * With `password`, every node requires it (`requirepass`, and `masterauth` between nodes), as
 * production clusters do, and `seeds` gives the nodes as `redis://:<password>@host:port` URLs.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { freePort, waitFor } from './ports.ts';

const run = promisify(execFile);

/** How long a master may be unreachable before the others mark it failed (ms). */
const NODE_TIMEOUT_MS = 2_000;

interface Node {
  port: number;
  busPort: number;
  child: ChildProcess | undefined;
}

export class RedisCluster {
  readonly nodes: readonly Node[];
  readonly #dir: string;
  readonly #password: string | undefined;
  readonly #killOnExit = () => {
    for (const node of this.nodes) node.child?.kill('SIGKILL');
  };

  private constructor(nodes: Node[], password: string | undefined) {
    this.nodes = nodes;
    this.#password = password;
    this.#dir = mkdtempSync(join(tmpdir(), 'rp-redis-cluster-'));
  }

  /** Starts `masters` servers, creates the cluster and resolves once every node says it is ok. */
  static async start(masters = 3, options: { password?: string } = {}): Promise<RedisCluster> {
    const nodes: Node[] = [];
    for (let i = 0; i < masters; i++) {
      nodes.push({ port: await freePort(), busPort: await freePort(), child: undefined });
    }
    const cluster = new RedisCluster(nodes, options.password);
    // A test that dies must not leave its servers behind.
    process.once('exit', cluster.#killOnExit);
    try {
      await Promise.all(nodes.map((node) => cluster.#spawn(node)));
      await run(
        'redis-cli',
        [
          ...(options.password ? ['-a', options.password, '--no-auth-warning'] : []),
          '--cluster',
          'create',
          ...nodes.map((n) => `127.0.0.1:${n.port}`),
          '--cluster-replicas',
          '0',
          '--cluster-yes',
        ],
        { timeout: 30_000 },
      );
      await waitFor(() => cluster.#everyNodeOk(), 30_000, 'the Redis Cluster to be ok on every node', 100);
    } catch (err) {
      await cluster.stop();
      throw err;
    }
    return cluster;
  }

  /**
   * Every node, as RELAYPLANE_REDIS_CLUSTER_NODES takes them: `host:port,…`, or with a password
   * `redis://:<password>@host:port,…`.
   */
  get seeds(): string {
    const auth = this.#password === undefined ? '' : `redis://:${encodeURIComponent(this.#password)}@`;
    return this.nodes.map((n) => `${auth}127.0.0.1:${n.port}`).join(',');
  }

  /** The PID of the server on `port` (undefined while it is down). */
  pid(port: number): number | undefined {
    return this.#node(port).child?.pid;
  }

  async #spawn(node: Node): Promise<void> {
    const child = spawn(
      'redis-server',
      [
        '--port',
        String(node.port),
        '--bind',
        '127.0.0.1',
        '--cluster-enabled',
        'yes',
        '--cluster-port',
        String(node.busPort),
        '--cluster-config-file',
        join(this.#dir, `nodes-${node.port}.conf`),
        '--cluster-node-timeout',
        String(NODE_TIMEOUT_MS),
        '--cluster-require-full-coverage',
        'no',
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        this.#dir,
        '--daemonize',
        'no',
        ...(this.#password ? ['--requirepass', this.#password, '--masterauth', this.#password] : []),
      ],
      { stdio: 'ignore' },
    );
    node.child = child;
    const exited = new Promise<never>((_, reject) =>
      child.once('exit', (code) =>
        reject(new Error(`redis-server on port ${node.port} exited (${code}) before it was ready`)),
      ),
    );
    exited.catch(() => {});
    await Promise.race([
      waitFor(() => this.#pings(node.port), 10_000, `redis-server on port ${node.port}`, 20),
      exited,
    ]);
  }

  async #pings(port: number): Promise<boolean> {
    try {
      return (await this.#ask(port, (c) => c.ping())) === 'PONG';
    } catch {
      return false;
    }
  }

  async #everyNodeOk(): Promise<boolean> {
    try {
      const infos = await Promise.all(
        this.nodes.map((n) => this.#ask(n.port, (c) => c.cluster('INFO') as Promise<string>)),
      );
      return infos.every(
        (info) => /cluster_state:ok/.test(info) && /cluster_slots_assigned:16384/.test(info),
      );
    } catch {
      return false;
    }
  }

  /** One command to one node over a plain (non-cluster) connection. */
  async #ask<T>(port: number, fn: (client: Redis) => Promise<T>): Promise<T> {
    const client = new Redis({
      host: '127.0.0.1',
      port,
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      ...(this.#password ? { password: this.#password } : {}),
    });
    client.on('error', () => {});
    try {
      await client.connect();
      return await fn(client);
    } finally {
      client.disconnect();
    }
  }

  /** The port of the master serving the slot of `key` (its hash tag when it has one). */
  async masterOf(key: string): Promise<number> {
    const alive = this.nodes.find((n) => n.child !== undefined);
    if (!alive) throw new Error('no node of the cluster is up');
    const [slot, slots] = await this.#ask(
      alive.port,
      async (c) => [Number(await c.cluster('KEYSLOT', key)), await c.cluster('SLOTS')] as const,
    );
    const range = slots.find(([from, to]) => slot >= from && slot <= to);
    if (!range) throw new Error(`no master serves slot ${slot}`);
    const [, port] = range[2] ?? [];
    if (port === undefined) throw new Error(`slot ${slot} has no master in CLUSTER SLOTS`);
    return port;
  }

  /** Every key under `pattern` on every master that is up, with its string value (other types: their type). */
  async keys(pattern: string): Promise<Record<string, string>> {
    const out: Record<string, string> = {};
    for (const node of this.nodes) {
      if (!node.child) continue;
      await this.#ask(node.port, async (c) => {
        let cursor = '0';
        do {
          const [next, keys] = await c.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
          cursor = next;
          for (const key of keys) {
            const type = await c.type(key);
            out[key] = type === 'string' ? ((await c.get(key)) ?? '') : type;
          }
        } while (cursor !== '0');
      });
    }
    return out;
  }

  /** Kills the server on `port` (SIGKILL by its PID, as a crash) and resolves once it is gone. */
  async kill(port: number): Promise<void> {
    const node = this.#node(port);
    const child = node.child;
    node.child = undefined;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    if (child.pid !== undefined) process.kill(child.pid, 'SIGKILL');
    await gone;
  }

  /** Waits until every master still up has marked the one on `port` as failed. */
  async waitMarkedFailed(port: number): Promise<void> {
    await waitFor(
      async () => {
        const views = await Promise.all(
          this.nodes
            .filter((n) => n.child !== undefined)
            .map((n) => this.#ask(n.port, (c) => c.cluster('NODES') as Promise<string>)),
        );
        return views.every((view) =>
          view
            .split('\n')
            .some(
              (line) =>
                line.includes(`127.0.0.1:${port}@`) && (line.split(' ')[2] ?? '').split(',').includes('fail'),
            ),
        );
      },
      5 * NODE_TIMEOUT_MS + 10_000,
      `the master on port ${port} to be marked failed`,
      100,
    );
  }

  #node(port: number): Node {
    const node = this.nodes.find((n) => n.port === port);
    if (!node) throw new Error(`no node of this cluster on port ${port}`);
    return node;
  }

  /** Stops every server (by PID) and removes the directory. */
  async stop(): Promise<void> {
    for (const node of this.nodes) await this.kill(node.port);
    process.off('exit', this.#killOnExit);
    rmSync(this.#dir, { recursive: true, force: true });
  }
}
