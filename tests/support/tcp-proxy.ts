/**
 * A TCP proxy a test can break in the ways a dependency fails, in front of PostgreSQL or Redis:
 * - `refuse()`: the server is down. Live connections are reset and the port stops listening,
 *   so new ones are refused (ECONNREFUSED), as when the process crashed or was stopped.
 * - `blackhole()`: the network went silent. Live connections stay open and stall (nothing
 *   more is forwarded either way); new ones are accepted and never answered.
 * - `cut()`: live connections are dropped, new ones accepted and never answered.
 * - `restore()`: forwarding again; connections that stalled are closed (the server gave up on
 *   them meanwhile), new ones get through.
 * - `failover()`: forwarding again for new connections, while those that stalled stay stalled
 *   until they are closed by their client: connections to a primary that died are never reset,
 *   and a replica promoted behind the same address answers only new ones.
 *
 * The proxy listens on a port outside the kernel's ephemeral range (ports.ts), so it can
 * listen there again after `refuse()` without another socket having taken the port.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import { freePort } from './ports.ts';

type Mode = 'forward' | 'refuse' | 'blackhole';

/** A client connection and, once forwarded, its upstream. */
interface Pair {
  client: Socket;
  upstream: Socket | undefined;
}

export class TcpProxy {
  readonly #server: Server;
  readonly #target: { host: string; port: number };
  readonly #port: number;
  readonly #pairs = new Set<Pair>();
  #mode: Mode = 'forward';

  private constructor(server: Server, target: { host: string; port: number }, port: number) {
    this.#server = server;
    this.#target = target;
    this.#port = port;
  }

  static async start(target: { host: string; port: number }): Promise<TcpProxy> {
    let proxy: TcpProxy | undefined;
    const server = createServer((client) => proxy?.accept(client));
    proxy = new TcpProxy(server, target, await freePort());
    await proxy.#listen();
    return proxy;
  }

  get port(): number {
    return this.#port;
  }

  /** Connections accepted and not yet closed (either side). */
  get connections(): number {
    return this.#pairs.size;
  }

  accept(client: Socket): void {
    const pair: Pair = { client, upstream: undefined };
    this.#pairs.add(pair);
    client.on('error', () => client.destroy());
    client.on('close', () => {
      this.#pairs.delete(pair);
      pair.upstream?.destroy();
    });
    if (this.#mode !== 'forward') return; // held: accepted, never answered
    const upstream = connect(this.#target.port, this.#target.host);
    pair.upstream = upstream;
    upstream.on('error', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  }

  /** The server is down: live connections reset, new ones refused. */
  async refuse(): Promise<void> {
    this.#mode = 'refuse';
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    for (const pair of this.#pairs) this.#reset(pair);
    await closed;
  }

  /** The network is silent: live connections stall, new ones are held unanswered. */
  blackhole(): void {
    this.#mode = 'blackhole';
    for (const { client, upstream } of this.#pairs) {
      if (!upstream) continue;
      client.unpipe(upstream);
      upstream.unpipe(client);
      client.pause();
      upstream.pause();
    }
  }

  /** Live connections dropped, new ones held unanswered. */
  cut(): void {
    this.#mode = 'blackhole';
    for (const pair of this.#pairs) this.#drop(pair);
  }

  /** Forwarding again; connections that stalled or were held are closed. */
  async restore(): Promise<void> {
    const was = this.#mode;
    this.#mode = 'forward';
    if (was === 'refuse') await this.#listen();
    else for (const pair of this.#pairs) this.#drop(pair);
  }

  /** New connections forwarded; stalled ones stay stalled (see the module comment). */
  failover(): void {
    if (this.#mode !== 'blackhole') throw new Error('failover() ends a blackhole');
    this.#mode = 'forward';
  }

  async close(): Promise<void> {
    this.#mode = 'refuse';
    for (const pair of this.#pairs) this.#drop(pair);
    if (this.#server.listening) await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #listen(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(this.#port, '127.0.0.1', () => {
        this.#server.off('error', reject);
        resolve();
      });
    });
  }

  #drop({ client, upstream }: Pair): void {
    client.destroy();
    upstream?.destroy();
  }

  /** As a crashed server's kernel does: RST, not an orderly close. */
  #reset({ client, upstream }: Pair): void {
    client.resetAndDestroy();
    upstream?.destroy();
  }
}
