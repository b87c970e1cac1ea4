/**
 * Slow and idle clients over real sockets (docs/security.md, "Slow and idle clients"): the
 * gateway listens on a loopback port with short timeouts, and raw `node:net` clients misbehave
 * against it the way an attacker's would.
 */
import { request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { createLogger } from '@relayplane/shared/logger';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeClients, connectClients } from '../src/clients.ts';
import { connectionsCheckingInterval, requestTimeoutMessage } from '../src/plugins/slow-clients.ts';
import { type TestApp, testApp } from './support/app.ts';
import { OWNER, type Stack, startStack } from './support/stack.ts';

const LIMITS = {
  headersTimeoutMs: 2_000,
  requestTimeoutMs: 3_000,
  keepAliveTimeoutMs: 1_500,
  maxConnections: 10_000,
};
/** How late a timeout may act: Node's checking interval, plus a loaded 2-core machine. */
const SLACK_MS = connectionsCheckingInterval(LIMITS) + 1_500;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface RawConnection {
  socket: Socket;
  /** Everything the server sent so far. */
  received(): string;
  /** When the connection opened (performance.now()). */
  openedAt: number;
  /** Resolves with performance.now() when the server closed (or reset) the connection. */
  closed: Promise<number>;
  isClosed(): boolean;
}

async function open(port: number): Promise<RawConnection> {
  const socket = connect({ host: '127.0.0.1', port });
  let data = '';
  let closedAt: number | undefined;
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    data += chunk;
  });
  // A write after the server closed the connection (EPIPE), or its reset: the close says it.
  socket.on('error', () => {});
  const closed = new Promise<number>((resolve) =>
    socket.once('close', () => {
      closedAt = performance.now();
      resolve(closedAt);
    }),
  );
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  return {
    socket,
    received: () => data,
    openedAt: performance.now(),
    closed,
    isClosed: () => closedAt !== undefined,
  };
}

/** Writes `text` one byte every `everyMs` until done or the connection closes. */
function trickle(connection: RawConnection, text: string, everyMs: number): () => number {
  let sent = 0;
  const timer = setInterval(() => {
    if (connection.isClosed() || sent >= text.length) {
      clearInterval(timer);
      return;
    }
    connection.socket.write(text.charAt(sent));
    sent += 1;
  }, everyMs);
  connection.socket.write(text.charAt(0));
  sent = 1;
  connection.closed.then(() => clearInterval(timer));
  return () => sent;
}

/** One answer on its own connection (no keep-alive pool that could hold sockets across tests). */
function send(
  port: number,
  options: { method: string; path: string; headers?: Record<string, string>; body?: string },
): Promise<{ status: number; headers: Record<string, unknown>; text: string; ms: number }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        method: options.method,
        path: options.path,
        agent: false,
        headers: {
          ...options.headers,
          ...(options.body === undefined
            ? {}
            : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(options.body) }),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          text += c;
        });
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            text,
            ms: performance.now() - started,
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

/** Splits a raw HTTP/1.1 answer into its status, headers and body. */
function parseAnswer(raw: string): { status: number; headers: Record<string, string>; body: string } {
  const [head = '', body = ''] = raw.split('\r\n\r\n', 2);
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status: Number(statusLine.split(' ')[1]), headers, body };
}

