/**
 * KEK rotation (issue 19, item 4): `RELAYPLANE_KEK_PREVIOUS` keeps keys sealed by an earlier
 * key-encryption key usable, key maintenance re-encrypts them under `RELAYPLANE_KEK` exactly
 * once across replicas, and a KEK that opens none of the stored keys is refused before any
 * key is written. Against the real PostgreSQL, then PGlite (the embedded mode's store).
 */
import { spawnSync } from 'node:child_process';
import { createDecipheriv, createHash, createPublicKey, type KeyObject } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newId } from '@relayplane/contract/ids';
import { ManualClock } from '@relayplane/shared/clock';
import { ConfigError } from '@relayplane/shared/config';
import { testLogger } from '@relayplane/testing/logger';
import { hasMetric, sampleValue } from '@relayplane/testing/metrics';
import { createTestDatabase, type TestDatabase } from '@relayplane/testing/storage';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readIssuerConfig } from '../src/config.ts';
import { JWKS_MAX_AGE_SECONDS } from '../src/keys/key-lifecycle.ts';
import { SigningKeyStore } from '../src/keys/signing-key-store.ts';
import { DEMO_RELAYS } from '../src/relays/relay-config.ts';
import { IssuerApp } from '../src/service.ts';
import {
  issueRequest,
  newKek,
  type RawKeyRow,
  type RunningIssuer,
  rawKeyRows,
  seconds,
  startIssuer,
} from './support/harness.ts';

const GAUGE = 'relayplane_issuer_signing_keys_sealed_by_previous_kek';
const RESEALED = 'relayplane_issuer_signing_keys_resealed_total';

/** deploy/README.md's fingerprint: the first 16 hex digits of the SHA-256 of the KEK's bytes. */
const fingerprint = (kek: Buffer) => createHash('sha256').update(kek).digest('hex').slice(0, 16);
const b64 = (kek: Buffer) => kek.toString('base64');

/** Opens a row's private half with plain AES-256-GCM (no service code involved): its PKCS#8 DER. */
function rawOpen(row: RawKeyRow, kek: Buffer): Buffer {
  if (!row.private_iv || !row.private_ciphertext || !row.private_tag)
    throw new Error(`${row.kid}: no private half`);
  const decipher = createDecipheriv('aes-256-gcm', kek, row.private_iv);
  decipher.setAAD(Buffer.from(row.kid));
  decipher.setAuthTag(row.private_tag);
  return Buffer.concat([decipher.update(row.private_ciphertext), decipher.final()]);
}

/** A gauge or counter of `service`'s registry; fails when the metric is not registered. */
async function metric(service: IssuerApp, name: string, type: 'gauge' | 'counter'): Promise<number> {
  const text = await service.metrics.metrics();
  expect(hasMetric(text, name, type), `${name} is registered`).toBe(true);
  return sampleValue(text, name);
}

/** Puts rows back as they were (sealed bytes and fingerprint), with a raw query. */
async function restoreRows(service: IssuerApp, rows: RawKeyRow[]): Promise<void> {
  for (const row of rows) {
    await sql`update issuer.signing_keys set kek_fingerprint = ${row.kek_fingerprint}, private_iv = ${row.private_iv},
      private_ciphertext = ${row.private_ciphertext}, private_tag = ${row.private_tag} where kid = ${row.kid}`.execute(
      service.database.db,
    );
  }
}

