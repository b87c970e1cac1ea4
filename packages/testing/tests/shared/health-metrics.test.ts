import { createServer, type Server, type Socket } from 'node:net';
import { createDatabase, type Database } from '@relayplane/shared/db';
import { healthImpl, ServingStatus } from '@relayplane/shared/health';
import { createRegistry } from '@relayplane/shared/metrics';
import { serviceHealthMetrics } from '@relayplane/shared/metrics-health';
import { createRedis } from '@relayplane/shared/redis';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { testLogger } from '../../src/logger.ts';
import { sampleValue } from '../../src/metrics.ts';
import { createTestDatabase, type TestDatabase } from '../../src/storage.ts';

/**
 * `relayplane_dependency_up` is what the chart's "PostgreSQL unreachable" and "Redis unreachable"
 * alerts read (docs/operations.md): 1 for a dependency that answers, 0 for one that refuses the
 * connection or never answers, within the scrape.
 */
describe('serviceHealthMetrics: relayplane_dependency_up against real and unreachable dependencies', () => {
  const logger = testLogger('health-metrics');
  let testDb: TestDatabase;
  const databases: Database<unknown>[] = [];
  const redises: Redis[] = [];
  /** Accepts connections and never answers: a dependency that hangs. */
  let silent: Server;
  const held: Socket[] = [];
  let silentPort: number;
  /** A port nothing listens on: a dependency that refuses the connection. */
  let closedPort: number;

  beforeAll(async () => {
    testDb = await createTestDatabase('health_metrics');
    silent = createServer((socket) => {
      held.push(socket);
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    silentPort = (silent.address() as { port: number }).port;
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    closedPort = (probe.address() as { port: number }).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
  });

  afterAll(async () => {
    for (const r of redises) r.disconnect();
    for (const d of databases) await d.destroy().catch(() => {});
    for (const s of held) s.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
    await testDb.drop();
  });

  const database = async (url: string) => {
    const d = await createDatabase<unknown>(
      { kind: 'postgres', url, connectTimeoutMs: 2_000 },
      'health',
      logger,
    );
    databases.push(d);
    return d;
  };
  const redis = (url: string) => {
    const r = createRedis({ url, prefix: 'health-metrics:' }, logger, 'health-metrics');
    redises.push(r);
    return r;
  };

  const scrape = async (deps: { database: Database<unknown>; redis?: Redis }) => {
    const registry = createRegistry();
    const health = healthImpl();
    health.set('demo', ServingStatus.SERVING);
    serviceHealthMetrics(registry, { health, services: ['demo'], ...deps });
    const started = performance.now();
    const text = await registry.metrics();
    return { text, ms: performance.now() - started };
  };

  it('is 1 for a PostgreSQL and a Redis that answer', async () => {
    const r = redis(inject('redisUrl'));
    await r.ping();
    const { text } = await scrape({ database: await database(testDb.url), redis: r });
    expect(sampleValue(text, 'relayplane_dependency_up', { dependency: 'postgresql' })).toBe(1);
    expect(sampleValue(text, 'relayplane_dependency_up', { dependency: 'redis' })).toBe(1);
    expect(sampleValue(text, 'relayplane_ready', { service: 'demo' })).toBe(1);
  });

  it('is 0 for a PostgreSQL and a Redis that refuse the connection', async () => {
    const { text } = await scrape({
      database: await database(`postgres://postgres@127.0.0.1:${closedPort}/test`),
      redis: redis(`redis://127.0.0.1:${closedPort}`),
    });
    expect(sampleValue(text, 'relayplane_dependency_up', { dependency: 'postgresql' })).toBe(0);
    expect(sampleValue(text, 'relayplane_dependency_up', { dependency: 'redis' })).toBe(0);
  });

  it('is 0, within the 1 s ping bound, for a PostgreSQL and a Redis that accept and never answer', async () => {
    const { text, ms } = await scrape({
      database: await database(`postgres://postgres@127.0.0.1:${silentPort}/test`),
      redis: redis(`redis://127.0.0.1:${silentPort}`),
    });
    expect(sampleValue(text, 'relayplane_dependency_up', { dependency: 'postgresql' })).toBe(0);
    expect(sampleValue(text, 'relayplane_dependency_up', { dependency: 'redis' })).toBe(0);
    // Both pings run at once, each bounded by 1 s: the scrape is not held for longer.
    expect(ms).toBeLessThan(2_500);
  });

  it('has no redis series without Redis (embedded mode)', async () => {
    const { text } = await scrape({ database: await database(testDb.url) });
    expect(sampleValue(text, 'relayplane_dependency_up', { dependency: 'postgresql' })).toBe(1);
    expect(text).not.toContain('dependency="redis"');
  });
});