describe('gateway slow and idle clients', () => {
  let stack: Stack;
  let port: number;
  beforeAll(async () => {
    stack = await startStack('gw_slow_clients', { slowClients: LIMITS });
    await stack.app.listen({ host: '127.0.0.1', port: 0 });
    port = (stack.app.server.address() as { port: number }).port;
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('checks the timeouts at least every second, not every 30 s', () => {
    expect(connectionsCheckingInterval(LIMITS)).toBe(500);
    expect(
      connectionsCheckingInterval({
        headersTimeoutMs: 10_000,
        requestTimeoutMs: 30_000,
        keepAliveTimeoutMs: 5_000,
        maxConnections: 10_000,
      }),
    ).toBe(1_000);
  });

  it('disconnects a client sending one header byte per second within the header timeout, serving others meanwhile', async () => {
    const slow = await open(port);
    const headers = `GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: ${'slowloris '.repeat(5)}\r\n\r\n`;
    const sent = trickle(slow, headers, 1_000);

    // While the slow client holds its connection, other clients are served (plans come from billing).
    await sleep(500);
    for (const path of ['/v1/plans', '/healthz']) {
      const res = await send(port, { method: 'GET', path });
      expect(res.status, res.text).toBe(200);
    }
    expect(slow.isClosed()).toBe(false);

    const closedAt = await slow.closed;
    const heldMs = closedAt - slow.openedAt;
    expect(heldMs).toBeGreaterThanOrEqual(LIMITS.headersTimeoutMs - 100);
    expect(heldMs).toBeLessThan(LIMITS.headersTimeoutMs + SLACK_MS);
    // It never got its headers in: a 408, never the health answer.
    expect(sent()).toBeLessThan(headers.length);
    const answer = parseAnswer(slow.received());
    expect(answer.status).toBe(408);
    expect(JSON.parse(answer.body)).toEqual({ error: requestTimeoutMessage(LIMITS) });
    expect(answer.headers.connection).toBe('close');
  });

  it('closes a connection that sends nothing within the header timeout', async () => {
    const silent = await open(port);
    const closedAt = await silent.closed;
    const heldMs = closedAt - silent.openedAt;
    expect(heldMs).toBeGreaterThanOrEqual(LIMITS.headersTimeoutMs - 100);
    expect(heldMs).toBeLessThan(LIMITS.headersTimeoutMs + SLACK_MS);
  });

  it('cuts a trickling body at the request timeout with 408 {"error"}', async () => {
    const slow = await open(port);
    const body = JSON.stringify(OWNER);
    slow.socket.write(
      'POST /admin/v1/auth/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
        `Content-Length: ${body.length}\r\n\r\n`,
    );
    const sent = trickle(slow, body, 200);
    const closedAt = await slow.closed;
    const heldMs = closedAt - slow.openedAt;
    expect(sent()).toBeLessThan(body.length);
    expect(heldMs).toBeGreaterThanOrEqual(LIMITS.requestTimeoutMs - 100);
    expect(heldMs).toBeLessThan(LIMITS.requestTimeoutMs + SLACK_MS);
    const answer = parseAnswer(slow.received());
    expect(answer.status).toBe(408);
    expect(answer.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(JSON.parse(answer.body)).toEqual({ error: requestTimeoutMessage(LIMITS) });
  });

  it('lets a body that arrives in time through, slowly but within the request timeout', async () => {
    const slow = await open(port);
    const body = JSON.stringify(OWNER);
    slow.socket.write(
      'POST /admin/v1/auth/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
        `Content-Length: ${body.length}\r\nConnection: close\r\n\r\n`,
    );
    // Past the header timeout, within the request timeout.
    await sleep(LIMITS.headersTimeoutMs + 200);
    slow.socket.write(body);
    await slow.closed;
    const answer = parseAnswer(slow.received());
    expect(answer.status, answer.body).toBe(200);
    expect(JSON.parse(answer.body).token).toMatch(/^rpu_/);
  });

  it('closes an idle keep-alive connection after the keep-alive timeout', async () => {
    const idle = await open(port);
    idle.socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    while (!idle.received().includes('"status":"ok"')) {
      expect(idle.isClosed()).toBe(false);
      await sleep(10);
    }
    const answeredAt = performance.now();
    const answer = parseAnswer(idle.received());
    expect(answer.status).toBe(200);
    expect(answer.headers['keep-alive']).toBe('timeout=1');
    const closedAt = await idle.closed;
    const idleMs = closedAt - answeredAt;
    expect(idleMs).toBeGreaterThanOrEqual(LIMITS.keepAliveTimeoutMs - 100);
    // Node 24 closes 1 s after the advertised timeout (keepAliveTimeoutBuffer).
    expect(idleMs).toBeLessThan(LIMITS.keepAliveTimeoutMs + 1_000 + SLACK_MS);
  });

  it('does not cut a revocation long-poll held longer than the request timeout', async () => {
    const owner = await stack.ownerAuth();
    const relay = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/relays',
      headers: owner,
      payload: { region: 'eu', host: 'slow-clients.example', port: 443 },
    });
    expect(relay.statusCode, relay.body).toBe(201);
    const waitSeconds = Math.ceil((LIMITS.requestTimeoutMs + SLACK_MS) / 1000) + 1;
    const poll = await send(port, {
      method: 'GET',
      path: `/v1/credentials/revocations?cursor=0&wait=${waitSeconds}`,
      headers: { authorization: `Bearer ${relay.json().token}` },
    });
    expect(poll.status, poll.text).toBe(200);
    expect(JSON.parse(poll.text)).toMatchObject({ revocations: [], next_cursor: 0 });
    expect(poll.ms).toBeGreaterThanOrEqual(waitSeconds * 1000 - 200);
  });
});

describe('gateway connection cap', () => {
  const MAX = 2;
  const clients = connectClients(
    { admin: '127.0.0.1:1', issuer: '127.0.0.1:1', billing: '127.0.0.1:1' },
    100,
  );
  const lines: string[] = [];
  let gw: TestApp;
  let port: number;
  beforeAll(async () => {
    gw = await testApp({
      config: { bodyLimitBytes: 65_536, jwksCacheMs: 1_000, maxConnections: MAX },
      clients,
      logger: createLogger(
        { level: 'warn', service: 'gateway' },
        { write: (line: string) => lines.push(line) },
      ),
    });
    await gw.app.listen({ host: '127.0.0.1', port: 0 });
    port = (gw.app.server.address() as { port: number }).port;
  });
  afterAll(async () => {
    await gw?.close();
    closeClients(clients);
  });

  async function connections(): Promise<number> {
    return new Promise((resolve, reject) =>
      gw.app.server.getConnections((err, count) => (err ? reject(err) : resolve(count))),
    );
  }

  async function until(check: () => Promise<boolean>): Promise<void> {
    for (let i = 0; i < 200 && !(await check()); i += 1) await sleep(10);
    expect(await check()).toBe(true);
  }

  it(`over GATEWAY_MAX_CONNECTIONS (${MAX}) a new connection is closed at once without an answer; below it again, served`, async () => {
    const held = [await open(port), await open(port)];
    await until(async () => (await connections()) === MAX);

    // The kernel completes the handshake; Node closes the connection at once.
    const refused = await open(port);
    refused.socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    const closedAt = await refused.closed;
    expect(closedAt - refused.openedAt).toBeLessThan(1_000);
    expect(refused.received()).toBe('');
    expect(await connections()).toBe(MAX);
    await until(async () => lines.some((l) => l.includes('connections refused')));
    const warning = JSON.parse(lines.find((l) => l.includes('connections refused')) ?? '{}');
    expect(warning).toMatchObject({ dropped: 1, maxConnections: MAX });

    // The connections already open are served.
    const [first, second] = held as [RawConnection, RawConnection];
    first.socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
    await first.closed;
    expect(parseAnswer(first.received()).status).toBe(200);
    second.socket.destroy();
    await until(async () => (await connections()) === 0);

    // Below the cap again: a new connection is served.
    const res = await send(port, { method: 'GET', path: '/healthz' });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.text)).toEqual({ status: 'ok' });
  });
});

