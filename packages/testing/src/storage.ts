/**
 * Per-test-file storage: a fresh PostgreSQL database (dropped afterwards) and a unique
 * Redis key prefix, so test files can run in any order without seeing each other.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import pg from 'pg';
import { inject } from 'vitest';
import './provided.ts';

function unique(label: string): string {
  return `${label
    .replace(/[^a-z0-9]/gi, '')
    .toLowerCase()
    .slice(0, 20)}_${randomBytes(4).toString('hex')}`;
}

export interface TestDatabase {
  /** Connection URL of the fresh database. */
  url: string;
  drop(): Promise<void>;
}

export async function createTestDatabase(label = 'test'): Promise<TestDatabase> {
  const baseUrl = inject('databaseUrl');
  const name = `rp_${unique(label)}`;
  const admin = new pg.Client({ connectionString: baseUrl });
  await admin.connect();
  await admin.query(`create database "${name}"`);
  await admin.end();
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: baseUrl });
      await c.connect();
      await c.query(`drop database if exists "${name}" with (force)`);
      await c.end();
    },
  };
}

export interface TestRedis {
  url: string;
  prefix: string;
  /** Deletes every key under the prefix. */
  clean(): Promise<void>;
}

export function createTestRedis(label = 'test'): TestRedis {
  const url = inject('redisUrl');
  const prefix = `t:${unique(label)}:`;
  return {
    url,
    prefix,
    async clean() {
      const r = new Redis(url);
      try {
        let cursor = '0';
        do {
          const [next, keys] = await r.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
          cursor = next;
          if (keys.length) await r.del(...keys);
        } while (cursor !== '0');
      } finally {
        r.disconnect();
      }
    },
  };
}
