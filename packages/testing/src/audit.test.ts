import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUDIT_DIR_ENV, auditChildOutput, auditSecretsIn } from './audit.ts';
import { testLogger } from './logger.ts';
import { createTestDatabase, createTestRedis } from './storage.ts';

/** Under RELAYPLANE_TEST_AUDIT_DIR, what the test helpers leave for scripts/secrets-audit.ts. */
describe('the secrets audit capture', () => {
  const dir = mkdtempSync(join(tmpdir(), 'audit-capture-'));
  const previous = process.env[AUDIT_DIR_ENV];
  const read = (kind: string, suffix: string) =>
    readdirSync(join(dir, kind))
      .filter((f) => f.endsWith(suffix))
      .map((f) => readFileSync(join(dir, kind, f), 'utf8'))
      .join('');

  beforeAll(() => {
    process.env[AUDIT_DIR_ENV] = dir;
  });
  afterAll(() => {
    if (previous === undefined) delete process.env[AUDIT_DIR_ENV];
    else process.env[AUDIT_DIR_ENV] = previous;
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps every level a test logger writes, trace included, while printing none of it', () => {
    const logger = testLogger('capture-test');
    logger.trace({ step: 1 }, 'trace line');
    logger.child({ part: 'x' }).info('info line');
    const text = read('logs', '.log');
    expect(text).toContain('"msg":"trace line"');
    expect(text).toContain('"part":"x"');
  });

  it('dumps every row of every schema of a test database before dropping it', async () => {
    const db = await createTestDatabase('capture');
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    await c.query('create schema app; create table app.things (id int, note text)');
    await c.query("insert into app.things values (1, 'first'), (2, 'second')");
    await c.end();
    await db.drop();
    await db.drop(); // a second drop() finds nothing to dump and still succeeds
    const rows = read('db', '.jsonl')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(rows).toEqual([
      { table: 'app.things', row: { id: 1, note: 'first' } },
      { table: 'app.things', row: { id: 2, note: 'second' } },
    ]);
    expect(readdirSync(join(dir, 'db')).filter((f) => f.endsWith('.created'))).toHaveLength(1);
  });

  it('dumps the keys and values of a test Redis prefix before cleaning it', async () => {
    const redis = createTestRedis('capture');
    const r = new Redis(redis.url);
    await r.set(`${redis.prefix}s`, 'string value');
    await r.hset(`${redis.prefix}h`, 'field', 'hash value');
    r.disconnect();
    await redis.clean();
    const text = read('redis', '.jsonl');
    expect(text).toContain('"string value"');
    expect(text).toContain('"hash value"');
  });

  it('records the credential-named strings (10 characters or more) of an API body as known secrets', () => {
    auditSecretsIn({
      device_code: 'device-code-value-1',
      user_code: 'BCDF-GHJK',
      interval: 5,
      nested: { password: 'a password value', name: 'not a secret at all' },
      token: 'too short',
    });
    const seen = read('known-secrets', '.jsonl')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(seen).toEqual([
      { field: 'device_code', value: 'device-code-value-1' },
      { field: 'password', value: 'a password value' },
    ]);
  });

  it("copies a child process's stdout and stderr", async () => {
    const child = spawn(process.execPath, ['-e', 'console.log("to stdout"); console.error("to stderr")'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    auditChildOutput(child, 'echo');
    await new Promise((resolve) => child.once('close', resolve));
    const text = read('processes', '.log');
    expect(text).toContain('to stdout');
    expect(text).toContain('to stderr');
  });
});
