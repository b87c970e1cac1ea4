/**
 * The webhooks part of `pnpm bench` (issue 34): events delivered per second to a local receiver,
 * and the latency a change adds before its first delivery attempt, against a mode run.ts started
 * (with RELAYPLANE_WEBHOOKS_ALLOW_HTTP_LOOPBACK, so the receiver may be on 127.0.0.1).
 *
 * The events are relay sessions' `session.started` and `session.ended` (the busiest kind: the
 * issuer's notice in the ledger's transaction, its outbox, admin's fan-out, the dispatcher, the
 * queue, a signed POST). Baseline, measured in the same run: the same receiver fed directly by
 * this process — the body signed with HMAC-SHA256 and POSTed, 16 at a time — the floor of a
 * delivery's cost on this machine.
 *
 * - throughput: sessions connected and ended back to back by BENCH_CONNECTIONS workers for the
 *   duration; delivered/s = events received / (last arrival − first change).
 * - latency: one session at a time (connect, end), 20 per second; per event, the time from the
 *   answer to the change to the receiver's arrival: p50, p99.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { profiled, type Target } from './run.ts';

export interface WebhookFigures {
  baseline_posts_per_second: number;
  delivered_per_second: number;
  ratio_to_baseline: number;
  events: number;
  first_attempt_latency_ms: { p50: number; p99: number; samples: number };
  /**
   * CPU µs per event the deliveries add (the mode's processes and PostgreSQL and Redis): the same
   * session cycles with a subscribed endpoint and without one, the difference per event.
   */
  cpu_us_per_event: { with_endpoint: number; without: number; added: number };
  /** The same, per process (and PostgreSQL, Redis). */
  cpu_us_per_event_by_process: { with_endpoint: Record<string, number>; without: Record<string, number> };
}

interface Receiver {
  url: string;
  /** Arrival time (performance.now) per session id and event type. */
  arrivals: Map<string, number>;
  count: () => number;
  close: () => Promise<void>;
}

async function startReceiver(): Promise<Receiver> {
  const arrivals = new Map<string, number>();
  let count = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      count++;
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString()) as {
          type?: string;
          data?: { session_id?: string };
        };
        if (body.data?.session_id) arrivals.set(`${body.data.session_id}:${body.type}`, performance.now());
      } catch {
        // the baseline's bodies carry no session
      }
      res.writeHead(204).end();
    });
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    arrivals,
    count: () => count,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function ok(res: Response): Promise<any> {
  if (!res.ok) throw new Error(`${res.url} answered ${res.status}: ${await res.text()}`);
  return res.status === 204 ? undefined : res.json();
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

/** The receiver fed directly: sign and POST, `concurrency` at a time, for `ms`. */
async function baselineRate(url: string, ms: number, concurrency = 16): Promise<number> {
  const key = randomBytes(32);
  let n = 0;
  const deadline = performance.now() + ms;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < deadline) {
        const id = `msg_${randomBytes(10).toString('hex')}`;
        const body = JSON.stringify({
          id,
          type: 'session.started',
          timestamp: new Date().toISOString(),
          data: {},
        });
        const ts = Math.floor(Date.now() / 1000);
        const signature = createHmac('sha256', key).update(`${id}.${ts}.${body}`).digest('base64');
        const res = await fetch(url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'webhook-id': id,
            'webhook-timestamp': String(ts),
            'webhook-signature': `v1,${signature}`,
          },
          body,
        });
        await res.arrayBuffer();
        n++;
      }
    }),
  );
  return Math.round((n * 1000) / (performance.now() - started));
}