describe('gateway connection cap per client address (GATEWAY_MAX_CONNECTIONS_PER_IP)', () => {
  const PER_IP = 2;
  const clients = connectClients(
    { admin: '127.0.0.1:1', issuer: '127.0.0.1:1', billing: '127.0.0.1:1' },
    100,
  );
  const lines: string[] = [];
  const lineWaiters: { match: string; resolve: (line: string) => void }[] = [];
  /** The first log line containing `match`, written already or when it is. */
  const logged = (match: string): Promise<string> => {
    const line = lines.find((l) => l.includes(match));
    if (line !== undefined) return Promise.resolve(line);
    return new Promise((resolve) => lineWaiters.push({ match, resolve }));
  };
  let gw: TestApp;
  let port: number;
  beforeAll(async () => {
    gw = await testApp({
      config: {
        bodyLimitBytes: 65_536,
        jwksCacheMs: 1_000,
        maxConnections: 50,
        maxConnectionsPerIp: PER_IP,
        // A proxy carries many clients: not capped per address.
        trustedProxies: ['127.0.0.3'],
      },
      clients,
      logger: createLogger(
        { level: 'warn', service: 'gateway' },
        {
          write: (line: string) => {
            lines.push(line);
            for (const w of lineWaiters) if (line.includes(w.match)) w.resolve(line);
          },
        },
      ),
    });
    await gw.app.listen({ host: '0.0.0.0', port: 0 });
    port = (gw.app.server.address() as { port: number }).port;
  });
  afterAll(async () => {
    await gw?.close();
    closeClients(clients);
  });

  /** A raw connection from `localAddress` (every 127/8 address is this host's on Linux). */
  async function from(localAddress: string) {
    const socket = connect({ host: '127.0.0.1', port, localAddress });
    let data = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      data += chunk;
    });
    socket.on('error', () => {});
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    return { socket, closed, received: () => data };
  }

  async function served(c: Awaited<ReturnType<typeof from>>): Promise<boolean> {
    c.socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
    await c.closed;
    return c.received().startsWith('HTTP/1.1 200');
  }

  it('closes a third connection from one address at once, serves another address, and frees the slot on close', async () => {
    const held = [await from('127.0.0.1'), await from('127.0.0.1')];
    const third = await from('127.0.0.1');
    await third.closed;
    expect(third.received()).toBe('');
    const warning = JSON.parse(await logged('GATEWAY_MAX_CONNECTIONS_PER_IP'));
    expect(warning).toMatchObject({ level: 40, dropped: 1, maxConnectionsPerIp: PER_IP });
    // Another address is not held back by the first one's.
    expect(await served(await from('127.0.0.2'))).toBe(true);
    // The held ones are served; once one closes, its address may open another.
    expect(await served(held[0] as Awaited<ReturnType<typeof from>>)).toBe(true);
    expect(await served(await from('127.0.0.1'))).toBe(true);
    held[1]?.socket.destroy();
  });

  it('does not cap a trusted proxy per address (it carries many clients)', async () => {
    const many = await Promise.all([1, 2, 3, 4].map(() => from('127.0.0.3')));
    for (const c of many) expect(await served(c)).toBe(true);
  });
});
