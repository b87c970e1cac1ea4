/**
 * The relay-auth part of `pnpm bench` (issue 33): relay session decisions at `POST /v1/relays/auth`
 * against a mode already started by run.ts, next to the raw single-core Ed25519 verify rate
 * measured in the same run (a connect verifies one credential: that is the floor of its work).
 *
 * - revalidate: the steady-state decision (every live session, every cadence), closed loop over
 *   BENCH_RELAY_SESSIONS admitted sessions, then open loop at half that rate for the p99;
 * - session: connect + revalidate + end of a new session, back to back, by BENCH_CONNECTIONS
 *   workers: what admitting and ending costs (three decisions per cycle).
 *
 * Decisions per CPU-second are the decisions over the CPU time the mode's processes and the
 * storage servers spent meanwhile: "decisions per second per core".
 */
import { generateKeyPairSync, randomBytes, sign, verify } from 'node:crypto';
import autocannon from 'autocannon';
import { paced } from './paced.ts';
import { type Load, profiled, type Target } from './run.ts';

const SESSIONS = Number(process.env.BENCH_RELAY_SESSIONS ?? 64);

export interface RelayAuthFigures {
  verify_per_second_one_core: number;
  revalidate: { rps: number; p99: number; decisions_per_cpu_second: number; ratio_to_verify: number };
  revalidate_half_rate: { rps: number; p50: number; p99: number };
  session_cycles: { cycles_per_second: number; decisions_per_cpu_second: number; ratio_to_verify: number };
  non2xx: number;
  errors: number;
}

/** The raw Ed25519 verify rate of one core, on a JWT-sized input. */
export function verifyRate(ms: number): number {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const input = Buffer.from(
    `${randomBytes(40).toString('base64url')}.${randomBytes(180).toString('base64url')}`,
  );
  const signature = sign(null, input, privateKey);
  for (let i = 0; i < 2_000; i++) verify(null, input, publicKey, signature);
  let n = 0;
  const start = performance.now();
  while (performance.now() - start < ms) {
    for (let i = 0; i < 200; i++) verify(null, input, publicKey, signature);
    n += 200;
  }
  return Math.round((n * 1000) / (performance.now() - start));
}

async function ok(res: Response): Promise<any> {
  if (!res.ok) throw new Error(`${res.url} answered ${res.status}: ${await res.text()}`);
  return res.status === 204 ? undefined : res.json();
}

