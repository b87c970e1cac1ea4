import { newId } from '@relayplane/contract/ids';
import { ManualClock } from '@relayplane/shared/clock';
import { createTestDatabase, type TestDatabase } from '@relayplane/testing/storage';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type CredentialRow, CredentialWriter } from '../src/issuance/credential-writer.ts';
import { newJti } from '../src/keys/jwt.ts';
import { newKek, type RunningIssuer, startIssuer } from './support/harness.ts';

describe('CredentialWriter (micro-batched jti recording, PostgreSQL)', () => {
  let database: TestDatabase;
  let issuer: RunningIssuer;

  beforeAll(async () => {
    database = await createTestDatabase('issuer_writer');
    issuer = await startIssuer({ databaseUrl: database.url, clock: new ManualClock(), kek: newKek() });
  });

  afterAll(async () => {
    await issuer?.stop();
    await database?.drop();
  });

  const row = (tenantId: string): CredentialRow => ({
    jti: newJti(),
    tenantId,
    projectId: newId('project'),
    apiKeyId: newId('apiKey'),
    kid: 'k'.repeat(43),
    mode: 'test',
    scopes: 'relay:session relay:subscribe',
    issuedAt: new Date('2026-11-22T12:00:00Z'),
    expiresAt: new Date('2026-11-22T12:10:00Z'),
  });

  const stored = async (jtis: string[]) =>
    (
      await sql<{ jti: string }>`select jti from issuer.credentials where jti = any(${jtis}::text[])`.execute(
        issuer.service.database.db,
      )
    ).rows.length;

  it('writes rows arriving together in statements of at most 256, each caller settled after its commit', async () => {
    // On PostgreSQL the statement is a named prepared one (PGlite: kysely).
    const database = issuer.service.database as unknown as {
      prepared: (name: string, text: string, values: unknown[]) => Promise<void>;
    };
    const prepared = vi.spyOn(database, 'prepared');
    const writer = new CredentialWriter(issuer.service.database);
    const sizes: number[] = [];
    const insert = writer.insert.bind(writer);
    vi.spyOn(writer, 'insert').mockImplementation(async (rows) => {
      sizes.push(rows.length);
      return insert(rows);
    });
    const tenantId = newId('tenant');
    const rows = Array.from({ length: 600 }, () => row(tenantId));
    const committed: boolean[] = [];
    await Promise.all(
      rows.map((r) =>
        writer.write(r).then(async () => {
          committed.push((await stored([r.jti])) === 1);
        }),
      ),
    );
    expect(sizes).toEqual([256, 256, 88]);
    expect(prepared.mock.calls.map(([name, , values]) => [name, (values[0] as string[]).length])).toEqual([
      ['relayplane_insert_credentials', 256],
      ['relayplane_insert_credentials', 256],
      ['relayplane_insert_credentials', 88],
    ]);
    prepared.mockRestore();
    expect(committed).toHaveLength(600);
    expect(committed.every(Boolean)).toBe(true);
    const [first] = rows;
    const back = await issuer.service.database.db
      .selectFrom('credentials')
      .selectAll()
      .where('jti', '=', first?.jti ?? '')
      .executeTakeFirstOrThrow();
    expect(back).toMatchObject({
      tenant_id: tenantId,
      mode: 'test',
      scopes: 'relay:session relay:subscribe',
      issued_at: first?.issuedAt,
      expires_at: first?.expiresAt,
      revoked_at: null,
    });
  });

  it('starts the next batch as soon as the previous one ends, and a failed batch fails only its callers', async () => {
    const writer = new CredentialWriter(issuer.service.database);
    const insert = writer.insert.bind(writer);
    const sizes: number[] = [];
    const tenantId = newId('tenant');
    const late = Array.from({ length: 10 }, () => row(tenantId));
    let latePromises: Promise<void>[] = [];
    vi.spyOn(writer, 'insert').mockImplementation(async (rows) => {
      sizes.push(rows.length);
      if (sizes.length === 1) {
        // Rows written while the first statement runs wait for it, then go out together.
        latePromises = late.map((r) => writer.write(r));
        throw new Error('deadlock detected');
      }
      return insert(rows);
    });
    const early = row(tenantId);
    await expect(writer.write(early)).rejects.toThrow('deadlock detected');
    await Promise.all(latePromises);
    expect(sizes).toEqual([1, 10]);
    expect(await stored([early.jti])).toBe(0);
    expect(await stored(late.map((r) => r.jti))).toBe(10);
  });

  it('runs up to two statements at once; rows arriving while both run go out together after one ends', async () => {
    const writer = new CredentialWriter(issuer.service.database);
    const insert = writer.insert.bind(writer);
    const started: number[] = [];
    const gates: (() => void)[] = [];
    vi.spyOn(writer, 'insert').mockImplementation(async (rows) => {
      started.push(rows.length);
      await new Promise<void>((resolve) => gates.push(resolve));
      return insert(rows);
    });
    const tenantId = newId('tenant');
    const tick = () => new Promise((resolve) => setImmediate(resolve));
    const first = writer.write(row(tenantId));
    await tick();
    // The first statement is still running: the next row does not wait for it.
    const second = writer.write(row(tenantId));
    await tick();
    expect(started).toEqual([1, 1]);
    // Both busy: these wait, and then go out together.
    const rest = Array.from({ length: 5 }, () => writer.write(row(tenantId)));
    await tick();
    expect(started).toEqual([1, 1]);
    gates[0]?.();
    await first;
    await tick();
    expect(started).toEqual([1, 1, 5]);
    gates[1]?.();
    gates[2]?.();
    await Promise.all([second, ...rest]);
    await writer.flushed();
    expect(writer.statements).toBe(3);
  });
});
