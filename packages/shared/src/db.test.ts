import { describe, expect, it } from 'vitest';
import { ConfigError } from './config.ts';
import { parseDatabaseUrl } from './db.ts';

describe('parseDatabaseUrl', () => {
  it('passes a URL without pgbouncer= through unchanged: the default, direct mode', () => {
    for (const url of [
      'postgres://app:secret@db.internal:5432/relayplane?sslmode=require',
      'postgresql://db/relayplane',
      'socket:/var/run/postgresql?db=relayplane',
    ]) {
      expect(parseDatabaseUrl(url, 'ISSUER_DATABASE_URL')).toEqual({ url, transactionPooler: false });
    }
  });

  it('pgbouncer=true marks a transaction pooler and is removed before the URL reaches pg; other parameters stay', () => {
    expect(
      parseDatabaseUrl('postgres://app:s%40cret@bouncer:6432/relayplane?pgbouncer=true&sslmode=require', 'X'),
    ).toEqual({
      url: 'postgres://app:s%40cret@bouncer:6432/relayplane?sslmode=require',
      transactionPooler: true,
    });
    expect(parseDatabaseUrl('postgres://bouncer:6432/relayplane?pgbouncer=false', 'X')).toEqual({
      url: 'postgres://bouncer:6432/relayplane',
      transactionPooler: false,
    });
  });

  it('any other value of pgbouncer= is a configuration error naming the variable', () => {
    const err = (() => {
      try {
        parseDatabaseUrl('postgres://bouncer:6432/relayplane?pgbouncer=yes', 'ADMIN_DATABASE_URL');
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).variable).toBe('ADMIN_DATABASE_URL');
    expect((err as Error).message).toBe(
      'configuration error: ADMIN_DATABASE_URL pgbouncer= must be true or false, not "yes"',
    );
  });
});
