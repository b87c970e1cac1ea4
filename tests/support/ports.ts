import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/**
 * Ports handed to test services come from below the kernel's ephemeral range (Linux:
 * /proc/sys/net/ipv4/ip_local_port_range, usually 32768–60999). A port from inside it can be
 * given to an outgoing connection before the service binds it, and a client that dials such a
 * port while nothing listens yet can even connect to itself (TCP simultaneous open): a
 * reconnecting gRPC or Redis client would then talk to its own socket.
 */
const EPHEMERAL_LOW = (() => {
  try {
    return (
      Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || 32768
    );
  } catch {
    return 32768;
  }
})();
const LOW = Math.min(20_000, EPHEMERAL_LOW - 4_000);
const handedOut = new Set<number>();

function canBind(port: number): Promise<boolean> {
  const server = createServer();
  return new Promise((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A port that was free a moment ago on 127.0.0.1, outside the ephemeral range, never handed out twice by this process. */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = LOW + Math.floor(Math.random() * (EPHEMERAL_LOW - LOW));
    if (handedOut.has(port)) continue;
    if (await canBind(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error(`no free port in ${LOW}–${EPHEMERAL_LOW - 1}`);
}

/** Polls `check` until it returns true or `timeoutMs` passes; returns the time it took. */
export async function waitFor(
  check: () => Promise<boolean>,
  timeoutMs: number,
  what: string,
  everyMs = 100,
): Promise<number> {
  const start = Date.now();
  for (;;) {
    if (await check().catch(() => false)) return Date.now() - start;
    if (Date.now() - start > timeoutMs)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
