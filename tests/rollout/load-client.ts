/**
 * The rolling-restart test's HTTP client: `node:http` over one keep-alive Agent whose idle
 * connections close after IDLE_MS, far below the gateway's keep-alive timeout (Fastify's
 * 72 s, advertised as `Keep-Alive: timeout=72`), and which reuses the most recently used
 * connection first.
 *
 * Why not `fetch`: undici keeps an idle connection up to the server's advertised timeout less
 * 2 s, and closes it from a timer. On this 2-core machine under the test's load (load average
 * 12–20) that timer can run late by more than the margin, and a request then goes out on a
 * connection the gateway is closing for idleness at that moment: it is lost without an answer
 * ("SocketError: other side closed"), and the gateway never sees it — the likely cause of what
 * the test showed about once in 50,000 requests (the only way the gateway closes a connection
 * outside its shutdown; not reproduced, see docs/performance.md, "Rolling restart"). A connection sits idle that long here because the stalls of
 * a restart open many connections at once (every request in flight needs one), which the
 * steady load afterwards no longer needs. Any client that reuses a connection when the server
 * may be dropping it has that race; the remedy is the one a load balancer in front of the
 * gateway needs too: close idle connections well before the server does.
 */
import { Agent, request } from 'node:http';
import type { Socket } from 'node:net';

/** How long the client keeps a connection idle (the gateway keeps it 72 s). */
export const IDLE_MS = 5_000;

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

export interface ReuseStats {
  /** Requests sent on a new connection / on one used before. */
  fresh: number;
  reused: number;
  /** The longest a reused connection had been idle (ms). */
  maxIdleMs: number;
}

export interface LoadClient {
  post(url: string, headers: Record<string, string>, body: string): Promise<Answer>;
  stats: ReuseStats;
  close(): void;
}

export function createLoadClient(idleMs = IDLE_MS): LoadClient {
  const agent = new Agent({ keepAlive: true, timeout: idleMs, scheduling: 'lifo' });
  const stats: ReuseStats = { fresh: 0, reused: 0, maxIdleMs: 0 };
  /** When each connection was last handed back to the pool. */
  const freedAt = new WeakMap<Socket, number>();
  agent.on('free', (socket: Socket) => freedAt.set(socket, performance.now()));
  return {
    stats,
    post(url, headers, body) {
      return new Promise<Answer>((resolve, reject) => {
        const req = request(url, {
          method: 'POST',
          agent,
          headers: { ...headers, 'content-length': Buffer.byteLength(body) },
        });
        req.once('socket', (socket: Socket) => {
          const freed = freedAt.get(socket);
          if (freed === undefined) {
            stats.fresh++;
            return;
          }
          stats.reused++;
          stats.maxIdleMs = Math.max(stats.maxIdleMs, Math.round(performance.now() - freed));
        });
        req.once('error', reject);
        req.once('response', (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.once('error', reject);
          res.once('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              headers: res.headers,
              text: Buffer.concat(chunks).toString(),
            }),
          );
        });
        req.end(body);
      });
    },
    close() {
      agent.destroy();
    },
  };
}
