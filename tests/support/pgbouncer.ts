/**
 * A private PgBouncer in transaction pooling mode in front of the machine's PostgreSQL: Debian's
 * `pgbouncer` as a child process on a free 127.0.0.1 port, its configuration in a temporary
 * directory, stopped by its PID. Never the system service.
 *
 * `auth_type = trust` towards the apps; towards PostgreSQL it logs in as the client's user with
 * the password of the server URL (the userlist holds it, which is what PgBouncer uses to
 * authenticate to the server). No `ignore_startup_parameters`: a client sending a startup
 * parameter PgBouncer does not pass on (`statement_timeout`, as the apps did before issue 22)
 * is refused, as it would be in production.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort, waitFor } from './ports.ts';

export interface PgBouncerOptions {
  /** Server connections per database/user pair (PgBouncer's `default_pool_size`). */
  poolSize?: number;
}

export class PgBouncer {
  readonly port: number;
  readonly #server: URL;
  readonly #dir: string;
  readonly #child: ChildProcess;
  #output = '';
  readonly #killOnExit = () => this.#child.kill('SIGKILL');

  private constructor(port: number, server: URL, dir: string, child: ChildProcess) {
    this.port = port;
    this.#server = server;
    this.#dir = dir;
    this.#child = child;
    child.stdout?.on('data', (chunk: Buffer) => {
      this.#output += chunk.toString();
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      this.#output += chunk.toString();
    });
  }

  /**
   * Starts PgBouncer in front of the server `serverUrl` names (any database on it: `* =`) and
   * resolves once it answers a query.
   */
  static async start(serverUrl: string, options: PgBouncerOptions = {}): Promise<PgBouncer> {
    const server = new URL(serverUrl);
    const user = decodeURIComponent(server.username || 'postgres');
    const password = decodeURIComponent(server.password);
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'rp-pgbouncer-'));
    const quote = (s: string) => `"${s.replaceAll('"', '""')}"`;
    writeFileSync(join(dir, 'userlist.txt'), `${quote(user)} ${quote(password)}\n`);
    writeFileSync(
      join(dir, 'pgbouncer.ini'),
      [
        '[databases]',
        `* = host=${server.hostname} port=${server.port || 5432}`,
        '[pgbouncer]',
        'listen_addr = 127.0.0.1',
        `listen_port = ${port}`,
        'unix_socket_dir =',
        'auth_type = trust',
        `auth_file = ${join(dir, 'userlist.txt')}`,
        'pool_mode = transaction',
        `default_pool_size = ${options.poolSize ?? 20}`,
        'max_client_conn = 1000',
        `admin_users = ${user}`,
        'server_login_retry = 1',
        'log_connections = 0',
        'log_disconnections = 0',
        '',
      ].join('\n'),
    );
    // PgBouncer refuses to run as root; as root it is told to switch to postgres, which must
    // then be able to read its files.
    const asRoot = process.getuid?.() === 0;
    if (asRoot) {
      chmodSync(dir, 0o755);
      chmodSync(join(dir, 'pgbouncer.ini'), 0o644);
      chmodSync(join(dir, 'userlist.txt'), 0o644);
    }
    // Debian installs it in /usr/sbin, which a non-root PATH may lack.
    const binary = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer'].find((p) => existsSync(p)) ?? 'pgbouncer';
    const child = spawn(binary, [...(asRoot ? ['-u', 'postgres'] : []), join(dir, 'pgbouncer.ini')], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const bouncer = new PgBouncer(port, server, dir, child);
    // A test that dies must not leave its PgBouncer behind.
    process.once('exit', bouncer.#killOnExit);
    const exited = new Promise<never>((_, reject) =>
      child.once('exit', (code) =>
        reject(new Error(`pgbouncer exited (${code}) before it was ready:\n${bouncer.#output}`)),
      ),
    );
    exited.catch(() => {});
    const spawnFailed = new Promise<never>((_, reject) => child.once('error', reject));
    spawnFailed.catch(() => {});
    try {
      await Promise.race([
        waitFor(() => bouncer.#answers(), 10_000, `pgbouncer on port ${port}`, 20),
        exited,
        spawnFailed,
      ]);
    } catch (err) {
      await bouncer.stop();
      throw err;
    }
    return bouncer;
  }

  /** The PID of the pgbouncer process. */
  get pid(): number | undefined {
    return this.#child.pid;
  }

  /** What PgBouncer logged (it logs to stderr when not daemonized). */
  output(): string {
    return this.#output;
  }

  /** `databaseUrl` (a database on the server PgBouncer fronts) as reached through PgBouncer. */
  url(databaseUrl: string): string {
    const url = new URL(databaseUrl);
    url.hostname = '127.0.0.1';
    url.port = String(this.port);
    return url.toString();
  }

  /** Runs a command on PgBouncer's admin console (`SHOW POOLS`, `RECONNECT`, …). */
  async admin<T extends pg.QueryResultRow = pg.QueryResultRow>(command: string): Promise<T[]> {
    const url = new URL(this.url(this.#server.toString()));
    url.pathname = '/pgbouncer';
    const client = new pg.Client({ connectionString: url.toString() });
    await client.connect();
    try {
      return (await client.query<T>(command)).rows;
    } finally {
      await client.end();
    }
  }

  async #answers(): Promise<boolean> {
    const client = new pg.Client({ connectionString: this.url(this.#server.toString()) });
    client.on('error', () => {});
    try {
      await client.connect();
      await client.query('select 1');
      return true;
    } catch {
      return false;
    } finally {
      await client.end().catch(() => {});
    }
  }

  /** Kills PgBouncer by its PID, waits for the exit, removes its directory. */
  async stop(): Promise<void> {
    const child = this.#child;
    if (child.exitCode === null && child.signalCode === null) {
      const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      // SIGTERM: an immediate shutdown up to PgBouncer 1.22 (from 1.23 it waits for clients,
      // hence the SIGKILL after a while).
      if (child.pid !== undefined) process.kill(child.pid, 'SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 3_000);
      await gone;
      clearTimeout(timer);
    }
    process.off('exit', this.#killOnExit);
    rmSync(this.#dir, { recursive: true, force: true });
  }
}
