/**
 * The soak's mixed load over both gateways.
 *
 * Three high-rate streams run open loop (../bench/paced.ts: requests fall due at evenly
 * spaced times, whatever the answers' latency): issuance, relay assignment and JWKS. Their
 * rates start from the machine's capacity, measured at the start: each stream's closed-loop
 * rate alone (autocannon, as `pnpm bench` measures issuance), and the stream's share of that
 * rate — 30 % issuance, 10 % assignment, 5 % JWKS — which fixes the streams' proportions. How
 * much of the machine that takes is not the sum of the shares (45 %: the first 10-minute run
 * at those rates kept the machine 98 % busy), so calibrate.ts then scales the three rates
 * together, with the scripted flows running, until the soak uses about half the machine's
 * cores, and the rates stay fixed from there. Measured rather than fixed, so that the same
 * command loads a faster or a slower machine alike; the price is that a machine busy with
 * something else during the capacity measurement gets lighter streams in proportion, which
 * the calibration then makes up (the rates are printed and kept in the results).
 *
 * The scripted flows run at fixed rates through the OpenAPI-checking client
 * (../support/api.ts), each round after the previous one ended: logins (login, session,
 * logout), admin CRUD (API key and allowlist entry created, listed and removed, projects
 * listed), revocations (a credential issued on one gateway and revoked on the other), and one
 * relay per gateway reading the revocation feed as relays do (long-poll, cursor) and sending
 * heartbeats. Every answer is tallied; one a flow does not expect is a failure, except a 503
 * with Retry-After (a moment's unavailability, which the contract allows).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { CREDENTIAL_TTL_SECONDS } from '@relayplane/contract/contract';
import autocannon from 'autocannon';
import { paced } from '../bench/paced.ts';
import type { Api, ApiResponse } from '../support/api.ts';
import { machineCpu } from '../support/machine.ts';
import type { StreamWindow } from './sample.ts';

export interface Fixtures {
  owner: { email: string; password: string };
  ownerAuth: Record<string, string>;
  /** An API key of the bootstrap tenant, whose plan's cap the load cannot reach. */
  apiKey: string;
  /** The project the admin CRUD flow works in (not the API key's: an allowlist would lock it). */
  crudProjectId: string;
  /** One registered relay's node token per gateway. */
  relayTokens: string[];
}

export type StreamName = 'issuance' | 'assignment' | 'jwks';
export type Rates = Record<StreamName, number>;

interface Stream {
  name: StreamName;
  /** Share of the machine: the stream runs at share × its closed-loop rate. */
  share: number;
  /** Connections over both gateways, closed loop (capacity) and paced. */
  closedConnections: number;
  pacedConnections: number;
  /** The request; assignment's carries a fresh credential, so it is built per window. */
  request(
    baseUrl: string,
    fx: Fixtures,
  ): Promise<{ path: string; method: string; headers: Record<string, string>; body?: string }>;
}

/** Issuance's lifetime: the shortest, so that slots free within the warm-up and their number levels off. */
const TTL_SECONDS = CREDENTIAL_TTL_SECONDS.min;
const ISSUE_BODY = JSON.stringify({ ttl_seconds: TTL_SECONDS });

async function issueCredential(baseUrl: string, apiKey: string, ttlSeconds: number): Promise<string> {
  const res = await fetch(`${baseUrl}/api/v1/credentials`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
    body: JSON.stringify({ ttl_seconds: ttlSeconds }),
  });
  const body = (await res.json()) as { token?: string };
  if (res.status !== 201 || !body.token) throw new Error(`issuing a credential answered ${res.status}`);
  return body.token;
}

const STREAMS: Stream[] = [
  {
    name: 'issuance',
    share: 0.3,
    // As `pnpm bench` measures issuance capacity (its ISSUANCE_CONNECTIONS).
    closedConnections: 128,
    pacedConnections: 64,
    request: async (_, fx) => ({
      path: '/api/v1/credentials',
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': fx.apiKey },
      body: ISSUE_BODY,
    }),
  },
  {
    name: 'assignment',
    share: 0.1,
    closedConnections: 64,
    pacedConnections: 16,
    // Valid for longer than a window or the capacity measurement.
    request: async (baseUrl, fx) => ({
      path: '/v1/relays/assignment',
      method: 'GET',
      headers: { authorization: `Bearer ${await issueCredential(baseUrl, fx.apiKey, 300)}` },
    }),
  },
  {
    name: 'jwks',
    share: 0.05,
    closedConnections: 64,
    pacedConnections: 16,
    request: async () => ({ path: '/v1/credentials/jwks', method: 'GET', headers: {} }),
  },
];