export async function measureWebhooks(
  target: Target,
  owner: { email: string; password: string },
  o: { seconds: number; connections: number },
): Promise<WebhookFigures> {
  const receiver = await startReceiver();
  try {
    const baseline = await baselineRate(receiver.url, 2_000);
    const base = target.urls[0] as string;
    const post = (path: string, body: object, headers: Record<string, string> = {}) =>
      fetch(base + path, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      });
    const { token } = await ok(await post('/admin/v1/auth/login', owner));
    const auth = { authorization: `Bearer ${token}` };
    const relay = await ok(
      await post(
        '/admin/v1/relays',
        { region: 'bench', host: `relay-${randomBytes(3).toString('hex')}.hooks`, port: 4433 },
        auth,
      ),
    );
    const credential = await ok(
      await fetch(`${base}/api/v1/credentials`, {
        method: target.issue.method,
        headers: target.issue.headers,
        body: JSON.stringify({ ttl_seconds: 3600 }),
      }),
    );
    const claims = JSON.parse(
      Buffer.from(String(credential.token).split('.')[1] as string, 'base64url').toString(),
    ) as {
      pid: string;
    };
    const endpoint = await ok(
      await post(
        `/admin/v1/projects/${claims.pid}/webhooks`,
        { url: receiver.url, events: ['session.started', 'session.ended'] },
        auth,
      ),
    );
    const headers = {
      'content-type': 'application/json',
      authorization: `Basic ${Buffer.from(`${relay.relay.id}:${relay.token}`).toString('base64')}`,
    };
    const url = (i: number) => `${target.urls[i % target.urls.length]}/v1/relays/auth`;
    const event = (id: string, name: 'connect' | 'end') =>
      JSON.stringify({
        id,
        event: name,
        node: relay.relay.id,
        transport: 'webtransport',
        remote: '203.0.113.9:4433',
        path: '/bench/hooks',
        query: `jwt=${credential.token}`,
        ...(name === 'end' ? { reason: 'done', duration: 1, bytes: { sent: 10, received: 10 } } : {}),
      });
    /** A session's two changes; answers when each was answered. */
    const cycle = async (w: number) => {
      const id = randomBytes(16).toString('hex');
      const connect = await fetch(url(w), { method: 'POST', headers, body: event(id, 'connect') });
      await connect.arrayBuffer();
      if (!connect.ok) throw new Error(`connect: ${connect.status}`);
      const connected = performance.now();
      const end = await fetch(url(w), { method: 'POST', headers, body: event(id, 'end') });
      await end.arrayBuffer();
      if (!end.ok) throw new Error(`end: ${end.status}`);
      return { id, connected, ended: performance.now() };
    };
    const waitFor = async (test: () => boolean, ms: number) => {
      const deadline = Date.now() + ms;
      while (!test() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    };

    // Latency: one session at a time, 20 per second.
    const samples: number[] = [];
    const changes: { key: string; at: number }[] = [];
    const latencyEnd = Date.now() + o.seconds * 1000;
    while (Date.now() < latencyEnd) {
      const tick = Date.now();
      const c = await cycle(0);
      changes.push(
        { key: `${c.id}:session.started`, at: c.connected },
        { key: `${c.id}:session.ended`, at: c.ended },
      );
      await new Promise((r) => setTimeout(r, Math.max(0, 50 - (Date.now() - tick))));
    }
    await waitFor(() => changes.every((c) => receiver.arrivals.has(c.key)), 15_000);
    for (const c of changes) {
      const arrived = receiver.arrivals.get(c.key);
      if (arrived !== undefined) samples.push(arrived - c.at);
    }
    samples.sort((a, b) => a - b);

    /** Sessions back to back from every worker for the duration: how many cycles. */
    const churn = async () => {
      let sessions = 0;
      const deadline = Date.now() + o.seconds * 1000;
      await Promise.all(
        Array.from({ length: o.connections }, async (_, w) => {
          while (Date.now() < deadline) {
            await cycle(w);
            sessions++;
          }
        }),
      );
      return sessions;
    };
    const cpuPerEvent = (cpu: Record<string, number>) =>
      Object.entries(cpu)
        .filter(([name]) => name !== 'load-generator')
        .reduce((sum, [, v]) => sum + v, 0);

    // Throughput, with the endpoint subscribed: every event is delivered.
    const before = receiver.count();
    let sessions = 0;
    const started = performance.now();
    const storage = target.mode !== 'embedded';
    const withEndpoint = await profiled(
      target.procs,
      async () => {
        sessions = await churn();
        await waitFor(() => receiver.count() >= before + sessions * 2, 60_000);
        return { rps: (sessions * 2) / o.seconds, p50: 0, p99: 0, non2xx: 0, errors: 0 };
      },
      o.seconds,
      storage,
    );
    const delivered = receiver.count() - before;
    const lastArrival = Math.max(...receiver.arrivals.values());
    const rate = Math.round((delivered * 1000) / Math.max(1, lastArrival - started));

    // The same churn with the endpoint disabled: the notices still flow, nothing is delivered.
    await ok(
      await fetch(`${base}/admin/v1/projects/${claims.pid}/webhooks/${endpoint.webhook.id}`, {
        method: 'PATCH',
        headers: { 'content-type': 'application/json', ...auth },
        body: JSON.stringify({ enabled: false }),
      }),
    );
    const without = await profiled(
      target.procs,
      async () => {
        const n = await churn();
        // Let the outboxes drain as the other run did.
        await new Promise((r) => setTimeout(r, 2_000));
        return { rps: (n * 2) / o.seconds, p50: 0, p99: 0, non2xx: 0, errors: 0 };
      },
      o.seconds,
      storage,
    );
    const withCpu = cpuPerEvent(withEndpoint.cpu_us_per_request);
    const withoutCpu = cpuPerEvent(without.cpu_us_per_request);
    return {
      baseline_posts_per_second: baseline,
      delivered_per_second: rate,
      ratio_to_baseline: +(rate / baseline).toFixed(3),
      events: delivered,
      first_attempt_latency_ms: {
        p50: Math.round(percentile(samples, 50)),
        p99: Math.round(percentile(samples, 99)),
        samples: samples.length,
      },
      cpu_us_per_event: { with_endpoint: withCpu, without: withoutCpu, added: withCpu - withoutCpu },
      cpu_us_per_event_by_process: {
        with_endpoint: withEndpoint.cpu_us_per_request,
        without: without.cpu_us_per_request,
      },
    };
  } finally {
    await receiver.close();
  }
}
