import { randomBytes } from 'node:crypto';
import { MemoryBus, RedisBus } from '@relayplane/shared/bus';
import { createRedis } from '@relayplane/shared/redis';
import type { Redis } from 'ioredis';
import { afterAll } from 'vitest';
import { testLogger } from '../../src/logger.ts';
import { createTestRedis } from '../../src/storage.ts';
import { busConformance } from './conformance/bus.ts';

busConformance('MemoryBus', {
  sharesNamespace: false,
  create: async () => new MemoryBus(),
});

const testRedis = createTestRedis('bus');
const logger = testLogger('bus');
const publishers: Redis[] = [];
// One run id per file so reruns never see channels of an earlier run.
const run = randomBytes(3).toString('hex');

busConformance('RedisBus (real Redis)', {
  sharesNamespace: true,
  async create(namespace) {
    const config = { url: testRedis.url, prefix: testRedis.prefix };
    const pub = createRedis(config, logger, 'bus-pub');
    const sub = createRedis(config, logger, 'bus-sub');
    publishers.push(pub);
    return new RedisBus(pub, sub, `${testRedis.prefix}${run}:${namespace}:`);
  },
  async cleanup() {
    await Promise.all(publishers.splice(0).map((p) => p.quit()));
  },
});

afterAll(() => testRedis.clean());
