/**
 * `node tests/bench/rate-limit.ts`: the gateway's per-key issuance limit (the hot path:
 * `routes/credentials.ts` admits every credential request of an API key through it) with this
 * repository's limiters and with `rate-limiter-flexible` (RateLimiterRedis with a
 * RateLimiterMemory insurance limiter, the setup that library recommends), against the Redis at
 * BENCH_REDIS_URL (default redis://127.0.0.1:6379; only keys under `bench:rate-limit:<random>:`
 * are written, and deleted after).
 *
 * Each variant admits one API key's requests from BENCH_RL_CONCURRENCY (default 64) requests in
 * flight, as a gateway under load does, in two cases: under the limit (a limit no load reaches:
 * every request admitted, the issuance bench's case) and over it (a limit of 100 per second: most
 * requests refused). The baseline is a Redis round trip (PING) from the same concurrency on the
 * same connection: each figure is a ratio to the baseline's rate taken in the same round, and
 * the median over BENCH_RL_ROUNDS rounds (default 3) is reported, with the Redis commands each
 * admission cost (INFO's total_commands_processed: counts, whatever the machine's speed).
 * Variants take turns within a round so that this shared machine's drift falls on all of them.
 */
import { randomBytes } from 'node:crypto';
import { createLogger } from '@relayplane/shared/logger';
import { createLeasedRateLimiter, createRateLimiter } from '@relayplane/shared/rate-limit';
import { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';

const URL_ = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
const CONCURRENCY = Number(process.env.BENCH_RL_CONCURRENCY ?? 64);
const ROUNDS = Number(process.env.BENCH_RL_ROUNDS ?? 3);
const SLICE_MS = Number(process.env.BENCH_RL_SLICE_MS ?? 1_500);
const OVER_LIMIT = 100;
const UNREACHED_LIMIT = 1_000_000_000;

/** Admits one request of `key` under `limit`: true when admitted. */
type Admit = (key: string, limit: number) => Promise<boolean> | boolean;

interface Variant {
  name: string;
  make(redis: Redis, prefix: string, limit: number): { admit: Admit; close(): Promise<void> };
}

const logger = createLogger({ level: 'silent', service: 'bench' });
const systemClock = { now: () => new Date() };

const variants: Variant[] = [
  {
    name: 'redis PING (baseline)',
    make: (redis) => ({ admit: async () => (await redis.ping()) === 'PONG', close: async () => {} }),
  },
  {
    name: 'leased (rate-limit.ts, in use)',
    make: (redis, prefix) => {
      const limiter = createLeasedRateLimiter(
        { connection: redis, prefix },
        { windowMs: 1_000 },
        logger,
        'bench',
      );
      return {
        admit: (key, limit) => {
          const r = limiter.admit(key, limit);
          return r instanceof Promise ? r.then((x) => x === undefined) : r === undefined;
        },
        close: () => limiter.close(),
      };
    },
  },
  {
    name: 'fixed window (rate-limit.ts, a script per request)',
    make: (redis, prefix, limit) => {
      const limiter = createRateLimiter({ connection: redis, prefix }, 1_000, systemClock, logger, 'bench');
      return { admit: async (key) => (await limiter.hit(key)).count <= limit, close: async () => {} };
    },
  },
  {
    name: 'rate-limiter-flexible (Redis + memory insurance)',
    make: (redis, prefix, limit) => {
      const limiter = new RateLimiterRedis({
        storeClient: redis,
        keyPrefix: prefix,
        points: limit,
        duration: 1,
        insuranceLimiter: new RateLimiterMemory({ points: limit, duration: 1 }),
      });
      return { admit: (key) => consumed(limiter.consume(key)), close: async () => {} };
    },
  },
  {
    name: 'rate-limiter-flexible + inMemoryBlockOnConsumed',
    make: (redis, prefix, limit) => {
      const limiter = new RateLimiterRedis({
        storeClient: redis,
        keyPrefix: prefix,
        points: limit,
        duration: 1,
        inMemoryBlockOnConsumed: limit,
        insuranceLimiter: new RateLimiterMemory({ points: limit, duration: 1 }),
      });
      return { admit: (key) => consumed(limiter.consume(key)), close: async () => {} };
    },
  },
];

async function consumed(p: Promise<RateLimiterRes>): Promise<boolean> {
  try {
    await p;
    return true;
  } catch (err) {
    if (err instanceof RateLimiterRes) return false;
    throw err;
  }
}

async function commandsProcessed(redis: Redis): Promise<number> {
  const stats = await redis.info('stats');
  return Number(/^total_commands_processed:(\d+)/m.exec(stats)?.[1] ?? 0);
}

interface Slice {
  rate: number;
  admittedShare: number;
  commandsPerAdmission: number;
}

/** `CONCURRENCY` loops admitting requests of one key for `SLICE_MS`. */
async function slice(redis: Redis, stats: Redis, variant: Variant, limit: number): Promise<Slice> {
  const prefix = `bench:rate-limit:${randomBytes(6).toString('hex')}:`;
  const limiter = variant.make(redis, prefix, limit);
  const key = 'key_bench';
  // Warm-up: scripts loaded, the lease grown.
  for (let i = 0; i < 200; i++) await limiter.admit(key, limit);
  const before = await commandsProcessed(stats);
  let done = 0;
  let admitted = 0;
  const start = performance.now();
  const end = start + SLICE_MS;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < end) {
        const ok = await limiter.admit(key, limit);
        done++;
        if (ok) admitted++;
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  await limiter.close();
  // The INFO call itself is one command.
  const commands = (await commandsProcessed(stats)) - before - 1;
  for (const k of await stats.keys(`${prefix}*`)) await stats.del(k);
  return { rate: done / seconds, admittedShare: admitted / done, commandsPerAdmission: commands / done };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
};

async function main(): Promise<void> {
  const redis = new Redis(URL_);
  const stats = new Redis(URL_);
  const cases = [
    { name: 'under the limit', limit: UNREACHED_LIMIT },
    { name: `over the limit (${OVER_LIMIT}/s)`, limit: OVER_LIMIT },
  ];
  console.log(
    `rate limiters, one API key, ${CONCURRENCY} requests in flight, ${ROUNDS} rounds of ${SLICE_MS} ms slices, ${URL_}`,
  );
  for (const c of cases) {
    const ratios = new Map<string, number[]>();
    const last = new Map<string, Slice>();
    for (let round = 0; round < ROUNDS; round++) {
      // The baseline first and last in each round, the variants in a rotated order between.
      const order = variants.slice(1);
      for (let i = 0; i < round; i++) order.push(order.shift() as Variant);
      const [baseline] = variants;
      if (!baseline) throw new Error('no baseline');
      const pings = [await slice(redis, stats, baseline, c.limit)];
      const results = new Map<string, Slice>();
      for (const v of order) results.set(v.name, await slice(redis, stats, v, c.limit));
      pings.push(await slice(redis, stats, baseline, c.limit));
      const pingRate = ((pings[0]?.rate ?? 0) + (pings[1]?.rate ?? 0)) / 2;
      ratios.set(baseline.name, [...(ratios.get(baseline.name) ?? []), 1]);
      last.set(baseline.name, pings[1] as Slice);
      for (const [name, r] of results) {
        ratios.set(name, [...(ratios.get(name) ?? []), r.rate / pingRate]);
        last.set(name, r);
      }
    }
    console.log(`\n${c.name}`);
    console.log(
      '  ratio to PING (median) | admissions/s (last round) | admitted | Redis commands per admission | variant',
    );
    for (const v of variants) {
      const r = last.get(v.name);
      if (!r) continue;
      console.log(
        `  ${median(ratios.get(v.name) ?? [])
          .toFixed(2)
          .padStart(
            8,
          )} × | ${Math.round(r.rate).toString().padStart(10)} | ${(100 * r.admittedShare).toFixed(1).padStart(5)} % | ${r.commandsPerAdmission.toFixed(3).padStart(7)} | ${v.name}`,
      );
    }
  }
  redis.disconnect();
  stats.disconnect();
}

await main();