/** Seconds of closed-loop warm-up and measurement per stream (issuance as `pnpm bench`'s burst). */
const CAPACITY_SECONDS: Record<StreamName, { warm: number; measure: number }> = {
  issuance: { warm: 3, measure: 10 },
  assignment: { warm: 2, measure: 5 },
  jwks: { warm: 2, measure: 5 },
};

/** Closed-loop rate (answers/s) of one stream over every gateway at once. */
async function closedLoop(
  baseUrls: string[],
  stream: Stream,
  fx: Fixtures,
  seconds: number,
): Promise<number> {
  const results = await Promise.all(
    baseUrls.map(async (baseUrl) => {
      const r = await stream.request(baseUrl, fx);
      return autocannon({
        url: baseUrl + r.path,
        method: r.method as 'GET' | 'POST',
        headers: r.headers,
        body: r.body,
        connections: Math.round(stream.closedConnections / baseUrls.length),
        duration: seconds,
      });
    }),
  );
  return Math.round(results.reduce((sum, r) => sum + r.requests.average, 0));
}

export interface Capacity {
  /** Each stream's closed-loop rate alone (answers/s). */
  rates: Rates;
  /** How busy the machine was meanwhile (share of every core's time, whoever used it). */
  machineBusy: Rates;
}

/** Each stream's closed-loop rate alone, after a warm-up. */
export async function measureCapacity(baseUrls: string[], fx: Fixtures): Promise<Capacity> {
  const capacity: Capacity = {
    rates: { issuance: 0, assignment: 0, jwks: 0 },
    machineBusy: { issuance: 0, assignment: 0, jwks: 0 },
  };
  for (const stream of STREAMS) {
    const { warm, measure } = CAPACITY_SECONDS[stream.name];
    await closedLoop(baseUrls, stream, fx, warm);
    const before = machineCpu();
    capacity.rates[stream.name] = await closedLoop(baseUrls, stream, fx, measure);
    const after = machineCpu();
    capacity.machineBusy[stream.name] = +(
      (after.busy - before.busy) /
      Math.max(1, after.total - before.total)
    ).toFixed(3);
  }
  return capacity;
}

/** Each stream's share of its capacity: the rates calibrate.ts scales. */
export function mixRates(capacity: Rates): Rates {
  const rates = { issuance: 0, assignment: 0, jwks: 0 };
  for (const stream of STREAMS)
    rates[stream.name] = Math.max(1, Math.round(stream.share * capacity[stream.name]));
  return rates;
}

/** The shares as printed: `issuance 30 %, assignment 10 %, jwks 5 %`. */
export const STREAM_SHARES = STREAMS.map((s) => `${s.name} ${Math.round(s.share * 100)} %`).join(', ');

/** The three streams, paced over both gateways for `seconds`; each gateway takes half of each. */
export async function pacedWindow(
  baseUrls: string[],
  fx: Fixtures,
  rates: Rates,
  seconds: number,
): Promise<Record<StreamName, StreamWindow>> {
  const windows = await Promise.all(
    STREAMS.map(async (stream) => {
      const results = await Promise.all(
        baseUrls.map(async (baseUrl) => {
          const r = await stream.request(baseUrl, fx);
          return paced({
            url: baseUrl + r.path,
            method: r.method,
            headers: r.headers,
            body: r.body,
            rate: rates[stream.name] / baseUrls.length,
            durationSeconds: seconds,
            connections: Math.round(stream.pacedConnections / baseUrls.length),
          });
        }),
      );
      const window: StreamWindow = {
        rps: results.reduce((sum, r) => sum + r.rps, 0),
        p99: Math.max(...results.map((r) => r.p99)),
        non2xx: results.reduce((sum, r) => sum + r.non2xx, 0),
        errors: results.reduce((sum, r) => sum + r.errors, 0),
      };
      return [stream.name, window] as const;
    }),
  );
  return Object.fromEntries(windows) as Record<StreamName, StreamWindow>;
}

