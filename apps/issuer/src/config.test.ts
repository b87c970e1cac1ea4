import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@relayplane/shared/config';
import { afterEach, describe, expect, it } from 'vitest';
import { loadOrCreateKek, readIssuerConfig } from './config.ts';

const KEK = randomBytes(32).toString('base64');
const BASE = { DATABASE_URL: 'postgres://db.internal/relayplane', REDIS_URL: 'redis://redis.internal:6379' };

describe('readIssuerConfig', () => {
  it('applies the documented defaults and the shared DATABASE_URL / REDIS_URL fallbacks', () => {
    const config = readIssuerConfig({ ...BASE, RELAYPLANE_KEK: KEK });
    expect(config.listen).toBe('127.0.0.1:50051');
    expect(config.database).toEqual({ kind: 'postgres', url: BASE.DATABASE_URL, poolMax: 10 });
    expect(config.redis).toEqual({ url: BASE.REDIS_URL, prefix: 'relayplane:' });
    expect(config.kek.equals(Buffer.from(KEK, 'base64'))).toBe(true);
    expect(config.keys).toEqual({
      rotationIntervalSeconds: 2_592_000,
      maxCredentialTtlSeconds: 3_600,
      maintenanceIntervalSeconds: 30,
    });
    expect(config.logLevel).toBe('info');
  });

  it('reads the credential issuer/audience and the Redis command timeout, with their defaults', () => {
    const defaults = readIssuerConfig({ ...BASE, RELAYPLANE_KEK: KEK });
    expect(defaults.credentials).toEqual({ issuer: 'relayplane', audience: 'relayplane-relay' });
    expect(defaults.redisCommandTimeoutMs).toBe(500);
    const set = readIssuerConfig({
      ...BASE,
      RELAYPLANE_KEK: KEK,
      RELAYPLANE_CREDENTIAL_ISSUER: 'https://relayplane.example',
      RELAYPLANE_CREDENTIAL_AUDIENCE: 'edge-relays',
      ISSUER_REDIS_COMMAND_TIMEOUT_MS: '250',
    });
    expect(set.credentials).toEqual({ issuer: 'https://relayplane.example', audience: 'edge-relays' });
    expect(set.redisCommandTimeoutMs).toBe(250);
    expect(() =>
      readIssuerConfig({ ...BASE, RELAYPLANE_KEK: KEK, RELAYPLANE_CREDENTIAL_AUDIENCE: 'a'.repeat(257) }),
    ).toThrow(/RELAYPLANE_CREDENTIAL_AUDIENCE/);
    expect(() =>
      readIssuerConfig({ ...BASE, RELAYPLANE_KEK: KEK, ISSUER_REDIS_COMMAND_TIMEOUT_MS: '10' }),
    ).toThrow(/ISSUER_REDIS_COMMAND_TIMEOUT_MS/);
  });

  it('merges relay overrides field by field (embedded mode passes the demo relays)', () => {
    const config = readIssuerConfig(
      { ...BASE, RELAYPLANE_KEK: KEK },
      { relays: { fallback: ['entry.example:443'], staticRelays: [] } },
    );
    expect(config.relays.fallback).toEqual(['entry.example:443']);
    expect(config.relays.healthWindowSeconds).toBe(30);
  });

  it('prefers the ISSUER_ variables over the shared ones', () => {
    const config = readIssuerConfig({
      ...BASE,
      RELAYPLANE_KEK: KEK,
      ISSUER_DATABASE_URL: 'postgres://issuer-db/x',
      ISSUER_REDIS_URL: 'redis://issuer-redis:6379',
    });
    expect(config.database).toMatchObject({ url: 'postgres://issuer-db/x' });
    expect(config.redis?.url).toBe('redis://issuer-redis:6379');
  });

  it('fails naming RELAYPLANE_KEK when it is missing or not 32 bytes of base64', () => {
    expect(() => readIssuerConfig(BASE)).toThrow(/RELAYPLANE_KEK is required/);
    expect(() => readIssuerConfig({ ...BASE, RELAYPLANE_KEK: randomBytes(16).toString('base64') })).toThrow(
      /RELAYPLANE_KEK must be 32 bytes/,
    );
  });

  it('requires Redis in distributed mode unless the composition root passes redis: undefined', () => {
    expect(() => readIssuerConfig({ DATABASE_URL: BASE.DATABASE_URL, RELAYPLANE_KEK: KEK })).toThrow(
      /ISSUER_REDIS_URL is required/,
    );
    const embedded = readIssuerConfig(
      { DATABASE_URL: BASE.DATABASE_URL, RELAYPLANE_KEK: KEK },
      { redis: undefined },
    );
    expect(embedded.redis).toBeUndefined();
  });

  it("reads ISSUER_ADMIN_ADDRESS, the audit outbox's target (default 127.0.0.1:50052), naming it when invalid", () => {
    expect(readIssuerConfig({ ...BASE, RELAYPLANE_KEK: KEK }).adminAddress).toBe('127.0.0.1:50052');
    expect(
      readIssuerConfig({ ...BASE, RELAYPLANE_KEK: KEK, ISSUER_ADMIN_ADDRESS: 'dns:///admin:50052' })
        .adminAddress,
    ).toBe('dns:///admin:50052');
    expect(() => readIssuerConfig({ ...BASE, RELAYPLANE_KEK: KEK, ISSUER_ADMIN_ADDRESS: 'admin' })).toThrow(
      /ISSUER_ADMIN_ADDRESS/,
    );
  });

  it('reads ISSUER_CREDENTIAL_RETENTION_DAYS: 35 by default, 2..36500, a config error (exit 78) otherwise', () => {
    expect(readIssuerConfig({ ...BASE, RELAYPLANE_KEK: KEK }).credentialRetentionDays).toBe(35);
    const days = (value: string) =>
      readIssuerConfig({ ...BASE, RELAYPLANE_KEK: KEK, ISSUER_CREDENTIAL_RETENTION_DAYS: value })
        .credentialRetentionDays;
    expect(days('2')).toBe(2);
    expect(days('400')).toBe(400);
    expect(days('36500')).toBe(36_500);
    expect(days(' ')).toBe(35); // blank is unset, as for every variable
    for (const bad of ['1', '0', '-5', '36501', '7.5', 'forever']) {
      let thrown: unknown;
      try {
        days(bad);
      } catch (err) {
        thrown = err;
      }
      // ConfigError is what runMain turns into one line naming the variable and exit code 78.
      expect(thrown, bad).toBeInstanceOf(ConfigError);
      expect((thrown as ConfigError).variable, bad).toBe('ISSUER_CREDENTIAL_RETENTION_DAYS');
      expect((thrown as Error).message, bad).toMatch(/ISSUER_CREDENTIAL_RETENTION_DAYS must be/);
    }
  });

  it('refuses a rotation interval under ten minutes', () => {
    const env = { ...BASE, RELAYPLANE_KEK: KEK, ISSUER_KEY_ROTATION_INTERVAL_SECONDS: '599' };
    expect(() => readIssuerConfig(env)).toThrow(ConfigError);
    expect(() => readIssuerConfig(env)).toThrow(/ISSUER_KEY_ROTATION_INTERVAL_SECONDS/);
  });
});