/** A registered relay, and a credential of the bench's key (the owner logs in for the relay). */
async function setUp(target: Target, owner: { email: string; password: string }) {
  const base = target.urls[0] as string;
  const post = (path: string, body: object, headers: Record<string, string> = {}) =>
    fetch(base + path, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
  const { token } = await ok(await post('/admin/v1/auth/login', owner));
  const relay = await ok(
    await post(
      '/admin/v1/relays',
      { region: 'bench', host: `relay-${randomBytes(3).toString('hex')}.bench`, port: 4433 },
      { authorization: `Bearer ${token}` },
    ),
  );
  const credential = await ok(
    await fetch(base + '/api/v1/credentials', {
      method: target.issue.method,
      headers: target.issue.headers,
      body: JSON.stringify({ ttl_seconds: 3600 }),
    }),
  );
  return {
    relayId: relay.relay.id as string,
    headers: {
      'content-type': 'application/json',
      authorization: `Basic ${Buffer.from(`${relay.relay.id}:${relay.token}`).toString('base64')}`,
    },
    credential: credential.token as string,
  };
}

export async function measureRelayAuth(
  target: Target,
  owner: { email: string; password: string },
  o: { seconds: number; connections: number },
): Promise<RelayAuthFigures> {
  const verifyPerSecond = verifyRate(2_000);
  const { relayId, headers, credential } = await setUp(target, owner);
  const event = (id: string, name: 'connect' | 'revalidate' | 'end') =>
    JSON.stringify({
      id,
      event: name,
      node: relayId,
      transport: 'webtransport',
      remote: '203.0.113.9:4433',
      path: '/bench/room',
      query: `jwt=${credential}`,
      ...(name === 'end' ? { reason: 'done', duration: 1, bytes: { sent: 1000, received: 100 } } : {}),
    });
  const url = (i: number) => `${target.urls[i % target.urls.length]}/v1/relays/auth`;
  const ids = Array.from({ length: SESSIONS }, () => randomBytes(16).toString('hex'));
  for (const [i, id] of ids.entries()) {
    await ok(await fetch(url(i), { method: 'POST', headers, body: event(id, 'connect') }));
  }
  const revalidations = ids.map((id) => event(id, 'revalidate'));
  let next = 0;
  const revalidate = await profiled(
    target.procs,
    async (): Promise<Load> => {
      const r = await autocannon({
        url: target.urls.map((u) => `${u}/v1/relays/auth`) as unknown as string,
        connections: o.connections,
        duration: o.seconds,
        method: 'POST',
        headers,
        requests: [
          {
            setupRequest: (req) => ({ ...req, body: revalidations[next++ % revalidations.length] as string }),
          },
        ],
      });
      return {
        rps: Math.round(r.requests.average),
        p50: r.latency.p50,
        p99: r.latency.p99,
        non2xx: r.non2xx,
        errors: r.errors,
      };
    },
    o.seconds,
  );
  const half = await paced({
    url: url(0),
    method: 'POST',
    headers,
    body: revalidations[0] as string,
    rate: Math.max(1, Math.round(revalidate.rps / 2)),
    durationSeconds: o.seconds,
    connections: o.connections,
  });
  let cycles = 0;
  let failed = 0;
  const cycle = await profiled(
    target.procs,
    async (): Promise<Load> => {
      const deadline = Date.now() + o.seconds * 1000;
      await Promise.all(
        Array.from({ length: o.connections }, async (_, w) => {
          while (Date.now() < deadline) {
            const id = randomBytes(16).toString('hex');
            try {
              for (const name of ['connect', 'revalidate', 'end'] as const) {
                const res = await fetch(url(w), { method: 'POST', headers, body: event(id, name) });
                await res.arrayBuffer();
                if (!res.ok) throw new Error(`${name}: ${res.status}`);
              }
              cycles++;
            } catch {
              failed++;
            }
          }
        }),
      );
      return { rps: Math.round((cycles * 3) / o.seconds), p50: 0, p99: 0, non2xx: failed, errors: 0 };
    },
    o.seconds,
  );
  for (const [i, id] of ids.entries()) {
    await ok(await fetch(url(i), { method: 'POST', headers, body: event(id, 'end') }));
  }
  const perCpuSecond = (cpu: Record<string, number>) => {
    // The mode's processes and the storage servers, not the load generator.
    const us = Object.entries(cpu)
      .filter(([name]) => name !== 'load-generator')
      .reduce((sum, [, v]) => sum + v, 0);
    return us > 0 ? Math.round(1_000_000 / us) : 0;
  };
  const revalidatePerCpu = perCpuSecond(revalidate.cpu_us_per_request);
  const cyclePerCpu = perCpuSecond(cycle.cpu_us_per_request);
  return {
    verify_per_second_one_core: verifyPerSecond,
    revalidate: {
      rps: revalidate.rps,
      p99: revalidate.p99,
      decisions_per_cpu_second: revalidatePerCpu,
      ratio_to_verify: +(revalidatePerCpu / verifyPerSecond).toFixed(3),
    },
    revalidate_half_rate: { rps: half.rps, p50: half.p50, p99: half.p99 },
    session_cycles: {
      cycles_per_second: Math.round(cycles / o.seconds),
      decisions_per_cpu_second: cyclePerCpu,
      ratio_to_verify: +(cyclePerCpu / verifyPerSecond).toFixed(3),
    },
    non2xx: revalidate.non2xx + half.non2xx + failed,
    errors: revalidate.errors + half.errors,
  };
}