/** Every answer the scripted flows got, by operation and status, and what they did not expect. */
export interface Tally {
  answers: Record<string, Record<string, number>>;
  /** The first FAILURES_KEPT messages; `failureCount` counts them all. */
  failures: string[];
  failureCount: number;
}

const FAILURES_KEPT = 20;

function fail(tally: Tally, message: string): void {
  tally.failureCount++;
  if (tally.failures.length < FAILURES_KEPT) tally.failures.push(message);
}

/** One request of a flow: its answer when it is the expected one, else undefined (and tallied). */
async function call(
  api: Api,
  tally: Tally,
  operation: string,
  method: string,
  path: string,
  expected: number,
  options: { body?: unknown; headers?: Record<string, string> } = {},
): Promise<ApiResponse | undefined> {
  let res: ApiResponse;
  try {
    res = await api.request(method, path, options);
  } catch (err) {
    // No answer, or one the OpenAPI document does not allow.
    fail(tally, `${operation}: ${(err as Error).message}`);
    return undefined;
  }
  const byStatus = tally.answers[operation] ?? {};
  byStatus[res.status] = (byStatus[res.status] ?? 0) + 1;
  tally.answers[operation] = byStatus;
  if (res.status === expected) return res;
  if (res.status === 503 && res.headers.get('retry-after')) return undefined;
  fail(
    tally,
    `${operation} answered ${res.status}${res.status === 503 ? ' without Retry-After' : ''}: ${res.text.slice(0, 200)}`,
  );
  return undefined;
}

/**
 * Runs `round` every `ms` until `signal` aborts, one round at a time: a slow round delays the
 * next and none pile up behind it (the flows are steady background, not a load test).
 */
async function every(ms: number, signal: AbortSignal, round: (i: number) => Promise<void>): Promise<void> {
  let next = performance.now();
  for (let i = 0; !signal.aborted; i++) {
    await round(i);
    next = Math.max(next + ms, performance.now());
    await sleep(Math.max(0, next - performance.now()), undefined, { signal }).catch(() => {});
  }
}

/** The flows' fixed rates (one round per interval). */
const LOGIN_MS = 1_000;
const ADMIN_CRUD_MS = 2_000;
const REVOCATION_MS = 200;
const HEARTBEAT_MS = 5_000;
/** The feed's long-poll wait: also how long a relay takes to notice the end of the soak. */
const FEED_WAIT_SECONDS = 5;