describe('readIssuerConfig: RELAYPLANE_KEK_PREVIOUS', () => {
  const current = newKek();
  const base = {
    DATABASE_URL: 'postgres://db.internal/relayplane',
    REDIS_URL: 'redis://r:6379',
    RELAYPLANE_KEK: b64(current),
  };

  it('is empty when unset or blank, and reads comma-separated keys (spaces around them ignored)', () => {
    expect(readIssuerConfig(base).previousKeks).toEqual([]);
    expect(readIssuerConfig({ ...base, RELAYPLANE_KEK_PREVIOUS: '  ' }).previousKeks).toEqual([]);
    const [a, b] = [newKek(), newKek()];
    const read = readIssuerConfig({ ...base, RELAYPLANE_KEK_PREVIOUS: ` ${b64(a)} ,${b64(b)}` }).previousKeks;
    expect(read.map(b64)).toEqual([b64(a), b64(b)]);
  });

  it.each([
    ['not base64 of 32 bytes', 'not-a-key', 1],
    ['16 bytes', newKek().subarray(0, 16).toString('base64'), 1],
    ['an empty entry', `${b64(newKek())},,${b64(newKek())}`, 2],
    ['a trailing comma', `${b64(newKek())},`, 2],
    ['a bad second key', `${b64(newKek())},${b64(newKek()).slice(1)}`, 2],
  ])('refuses %s, naming the variable and the entry but not its value', (_, value, entry) => {
    let error: unknown;
    try {
      readIssuerConfig({ ...base, RELAYPLANE_KEK_PREVIOUS: value });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).variable).toBe('RELAYPLANE_KEK_PREVIOUS');
    expect((error as Error).message).toContain(
      `RELAYPLANE_KEK_PREVIOUS entry ${entry} must be 32 bytes, base64-encoded`,
    );
    for (const part of value.split(',').filter((p) => p.length > 4)) {
      expect((error as Error).message).not.toContain(part);
    }
  });

  it('makes the issuer process exit 78 with that message', () => {
    const node = join(import.meta.dirname, '..', '..', '..', 'node_modules', '.bin', 'node');
    const run = spawnSync(node, [join(import.meta.dirname, '..', 'src', 'main.ts')], {
      env: { PATH: process.env.PATH ?? '', ...base, RELAYPLANE_KEK_PREVIOUS: 'c2hvcnQ=' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(run.status).toBe(78);
    expect(run.stderr).toContain(
      'configuration error: RELAYPLANE_KEK_PREVIOUS entry 1 must be 32 bytes, base64-encoded',
    );
  });
});

describe('KEK rotation on PostgreSQL', () => {
  const OLD = newKek();
  const NEW = newKek();
  const OTHER = newKek();
  const clock = new ManualClock(Date.parse('2026-12-01T12:00:00Z'));
  let database: TestDatabase;
  /** The rows as the old KEK sealed them: active, next and previous key. */
  let sealedByOld: RawKeyRow[];
  /** Each key's PKCS#8 DER, opened from `sealedByOld` with plain AES under the old KEK. */
  const ders = new Map<string, Buffer>();
  let activeKid: string;
  const open: IssuerApp[] = [];

  /** An issuer built through the real config reader and not started (no tick has run). */
  async function unstarted(kek: Buffer, previous: Buffer[] = []): Promise<IssuerApp> {
    const config = readIssuerConfig(
      {
        ISSUER_DATABASE_URL: database.url,
        ISSUER_LISTEN_ADDRESS: '127.0.0.1:0',
        RELAYPLANE_KEK: b64(kek),
        ...(previous.length ? { RELAYPLANE_KEK_PREVIOUS: previous.map(b64).join(',') } : {}),
      },
      { redis: undefined },
    );
    const service = await IssuerApp.create(config, { logger: testLogger('issuer'), clock });
    open.push(service);
    return service;
  }

  const start = (kek: Buffer, previous: Buffer[] = []) =>
    startIssuer({
      databaseUrl: database.url,
      clock,
      kek,
      env: previous.length ? { RELAYPLANE_KEK_PREVIOUS: previous.map(b64).join(',') } : {},
    });

  beforeAll(async () => {
    database = await createTestDatabase('issuer_kek_rotation');
    const first = await start(OLD);
    try {
      clock.advance(seconds(JWKS_MAX_AGE_SECONDS));
      expect((await first.client.rotateSigningKeys({ requestedBy: 'usr_test' })).rotated).toBe(true);
      sealedByOld = await rawKeyRows(first.service);
      activeKid = first.service.keys.activeSigningKey().kid;
    } finally {
      await first.stop();
    }
    expect(sealedByOld).toHaveLength(3);
    for (const row of sealedByOld) {
      expect(row.kek_fingerprint).toBe(fingerprint(OLD));
      ders.set(row.kid, rawOpen(row, OLD));
    }
  });

  afterAll(async () => {
    for (const service of open) await service.destroy().catch(() => {});
    await database?.drop();
  });

  it('opens keys sealed by a previous KEK, picking it by the row’s fingerprint, before any re-encryption', async () => {
    const service = await unstarted(NEW, [OTHER, OLD]);
    for (const row of sealedByOld) {
      const key = (await service.keys.privateKey(row.kid)) as KeyObject;
      expect(key.export({ format: 'der', type: 'pkcs8' }).equals(ders.get(row.kid) as Buffer)).toBe(true);
    }
    // The ring signs with the active key although the current KEK did not seal it.
    await service.keys.reload('refresh');
    const active = service.keys.activeSigningKey();
    expect(active.kid).toBe(activeKid);
    expect(createPublicKey(active.privateKey).export({ format: 'jwk' }).x).toBe(
      sealedByOld.find((r) => r.kid === activeKid)?.x,
    );
    // Nothing written yet, and the gauge counts the three keys still sealed by the old KEK.
    expect(await rawKeyRows(service)).toEqual(sealedByOld);
    expect(await metric(service, GAUGE, 'gauge')).toBe(3);
    // Without the old KEK among the previous ones, the same rows do not open.
    const without = await unstarted(NEW, [OTHER]);
    await expect(without.keys.privateKey(activeKid)).rejects.toThrow(
      `signing key ${activeKid} was sealed by the key-encryption key with fingerprint ${fingerprint(OLD)}, which is neither RELAYPLANE_KEK (${fingerprint(NEW)}) nor in RELAYPLANE_KEK_PREVIOUS`,
    );
  });

  it('re-encrypts each key exactly once when two issuers tick at the same moment, five times over', async () => {
    const a = await unstarted(NEW, [OLD]);
    const b = await unstarted(NEW, [OLD]);
    const kids = sealedByOld.map((r) => r.kid).sort();
    for (let round = 1; round <= 5; round++) {
      await restoreRows(a, sealedByOld);
      const [fromA, fromB] = await Promise.all([a.keys.tick(), b.keys.tick()]);
      // Every key once: by one replica or the other, never both, never twice.
      expect([...fromA.resealed, ...fromB.resealed].sort(), `round ${round}`).toEqual(kids);
      expect(fromA.created.concat(fromB.created, fromA.removed, fromB.removed)).toEqual([]);
      const rows = await rawKeyRows(a);
      for (const row of rows) {
        expect(row.kek_fingerprint).toBe(fingerprint(NEW));
        expect(rawOpen(row, NEW).equals(ders.get(row.kid) as Buffer)).toBe(true);
        expect(() => rawOpen(row, OLD)).toThrow();
        // A fresh IV: a new ciphertext, not the old bytes relabelled.
        const before = sealedByOld.find((r) => r.kid === row.kid) as RawKeyRow;
        expect(Buffer.from(row.private_iv ?? []).equals(Buffer.from(before.private_iv ?? []))).toBe(false);
      }
      // The same kids, public keys and timeline: only the sealing changed.
      expect(
        rows.map(({ kid, x, activated_at, deactivated_at }) => ({ kid, x, activated_at, deactivated_at })),
      ).toEqual(
        sealedByOld.map(({ kid, x, activated_at, deactivated_at }) => ({
          kid,
          x,
          activated_at,
          deactivated_at,
        })),
      );
    }
    expect((await metric(a, RESEALED, 'counter')) + (await metric(b, RESEALED, 'counter'))).toBe(15);
    // Both replicas' gauges read 0 after their reload.
    expect(await metric(a, GAUGE, 'gauge')).toBe(0);
    expect(await metric(b, GAUGE, 'gauge')).toBe(0);
  });

  it('writes with compare-and-set on the fingerprint: a second re-encryption from the old KEK changes nothing', async () => {
    const service = open[0] as IssuerApp;
    await restoreRows(service, sealedByOld);
    const store = new SigningKeyStore(service.database.db);
    const row = sealedByOld[0] as RawKeyRow;
    const sealed = (iv: number) => ({
      kekFingerprint: fingerprint(NEW),
      sealed: {
        iv: Buffer.alloc(12, iv),
        ciphertext: Buffer.from(row.private_ciphertext ?? []),
        tag: Buffer.alloc(16, iv),
      },
    });
    const [first, second] = await Promise.all([
      store.reseal(row.kid, fingerprint(OLD), sealed(1)),
      store.reseal(row.kid, fingerprint(OLD), sealed(2)),
    ]);
    expect([first, second].sort()).toEqual([false, true]);
    const after = (await rawKeyRows(service)).find((r) => r.kid === row.kid) as RawKeyRow;
    expect(after.kek_fingerprint).toBe(fingerprint(NEW));
    expect(Buffer.from(after.private_iv ?? []).equals(Buffer.alloc(12, first ? 1 : 2))).toBe(true);
    await restoreRows(service, sealedByOld);
  });

  it('two issuers starting at once with KEK=new, KEK_PREVIOUS=old: one re-encryption per key, the same keys sign', async () => {
    const service = open[0] as IssuerApp;
    await restoreRows(service, sealedByOld);
    const [a, b] = await Promise.all([start(NEW, [OLD]), start(NEW, [OLD])]);
    try {
      const resealed =
        (await metric(a.service, RESEALED, 'counter')) + (await metric(b.service, RESEALED, 'counter'));
      expect(resealed).toBe(3);
      expect(await metric(a.service, GAUGE, 'gauge')).toBe(0);
      const rows = await rawKeyRows(a.service);
      expect(rows.map((r) => [r.kid, r.kek_fingerprint])).toEqual(
        sealedByOld.map((r) => [r.kid, fingerprint(NEW)]),
      );
      // No key was made: the same active key signs on both.
      expect(a.service.keys.activeSigningKey().kid).toBe(activeKid);
      expect(b.service.keys.activeSigningKey().kid).toBe(activeKid);
      const issued = await b.client.issueCredential(
        issueRequest({ tenantId: newId('tenant'), projectId: newId('project'), apiKeyId: newId('apiKey') }),
      );
      const header = JSON.parse(Buffer.from(issued.token.split('.')[0] ?? '', 'base64url').toString());
      expect(header.kid).toBe(activeKid);
      expect((await a.client.introspectCredential({ token: issued.token })).active).toBe(true);
    } finally {
      await a.stop();
      await b.stop();
    }
  });

  it('starts with the new KEK alone once every key is re-encrypted: the old KEK can be dropped', async () => {
    const issuer = await start(NEW);
    try {
      expect(issuer.service.keys.activeSigningKey().kid).toBe(activeKid);
      expect(await metric(issuer.service, GAUGE, 'gauge')).toBe(0);
      expect(await metric(issuer.service, RESEALED, 'counter')).toBe(0);
      expect((await rawKeyRows(issuer.service)).map((r) => r.kid)).toEqual(sealedByOld.map((r) => r.kid));
    } finally {
      await issuer.stop();
    }
  });

  it('refuses a KEK that opens none of the stored keys, naming the fingerprints found and configured, and writes no key', async () => {
    const count = async () =>
      (
        await sql<{ n: string }>`select count(*) as n from issuer.signing_keys`.execute(
          open[0]?.database.db as never,
        )
      ).rows[0]?.n;
    const rows = await rawKeyRows(open[0] as IssuerApp);
    expect(rows.every((r) => r.kek_fingerprint === fingerprint(NEW))).toBe(true);
    // The old KEK, now that the keys are sealed by the new one; then a stranger with a stranger.
    const cases: [Buffer, Buffer[], string][] = [
      [OLD, [], `configured ${fingerprint(OLD)})`],
      [OTHER, [OLD], `configured ${fingerprint(OTHER)}, previous ${fingerprint(OLD)})`],
    ];
    for (const [kek, previous, configured] of cases) {
      const attempt = start(kek, previous);
      await expect(attempt).rejects.toBeInstanceOf(ConfigError);
      await expect(attempt).rejects.toThrow(
        `configuration error: RELAYPLANE_KEK does not match the key-encryption key that sealed the stored signing keys (stored key fingerprint ${fingerprint(NEW)}, ${configured}`,
      );
      await expect(attempt).rejects.not.toThrow(b64(kek));
      expect(await count()).toBe('3');
      expect(await rawKeyRows(open[0] as IssuerApp)).toEqual(rows);
    }
  });

  it('refuses a mix where one stored key’s KEK is missing, naming only that fingerprint', async () => {
    const service = open[0] as IssuerApp;
    const rows = await rawKeyRows(service);
    // One key back under the old KEK: with KEK=new alone, that one cannot open.
    await restoreRows(service, [sealedByOld[2] as RawKeyRow]);
    const attempt = start(NEW);
    await expect(attempt).rejects.toThrow(
      `(stored key fingerprint ${fingerprint(OLD)}, configured ${fingerprint(NEW)})`,
    );
    expect((await rawKeyRows(service)).map((r) => r.kek_fingerprint)).toEqual([
      fingerprint(NEW),
      fingerprint(NEW),
      fingerprint(OLD),
    ]);
    await restoreRows(service, rows);
  });
});

describe('KEK rotation on PGlite (embedded mode)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'issuer-kek-'));
  const OLD = newKek();
  const NEW = newKek();
  const clock = new ManualClock(Date.parse('2026-12-01T12:00:00Z'));
  const start = (kek: Buffer, previous: Buffer[] = []): Promise<RunningIssuer> =>
    startIssuer({
      databaseUrl: 'postgres://unused.invalid/none',
      clock,
      kek,
      env: previous.length ? { RELAYPLANE_KEK_PREVIOUS: previous.map(b64).join(',') } : {},
      config: { database: { kind: 'pglite', dataDir }, relays: DEMO_RELAYS },
    });

  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('re-encrypts the old KEK’s keys at start, then runs on the new KEK alone and refuses the old one', async () => {
    let before: RawKeyRow[];
    const first = await start(OLD);
    try {
      before = await rawKeyRows(first.service);
    } finally {
      await first.stop();
    }
    expect(before.map((r) => r.kek_fingerprint)).toEqual([fingerprint(OLD), fingerprint(OLD)]);

    const rotating = await start(NEW, [OLD]);
    try {
      expect(await metric(rotating.service, RESEALED, 'counter')).toBe(2);
      expect(await metric(rotating.service, GAUGE, 'gauge')).toBe(0);
      const rows = await rawKeyRows(rotating.service);
      expect(rows.map((r) => [r.kid, r.kek_fingerprint])).toEqual(
        before.map((r) => [r.kid, fingerprint(NEW)]),
      );
      for (const row of rows) {
        expect(
          rawOpen(row, NEW).equals(rawOpen(before.find((r) => r.kid === row.kid) as RawKeyRow, OLD)),
        ).toBe(true);
      }
    } finally {
      await rotating.stop();
    }

    await expect(start(OLD)).rejects.toThrow(
      `(stored key fingerprint ${fingerprint(NEW)}, configured ${fingerprint(OLD)})`,
    );
    const dropped = await start(NEW);
    try {
      expect((await rawKeyRows(dropped.service)).map((r) => r.kid)).toEqual(before.map((r) => r.kid));
      expect(dropped.service.keys.activeSigningKey().kid).toBe(before.find((r) => r.activated_at)?.kid);
    } finally {
      await dropped.stop();
    }
  }, 180_000);
});
