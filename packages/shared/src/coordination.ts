/**
 * What the replicas of a service share through Redis off the request path: the bus (cache
 * invalidation between replicas) and, for a service with background jobs, the bullmq scheduler.
 * Both use one main connection; the bus's subscriber has its own (a subscribed connection runs
 * no other commands). A bus or scheduler the caller gives (embedded mode, tests) is used as it
 * is and opens nothing. Request-path connections (slots, throttles) are not made here: they
 * have their own policy (`createRequestPathRedis`).
 *
 * On a Redis Cluster the same holds: the bus publishes through any node (a cluster forwards a
 * PUBLISH to every node) and subscribes on one node, which ioredis replaces when it goes away;
 * the queue's prefix gets a hash tag, so that each queue lives in one slot.
 */
import type { Redis } from 'ioredis';
import { type Bus, RedisBus } from './bus.ts';
import type { Logger } from './logger.ts';
import { createRedis, queuePrefix, type RedisConfig } from './redis.ts';
import { BullmqScheduler, type Scheduler } from './scheduler.ts';

export interface CoordinationOptions {
  /** Names the connections (`relayplane-<name>`, `relayplane-<name>-bus`). */
  name: string;
  /** Prepended to every bus channel. */
  busPrefix: string;
  /** The bullmq queue to schedule on; none: the service has no background jobs. */
  queue?: { name: string; prefix: string };
  /** Given instead of made (and then not owned). */
  bus?: Bus;
  scheduler?: Scheduler;
}

export interface Coordination {
  bus: Bus;
  /** Undefined when no queue was asked for and none was given. */
  scheduler: Scheduler | undefined;
  /** What this call opened, for the service's destroy() to disconnect. */
  connections: Redis[];
}

export function connectCoordination(
  redis: RedisConfig,
  logger: Logger,
  o: CoordinationOptions,
): Coordination {
  const needsScheduler = o.queue !== undefined && o.scheduler === undefined;
  if (o.bus && !needsScheduler) return { bus: o.bus, scheduler: o.scheduler, connections: [] };
  const main = createRedis(redis, logger, o.name);
  const connections = [main];
  let bus = o.bus;
  if (!bus) {
    const subscriber = createRedis(redis, logger, `${o.name}-bus`);
    connections.push(subscriber);
    bus = new RedisBus(main, subscriber, o.busPrefix);
  }
  const scheduler =
    o.scheduler ??
    (o.queue
      ? new BullmqScheduler(o.queue.name, main, queuePrefix(redis, o.queue.prefix), logger)
      : undefined);
  return { bus, scheduler, connections };
}
