/**
 * Slow and idle clients (docs/security.md): what the HTTP server allows a connection before it
 * is closed, and how many connections it holds at once.
 *
 * - Headers timeout: a connection must have sent its request headers within it (a client that
 *   trickles them, or sends nothing, is closed).
 * - Request timeout: the whole request, body included, must have arrived within it; a trickling
 *   body is answered 408 `{"error": …}` and closed. Node measures it until the request is fully
 *   received, so long-polls (`wait`) and long answers are not bounded by it.
 * - Keep-alive timeout: an idle connection between requests is closed after it.
 * - Max connections: over it, a new connection is accepted by the kernel and closed at once by
 *   Node, without an answer (`server.maxConnections`).
 *
 * Node checks the header and request timeouts only every `connectionsCheckingInterval` (30 s by
 * default, which would let a slow client hold a connection up to 30 s past its timeout): here it
 * is at most 1 s, and a quarter of the shorter timeout when that is smaller, so each timeout holds
 * to within about a second.
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { throttleClient } from '@relayplane/shared/client-address';
import type { Logger } from '@relayplane/shared/logger';
import type { FastifyServerOptions } from 'fastify';
import type { GatewayConfig } from '../config.ts';
import { trustedProxyCheck } from '../trusted-proxies.ts';

export type SlowClientLimits = Pick<
  GatewayConfig,
  'headersTimeoutMs' | 'requestTimeoutMs' | 'keepAliveTimeoutMs' | 'maxConnections'
> &
  Partial<Pick<GatewayConfig, 'maxConnectionsPerIp' | 'throttleIpv6Prefix' | 'trustedProxies'>>;

/** How often Node looks for connections over their header or request timeout. */
export function connectionsCheckingInterval(limits: SlowClientLimits): number {
  const shorter = Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs);
  return Math.max(10, Math.min(1_000, Math.floor(shorter / 4)));
}

/** What a request that did not arrive in time is answered before its connection is closed. */
export function requestTimeoutMessage(limits: SlowClientLimits): string {
  return (
    `request not received in time: the headers must arrive within ${limits.headersTimeoutMs} ms ` +
    `and the whole request within ${limits.requestTimeoutMs} ms`
  );
}

function rawAnswer(status: number, reason: string, error: string): string {
  const body = JSON.stringify({ error });
  return (
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n${body}`
  );
}

/** The Fastify options that set the server's timeouts and answer clients that broke them. */
export function slowClientServerOptions(
  limits: SlowClientLimits,
  logger: Logger,
): Pick<FastifyServerOptions, 'keepAliveTimeout' | 'requestTimeout' | 'clientErrorHandler'> & {
  http: {
    headersTimeout: number;
    requestTimeout: number;
    connectionsCheckingInterval: number;
  };
} {
  const timedOut = rawAnswer(408, 'Request Timeout', requestTimeoutMessage(limits));
  return {
    // Fastify sets these two on the server after creating it (its defaults: 72 s and none).
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    // Only settable when the server is created.
    http: {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      connectionsCheckingInterval: connectionsCheckingInterval(limits),
    },
    // Errors on a connection before Fastify has a request (timeouts, unparsable requests): the
    // `{"error"}` envelope, and never a second answer on a connection already answering.
    clientErrorHandler(err, socket) {
      if (err.code === 'ECONNRESET' || socket.destroyed) return;
      const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
      const answerable = socket.writable && !inFlight?.headersSent;
      let answer: string;
      if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
        logger.debug({ remoteAddress: socket.remoteAddress }, 'client too slow: connection closed (408)');
        answer = timedOut;
      } else if (err.code === 'HPE_HEADER_OVERFLOW') {
        answer = rawAnswer(431, 'Request Header Fields Too Large', 'request headers are too large');
      } else {
        answer = rawAnswer(400, 'Bad Request', 'malformed HTTP request');
      }
      if (!answerable) {
        socket.destroy();
        return;
      }
      socket.end(answer, () => socket.destroy());
      // A client that does not read the answer cannot hold the connection either.
      setTimeout(() => socket.destroy(), 1_000).unref();
    },
  };
}

/** How often, at most, a warning says that connections were refused over the cap. */
const DROP_WARNING_INTERVAL_MS = 10_000;

/**
 * At most `maxConnections` connections at once: Node closes any connection accepted over it
 * at once. Refusals are counted and logged as one warning per interval.
 */
export function capConnections(server: Server, maxConnections: number, logger: Logger): void {
  server.maxConnections = maxConnections;
  let dropped = 0;
  let timer: NodeJS.Timeout | undefined;
  server.on('drop', () => {
    dropped += 1;
    if (timer) return;
    const warn = () => {
      if (dropped > 0) {
        logger.warn(
          { dropped, maxConnections },
          'connections refused: the gateway holds GATEWAY_MAX_CONNECTIONS connections',
        );
      }
      dropped = 0;
      timer = undefined;
    };
    warn();
    timer = setTimeout(warn, DROP_WARNING_INTERVAL_MS).unref();
  });
}

/**
 * At most `maxPerIp` connections at once from one client address (`GATEWAY_MAX_CONNECTIONS_PER_IP`,
 * issue 31), besides the global cap: one address (an IPv6 /64 is one) cannot hold every
 * connection the gateway allows. Counted by the TCP peer, not `X-Forwarded-For` (a header says
 * nothing until a request is parsed, and a connection is what is held); so connections from a
 * trusted proxy (`GATEWAY_TRUSTED_PROXIES`), which carry many clients, are not capped per address
 * (the global cap still applies; the proxy in front caps its own clients). Over the cap a new
 * connection is closed at once, without an answer, like the global cap's; refusals are logged
 * as one warning per interval.
 */
export function capConnectionsPerAddress(
  server: Server,
  options: { maxPerIp: number; ipv6Prefix: number; trustedProxies: readonly string[] },
  logger: Logger,
): void {
  const trusted = trustedProxyCheck(options.trustedProxies);
  const open = new Map<string, number>();
  let dropped = 0;
  let timer: NodeJS.Timeout | undefined;
  const warn = () => {
    if (dropped > 0) {
      logger.warn(
        { dropped, maxConnectionsPerIp: options.maxPerIp },
        'connections refused: a client address holds GATEWAY_MAX_CONNECTIONS_PER_IP connections',
      );
    }
    dropped = 0;
    timer = undefined;
  };
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress?.replace(/^::ffff:/, '') ?? '';
    if (address === '') return;
    if (trusted(address)) return;
    const client = throttleClient(address, options.ipv6Prefix);
    const held = open.get(client) ?? 0;
    if (held >= options.maxPerIp) {
      socket.destroy();
      dropped += 1;
      if (!timer) {
        warn();
        timer = setTimeout(warn, DROP_WARNING_INTERVAL_MS).unref();
      }
      return;
    }
    open.set(client, held + 1);
    socket.once('close', () => {
      const left = (open.get(client) ?? 1) - 1;
      if (left <= 0) open.delete(client);
      else open.set(client, left);
    });
  });
}
