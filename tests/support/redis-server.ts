/**
 * A private redis-server for tests that lose Redis data on purpose (FLUSHALL, a restart without
 * persistence): a child process on a free port, never the machine's shared Redis, stopped by
 * its PID. Nothing is ever written to disk, so a restart always comes back empty.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort, waitFor } from './ports.ts';

export class RedisServer {
  readonly port: number;
  readonly #dir: string;
  #child: ChildProcess | undefined;
  readonly #killOnExit = () => this.#child?.kill('SIGKILL');

  private constructor(port: number) {
    this.port = port;
    this.#dir = mkdtempSync(join(tmpdir(), 'rp-redis-'));
  }

  /** Starts a server on a free port and resolves once it answers PING. */
  static async start(): Promise<RedisServer> {
    const server = new RedisServer(await freePort());
    // A test that dies must not leave its server behind.
    process.once('exit', server.#killOnExit);
    await server.#spawn();
    return server;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** The server's process id (undefined while it is down). */
  get pid(): number | undefined {
    return this.#child?.pid;
  }

  async #spawn(): Promise<void> {
    const child = spawn(
      'redis-server',
      [
        '--port',
        String(this.port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        this.#dir,
        '--daemonize',
        'no',
      ],
      { stdio: 'ignore' },
    );
    this.#child = child;
    const exited = new Promise<never>((_, reject) =>
      child.once('exit', (code) => reject(new Error(`redis-server exited (${code}) before it was ready`))),
    );
    exited.catch(() => {});
    await Promise.race([
      waitFor(() => this.#pings(), 10_000, `redis-server on port ${this.port}`, 20),
      exited,
    ]);
  }

  async #pings(): Promise<boolean> {
    const client = new Redis(this.url, {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    client.on('error', () => {});
    try {
      await client.connect();
      return (await client.ping()) === 'PONG';
    } finally {
      client.disconnect();
    }
  }

  /** Kills the server (SIGKILL, as a crash) and resolves once the process is gone. */
  async kill(): Promise<void> {
    const child = this.#child;
    this.#child = undefined;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await gone;
  }

  /** Starts the server again on the same port, empty. */
  async restart(): Promise<void> {
    await this.kill();
    await this.#spawn();
  }

  /** Runs `fn` with a client of this server, disconnected afterwards. */
  async with<T>(fn: (client: Redis) => Promise<T>): Promise<T> {
    const client = new Redis(this.url, { maxRetriesPerRequest: 1 });
    try {
      return await fn(client);
    } finally {
      client.disconnect();
    }
  }

  /** Stops the server and removes its directory. */
  async stop(): Promise<void> {
    await this.kill();
    process.off('exit', this.#killOnExit);
    rmSync(this.#dir, { recursive: true, force: true });
  }
}