/** Starts every scripted flow; they stop when `signal` aborts, and `done` settles once all have. */
export function startFlows(
  apis: Api[],
  fx: Fixtures,
  signal: AbortSignal,
): { tally: Tally; done: Promise<void> } {
  const tally: Tally = { answers: {}, failures: [], failureCount: 0 };
  const gateway = (i: number) => apis[i % apis.length] as Api;
  const owner = { headers: fx.ownerAuth };

  const login = every(LOGIN_MS, signal, async (i) => {
    const api = gateway(i);
    const res = await call(api, tally, 'login', 'POST', '/admin/v1/auth/login', 200, { body: fx.owner });
    if (!res) return;
    const session = { headers: { authorization: `Bearer ${res.body.token}` } };
    if (!(await call(api, tally, 'session', 'GET', '/admin/v1/auth/session', 200, session))) return;
    await call(api, tally, 'logout', 'POST', '/admin/v1/auth/logout', 204, session);
  });

  const adminCrud = every(ADMIN_CRUD_MS, signal, async (i) => {
    const api = gateway(i);
    const keys = `/admin/v1/projects/${fx.crudProjectId}/api-keys`;
    const key = await call(api, tally, 'create API key', 'POST', keys, 201, {
      ...owner,
      body: { name: `soak ${i}` },
    });
    if (!key) return;
    if (!(await call(api, tally, 'list API keys', 'GET', keys, 200, owner))) return;
    const keyPath = `${keys}/${key.body.api_key.id}`;
    if (!(await call(api, tally, 'revoke API key', 'DELETE', keyPath, 200, owner))) return;
    const allowlist = `/admin/v1/projects/${fx.crudProjectId}/allowlist`;
    // A network of its own per round: one left behind by a failed round never collides.
    const cidr = `10.${(i >> 8) & 255}.${i & 255}.0/24`;
    const entry = await call(api, tally, 'create allowlist entry', 'POST', allowlist, 201, {
      ...owner,
      body: { cidr },
    });
    if (!entry) return;
    if (!(await call(api, tally, 'list allowlist', 'GET', allowlist, 200, owner))) return;
    const entryPath = `${allowlist}/${entry.body.id}`;
    if (!(await call(api, tally, 'delete allowlist entry', 'DELETE', entryPath, 204, owner))) return;
    await call(api, tally, 'list projects', 'GET', '/admin/v1/projects', 200, owner);
  });

  const revocations = every(REVOCATION_MS, signal, async (i) => {
    const issued = await call(gateway(i), tally, 'issue (to revoke)', 'POST', '/api/v1/credentials', 201, {
      headers: { 'x-api-key': fx.apiKey },
      body: { ttl_seconds: TTL_SECONDS },
    });
    if (!issued) return;
    const path = `/admin/v1/credentials/${issued.body.jti}/revoke`;
    await call(gateway(i + 1), tally, 'revoke credential', 'POST', path, 200, owner);
  });

  const relays = fx.relayTokens.flatMap((token, i) => {
    const api = gateway(i);
    const auth = { headers: { authorization: `Bearer ${token}` } };
    let cursor = 0;
    const feed = every(0, signal, async () => {
      const path = `/v1/credentials/revocations?cursor=${cursor}&wait=${FEED_WAIT_SECONDS}`;
      const res = await call(api, tally, 'revocation feed', 'GET', path, 200, auth);
      if (res) cursor = res.body.next_cursor;
      // After a refusal, a pause, as a relay would, rather than a hot loop.
      else await sleep(1_000, undefined, { signal }).catch(() => {});
    });
    const heartbeat = every(HEARTBEAT_MS, signal, async () => {
      await call(api, tally, 'relay heartbeat', 'POST', '/v1/relays/heartbeat', 200, {
        ...auth,
        body: { load: 0.5 },
      });
    });
    return [feed, heartbeat];
  });

  return { tally, done: Promise.all([login, adminCrud, revocations, ...relays]).then(() => {}) };
}

/** The fixtures the mix needs, made through the API as an operator would. */
export async function setUpFixtures(
  apis: Api[],
  owner: { email: string; password: string },
): Promise<Fixtures> {
  const [api] = apis;
  if (!api) throw new Error('no gateway');
  const expect = async (res: Promise<ApiResponse>, status: number, what: string): Promise<ApiResponse> => {
    const r = await res;
    if (r.status !== status) throw new Error(`${what} answered ${r.status}: ${r.text.slice(0, 200)}`);
    return r;
  };
  const login = await expect(api.request('POST', '/admin/v1/auth/login', { body: owner }), 200, 'login');
  const ownerAuth = { authorization: `Bearer ${login.body.token}` };
  const project = async (name: string) =>
    (
      await expect(
        api.request('POST', '/admin/v1/projects', { headers: ownerAuth, body: { name } }),
        201,
        'project',
      )
    ).body.id as string;
  const loadProject = await project('soak-load');
  const key = await expect(
    api.request('POST', `/admin/v1/projects/${loadProject}/api-keys`, {
      headers: ownerAuth,
      body: { name: 'load' },
    }),
    201,
    'API key',
  );
  const relayTokens: string[] = [];
  for (let i = 0; i < apis.length; i++) {
    const relay = await expect(
      api.request('POST', '/admin/v1/relays', {
        headers: ownerAuth,
        body: { region: 'soak', host: `relay-${i}.soak.example`, port: 4433 },
      }),
      201,
      'relay registration',
    );
    relayTokens.push(relay.body.token);
  }
  return { owner, ownerAuth, apiKey: key.body.key, crudProjectId: await project('soak-admin'), relayTokens };
}
