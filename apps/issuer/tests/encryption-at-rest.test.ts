import { createDecipheriv, createHash, createPublicKey, type KeyObject } from 'node:crypto';
import { ManualClock } from '@relayplane/shared/clock';
import { ConfigError } from '@relayplane/shared/config';
import { createTestDatabase, type TestDatabase } from '@relayplane/testing/storage';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JWKS_MAX_AGE_SECONDS } from '../src/keys/key-lifecycle.ts';
import { KeyDecryptionError, openPrivateKey } from '../src/keys/key-material.ts';
import {
  newKek,
  type RawKeyRow,
  type RunningIssuer,
  rawKeyRows,
  seconds,
  startIssuer,
} from './support/harness.ts';

function decrypt(row: RawKeyRow, kek: Buffer, aad = row.kid): Buffer {
  if (!row.private_iv || !row.private_ciphertext || !row.private_tag) throw new Error('no private half');
  const decipher = createDecipheriv('aes-256-gcm', kek, row.private_iv);
  decipher.setAAD(Buffer.from(aad));
  decipher.setAuthTag(row.private_tag);
  return Buffer.concat([decipher.update(row.private_ciphertext), decipher.final()]);
}

/** Every way a column could carry `secret`: raw bytes, or text holding them encoded. */
function columnHolds(value: unknown, secret: Buffer): boolean {
  if (value === null || value === undefined) return false;
  if (value instanceof Uint8Array) return Buffer.from(value).includes(secret);
  const text = value instanceof Date ? value.toISOString() : String(value);
  return [
    secret.toString('latin1'),
    secret.toString('hex'),
    secret.toString('base64'),
    secret.toString('base64url'),
  ].some((encoded) => text.includes(encoded) || text.includes(encoded.replace(/=+$/, '')));
}

describe('signing keys at rest (real PostgreSQL)', () => {
  let database: TestDatabase;
  let issuer: RunningIssuer;
  const kek = newKek();
  const clock = new ManualClock(Date.parse('2026-11-22T12:00:00Z'));
  const privateKeys = new Map<string, KeyObject>();

  beforeAll(async () => {
    database = await createTestDatabase('issuer_at_rest');
    issuer = await startIssuer({ databaseUrl: database.url, clock, kek });
    // One rotation, so there are active, next and previous keys on disk.
    clock.advance(seconds(JWKS_MAX_AGE_SECONDS));
    expect((await issuer.client.rotateSigningKeys({ requestedBy: 'usr_test' })).rotated).toBe(true);
    for (const row of await rawKeyRows(issuer.service)) {
      const key = await issuer.service.keys.privateKey(row.kid);
      if (key) privateKeys.set(row.kid, key);
    }
  });

  afterAll(async () => {
    await issuer?.stop();
    await database?.drop();
  });

  it('returns, for each stored key, the private key whose public half is the listed x', async () => {
    const rows = await rawKeyRows(issuer.service);
    expect(rows).toHaveLength(3);
    expect(privateKeys.size).toBe(3);
    for (const row of rows) {
      const jwk = createPublicKey(privateKeys.get(row.kid) as KeyObject).export({ format: 'jwk' });
      expect(jwk.x).toBe(row.x);
    }
  });

  it('stores no private key in clear in any column: neither its PKCS#8 DER nor its 32-byte seed', async () => {
    const rows = await rawKeyRows(issuer.service);
    for (const key of privateKeys.values()) {
      const der = key.export({ format: 'der', type: 'pkcs8' });
      const seed = Buffer.from(key.export({ format: 'jwk' }).d as string, 'base64url');
      expect(seed).toHaveLength(32);
      for (const row of rows) {
        for (const [column, value] of Object.entries(row)) {
          expect(columnHolds(value, der), `${column} of ${row.kid} holds a PKCS#8 key`).toBe(false);
          expect(columnHolds(value, seed), `${column} of ${row.kid} holds a private seed`).toBe(false);
        }
      }
    }
  });

  it('seals each private key with AES-256-GCM under the KEK, bound to its kid, and names the KEK by fingerprint', async () => {
    const rows = await rawKeyRows(issuer.service);
    const fingerprint = createHash('sha256').update(kek).digest('hex').slice(0, 16);
    for (const row of rows) {
      expect(row.kek_fingerprint).toBe(fingerprint);
      expect(row.private_iv).toHaveLength(12);
      expect(row.private_tag).toHaveLength(16);
      const der = (privateKeys.get(row.kid) as KeyObject).export({ format: 'der', type: 'pkcs8' });
      expect(decrypt(row, kek).equals(der)).toBe(true);
      expect(() => decrypt(row, newKek())).toThrow();
      const other = rows.find((r) => r.kid !== row.kid)?.kid ?? '';
      expect(() => decrypt(row, kek, other)).toThrow();
    }
    expect(new Set(rows.map((r) => Buffer.from(r.private_iv ?? []).toString('hex'))).size).toBe(rows.length);
  });

  it('opens a sealed key only with its whole 16-byte tag: a tag cut to 4 bytes is refused (issue 31)', async () => {
    const [row] = await rawKeyRows(issuer.service);
    if (!row?.private_iv || !row.private_ciphertext || !row.private_tag) throw new Error('no private half');
    const sealed = {
      iv: Buffer.from(row.private_iv),
      ciphertext: Buffer.from(row.private_ciphertext),
      tag: Buffer.from(row.private_tag),
    };
    const x = (
      createPublicKey(privateKeys.get(row.kid) as KeyObject).export({ format: 'jwk' }) as { x: string }
    ).x;
    expect(() => openPrivateKey(sealed, kek, row.kid, x)).not.toThrow();
    const cut = { ...sealed, tag: sealed.tag.subarray(0, 4) };
    // What GCM does without authTagLength: the 4-byte prefix of the right tag passes.
    const lax = createDecipheriv('aes-256-gcm', kek, cut.iv);
    lax.setAAD(Buffer.from(row.kid));
    lax.setAuthTag(cut.tag);
    expect(() => Buffer.concat([lax.update(cut.ciphertext), lax.final()])).not.toThrow();
    expect(() => openPrivateKey(cut, kek, row.kid, x)).toThrow(KeyDecryptionError);
  });

  it('refuses to start with a different KEK, naming RELAYPLANE_KEK, and writes nothing', async () => {
    const before = await rawKeyRows(issuer.service);
    const wrongKek = newKek();
    const start = startIssuer({ databaseUrl: database.url, clock, kek: wrongKek });
    await expect(start).rejects.toBeInstanceOf(ConfigError);
    await expect(start).rejects.toThrow(/RELAYPLANE_KEK does not match the key-encryption key/);
    await expect(start).rejects.not.toThrow(wrongKek.toString('base64'));
    expect(await rawKeyRows(issuer.service)).toEqual(before);
  });

  it('lets the database refuse a second active key or a live key without its private half', async () => {
    const [row] = await rawKeyRows(issuer.service);
    const db = issuer.service.database.db;
    const insertActive = sql`insert into issuer.signing_keys (kid, x, kek_fingerprint, private_iv, private_ciphertext, private_tag, created_at, activated_at)
      values ('extra', ${row?.x}, ${row?.kek_fingerprint}, ${row?.private_iv}, ${row?.private_ciphertext}, ${row?.private_tag}, now(), now())`;
    await expect(insertActive.execute(db)).rejects.toThrow(/signing_keys_one_active/);
    const liveWithoutPrivate = sql`update issuer.signing_keys set private_ciphertext = null where removed_at is null`;
    await expect(liveWithoutPrivate.execute(db)).rejects.toThrow(/signing_keys_private_half/);
  });
});