describe('loadOrCreateKek', () => {
  const dirs: string[] = [];
  const tempDir = () => {
    const dir = mkdtempSync(join(tmpdir(), 'issuer-kek-'));
    dirs.push(dir);
    return dir;
  };
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  it('creates a 32-byte KEK readable only by its owner, then returns the same one', () => {
    const dataDir = join(tempDir(), 'nested');
    const created = loadOrCreateKek(dataDir);
    expect(created.created).toBe(true);
    expect(created.kek).toHaveLength(32);
    expect(statSync(join(dataDir, 'kek')).mode & 0o777).toBe(0o600);
    const loaded = loadOrCreateKek(dataDir);
    expect(loaded.created).toBe(false);
    expect(loaded.kek.equals(created.kek)).toBe(true);
    expect(readFileSync(join(dataDir, 'kek'), 'utf8').trim()).toBe(created.kek.toString('base64'));
  });

  it('refuses a kek file that is not 32 bytes of base64 rather than replacing it', () => {
    const dataDir = tempDir();
    writeFileSync(join(dataDir, 'kek'), 'not-a-key');
    expect(() => loadOrCreateKek(dataDir)).toThrow(/not 32 bytes of base64/);
    expect(readFileSync(join(dataDir, 'kek'), 'utf8')).toBe('not-a-key');
  });
});
