/**
 * Per-test-file storage: a fresh PostgreSQL database (dropped afterwards) and a unique
 * Redis key prefix, so test files can run in any order without seeing each other. Under the
 * secrets audit (./audit.ts), drop() and clean() first dump what they delete.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import pg from 'pg';
import { inject } from 'vitest';
import { auditDir, auditSink } from './audit.ts';
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
  // The audit's proof that this database existed: a marker without a dump fails the audit.
  const marker = auditSink('db', name, 'created');
  marker?.write(`${label}\n`);
  marker?.close();
  return {
    url: url.toString(),
    async drop() {
      await dumpForAudit(url.toString(), name);
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
        await dumpRedisForAudit(r, prefix, label);
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

/**
 * Under the secrets audit, every row of every table of the database (all schemas but the
 * system ones) as one JSON line each, `{"table": "<schema>.<table>", "row": {...}}`.
 */
async function dumpForAudit(url: string, name: string): Promise<void> {
  if (!auditDir()) return;
  const c = new pg.Client({ connectionString: url });
  try {
    await c.connect();
  } catch (err) {
    // Dropped already (drop() called twice): the first call dumped it.
    if ((err as { code?: string }).code === '3D000') return;
    throw err;
  }
  const sink = auditSink('db', name, 'jsonl');
  try {
    const tables = await c.query<{ schema: string; table: string }>(
      `select table_schema as schema, table_name as table from information_schema.tables
        where table_type = 'BASE TABLE' and table_schema not in ('pg_catalog', 'information_schema')
        order by 1, 2`,
    );
    for (const { schema, table } of tables.rows) {
      const ident = `"${schema.replaceAll('"', '""')}"."${table.replaceAll('"', '""')}"`;
      const rows = await c.query<{ row: string }>(`select row_to_json(t)::text as row from ${ident} t`);
      for (const { row } of rows.rows)
        sink?.write(`{"table":${JSON.stringify(`${schema}.${table}`)},"row":${row}}\n`);
    }
  } finally {
    sink?.close();
    await c.end();
  }
}

/** Under the secrets audit, every key under `prefix` with its value, one JSON line each. */
async function dumpRedisForAudit(r: Redis, prefix: string, label: string): Promise<void> {
  const sink = auditSink('redis', label, 'jsonl');
  if (!sink) return;
  try {
    let cursor = '0';
    do {
      const [next, keys] = await r.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = next;
      for (const key of keys) {
        const type = await r.type(key);
        let value: unknown;
        if (type === 'string') value = await r.get(key);
        else if (type === 'hash') value = await r.hgetall(key);
        else if (type === 'list') value = await r.lrange(key, 0, -1);
        else if (type === 'set') value = await r.smembers(key);
        else if (type === 'zset') value = await r.zrange(key, '0', '-1', 'WITHSCORES');
        else if (type === 'stream') value = await r.xrange(key, '-', '+');
        else continue;
        sink.write(`${JSON.stringify({ key, type, value })}\n`);
      }
    } while (cursor !== '0');
  } finally {
    sink.close();
  }
}
