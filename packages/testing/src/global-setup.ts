/**
 * vitest globalSetup: finds the PostgreSQL and Redis the tests run against.
 *
 * TEST_DATABASE_URL / TEST_REDIS_URL win (CI sets them to the machine's services). Without
 * them, a Docker engine is tried through testcontainers. Without either, the run fails
 * loudly: storage tests are never skipped.
 */
import type { TestProject } from 'vitest/node';

import './provided.ts';

let stop: (() => Promise<void>) | undefined;

export async function setup(project: TestProject): Promise<void> {
  let databaseUrl = process.env.TEST_DATABASE_URL;
  let redisUrl = process.env.TEST_REDIS_URL;
  if (!databaseUrl || !redisUrl) {
    if (process.env.CI) {
      throw new Error('CI requires TEST_DATABASE_URL and TEST_REDIS_URL');
    }
    const started = await startContainers().catch((err: unknown) => {
      throw new Error(
        `TEST_DATABASE_URL/TEST_REDIS_URL are not set and no container runtime answered (${String(err)}). ` +
          'Point them at a PostgreSQL and a Redis, e.g. TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test TEST_REDIS_URL=redis://127.0.0.1:6379',
      );
    });
    databaseUrl ??= started.databaseUrl;
    redisUrl ??= started.redisUrl;
    stop = started.stop;
  }
  await assertReachable(databaseUrl, redisUrl);
  project.provide('databaseUrl', databaseUrl);
  project.provide('redisUrl', redisUrl);
}

export async function teardown(): Promise<void> {
  await stop?.();
}

async function startContainers() {
  const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
  const { RedisContainer } = await import('@testcontainers/redis');
  const [pg, redis] = await Promise.all([
    new PostgreSqlContainer('postgres:15-alpine').start(),
    new RedisContainer('redis:7-alpine').start(),
  ]);
  return {
    databaseUrl: pg.getConnectionUri(),
    redisUrl: redis.getConnectionUrl(),
    stop: async () => {
      await Promise.all([pg.stop(), redis.stop()]);
    },
  };
}

async function assertReachable(databaseUrl: string, redisUrl: string): Promise<void> {
  const pg = await import('pg');
  const client = new pg.default.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 3_000 });
  try {
    await client.connect();
    await client.query('select 1');
  } catch (err) {
    throw new Error(`PostgreSQL at TEST_DATABASE_URL is unreachable: ${String(err)}`);
  } finally {
    await client.end().catch(() => {});
  }
  const { Redis } = await import('ioredis');
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 3_000 });
  try {
    await redis.connect();
    await redis.ping();
  } catch (err) {
    throw new Error(`Redis at TEST_REDIS_URL is unreachable: ${String(err)}`);
  } finally {
    redis.disconnect();
  }
}
