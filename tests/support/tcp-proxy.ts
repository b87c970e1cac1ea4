/**
 * A TCP proxy a test can cut: between the services and PostgreSQL, it turns into a
 * blackhole (connections accepted, nothing forwarded, existing ones dropped) and back.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export class TcpProxy {
  readonly #server: Server;
  readonly #target: { host: string; port: number };
  readonly #sockets = new Set<Socket>();
  #cut = false;

  private constructor(server: Server, target: { host: string; port: number }) {
    this.#server = server;
    this.#target = target;
  }

  static async start(target: { host: string; port: number }): Promise<TcpProxy> {
    let proxy: TcpProxy | undefined;
    const server = createServer((client) => proxy?.accept(client));
    proxy = new TcpProxy(server, target);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get port(): number {
    const address = this.#server.address();
    if (address === null || typeof address === 'string') throw new Error('proxy not listening');
    return address.port;
  }

  accept(client: Socket): void {
    this.#sockets.add(client);
    client.on('close', () => this.#sockets.delete(client));
    client.on('error', () => client.destroy());
    if (this.#cut) return; // blackhole: hold the connection, answer nothing
    const upstream = connect(this.#target.port, this.#target.host);
    this.#sockets.add(upstream);
    upstream.on('close', () => {
      this.#sockets.delete(upstream);
      client.destroy();
    });
    upstream.on('error', () => upstream.destroy());
    client.on('close', () => upstream.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  }

  /** From now on nothing gets through; live connections are dropped. */
  cut(): void {
    this.#cut = true;
    for (const s of this.#sockets) s.destroy();
  }

  restore(): void {
    this.#cut = false;
    for (const s of this.#sockets) s.destroy();
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
