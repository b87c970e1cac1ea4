import { describe, expect, it } from 'vitest';
import {
  ConfigError,
  DEFAULT_GRPC_MAX_CONNECTION_AGE_MS,
  EnvReader,
  readMaxConnectionAgeMs,
} from './config.ts';

/** Runs `fn`, expecting a ConfigError that names `variable`; returns its message. */
function configError(variable: string, fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    const e = err as ConfigError;
    expect(e.variable).toBe(variable);
    expect(e.message).toContain(variable);
    return e.message;
  }
  throw new Error(`expected a ConfigError for ${variable}`);
}

describe('EnvReader', () => {
  it('has/optional treat unset, empty and blank values as absent and trim the rest', () => {
    const env = new EnvReader({ SET: '  value  ', EMPTY: '', BLANK: '   ' });
    expect(env.has('SET')).toBe(true);
    expect(env.optional('SET')).toBe('value');
    for (const name of ['EMPTY', 'BLANK', 'UNSET']) {
      expect(env.has(name)).toBe(false);
      expect(env.optional(name)).toBeUndefined();
    }
  });

  it('string: returns the value, else the fallback, else fails naming the variable', () => {
    const env = new EnvReader({ A: 'x', BLANK: ' ' });
    expect(env.string('A')).toBe('x');
    expect(env.string('MISSING', 'fb')).toBe('fb');
    expect(env.string('BLANK', 'fb')).toBe('fb');
    expect(configError('MISSING', () => env.string('MISSING'))).toMatch(/required/);
  });

  it('int: parses integers, applies the fallback, rejects non-integers and values out of range', () => {
    const env = new EnvReader({ N: '42', NEG: '-3', BAD: '4.5', WORD: 'ten', HEXISH: '0x10', BIG: '99' });
    expect(env.int('N', undefined)).toBe(42);
    expect(env.int('NEG', undefined)).toBe(-3);
    expect(env.int('MISSING', 7)).toBe(7);
    expect(configError('MISSING', () => env.int('MISSING', undefined))).toMatch(/required/);
    expect(configError('BAD', () => env.int('BAD', 1))).toMatch(/integer.*4\.5/);
    configError('WORD', () => env.int('WORD', 1));
    configError('HEXISH', () => env.int('HEXISH', 1));
    expect(env.int('BIG', 1, { min: 1, max: 99 })).toBe(99);
    expect(configError('BIG', () => env.int('BIG', 1, { max: 98 }))).toMatch(/between .* and 98 \(got 99\)/);
    expect(configError('NEG', () => env.int('NEG', 1, { min: 0 }))).toMatch(/between 0 and/);
  });

  it('bool: accepts the usual spellings in any case, falls back when unset, rejects anything else', () => {
    const env = new EnvReader({
      T1: 'true',
      T2: 'YES',
      T3: '1',
      T4: 'On',
      F1: 'false',
      F2: 'no',
      F3: '0',
      F4: 'OFF',
      X: 'maybe',
    });
    for (const n of ['T1', 'T2', 'T3', 'T4']) expect(env.bool(n, false), n).toBe(true);
    for (const n of ['F1', 'F2', 'F3', 'F4']) expect(env.bool(n, true), n).toBe(false);
    expect(env.bool('MISSING', true)).toBe(true);
    expect(env.bool('MISSING', false)).toBe(false);
    expect(configError('X', () => env.bool('X', false))).toMatch(/true or false.*maybe/);
  });

  it('oneOf: returns an allowed value or the fallback and lists the allowed values when it fails', () => {
    const env = new EnvReader({ MODE: 'embedded', BAD: 'cloud' });
    const modes = ['embedded', 'distributed'] as const;
    expect(env.oneOf('MODE', modes, 'distributed')).toBe('embedded');
    expect(env.oneOf('MISSING', modes, 'distributed')).toBe('distributed');
    expect(configError('BAD', () => env.oneOf('BAD', modes, 'embedded'))).toMatch(
      /one of embedded, distributed.*cloud/,
    );
  });

  it('url: accepts listed protocols, rejects others, non-URLs and absence', () => {
    const env = new EnvReader({ DB: 'postgres://u@h:5432/d', WEB: 'http://x', JUNK: 'not a url' });
    expect(env.url('DB', ['postgres:', 'postgresql:'])).toBe('postgres://u@h:5432/d');
    expect(env.url('MISSING', ['redis:'], 'redis://127.0.0.1:6379')).toBe('redis://127.0.0.1:6379');
    expect(configError('WEB', () => env.url('WEB', ['postgres:']))).toMatch(/postgres: URL \(got http:\)/);
    expect(configError('JUNK', () => env.url('JUNK', ['http:']))).toMatch(/must be a URL/);
    expect(configError('MISSING', () => env.url('MISSING', ['http:']))).toMatch(/required/);
  });

  it('address: accepts host:port (names, IPv4, bracketed IPv6) and rejects the rest', () => {
    const env = new EnvReader({
      NAME: 'billing.svc:50051',
      V4: '127.0.0.1:0',
      V6: '[::1]:9000',
      NOPORT: 'billing',
      URLISH: 'http://billing:1',
    });
    expect(env.address('NAME')).toBe('billing.svc:50051');
    expect(env.address('V4')).toBe('127.0.0.1:0');
    expect(env.address('V6')).toBe('[::1]:9000');
    expect(env.address('MISSING', 'localhost:1')).toBe('localhost:1');
    expect(configError('NOPORT', () => env.address('NOPORT'))).toMatch(/host:port/);
    configError('URLISH', () => env.address('URLISH'));
    configError('MISSING', () => env.address('MISSING'));
  });

  it('target: accepts host:port, dns:/// names (with or without a resolver authority) and static ipv4:/ipv6: lists', () => {
    const ok = [
      'issuer:50051',
      '[::1]:50051',
      'dns:///relayplane-issuer-headless.prod.svc.cluster.local:50051',
      'dns://127.0.0.1:5353/issuers.test:50051',
      'ipv4:127.0.0.1:50051',
      'ipv4:10.0.0.1:50051,10.0.0.2:50051',
      'ipv6:[::1]:50051,[fd00::2]:50051',
    ];
    const bad = [
      'issuer',
      'http://issuer:50051',
      'dns:///issuer',
      'dns://not a server/issuer:1',
      'ipv4:issuer:50051',
      'ipv4:10.0.0.1:50051,',
      'ipv6:::1:50051',
      'unix:/tmp/socket',
    ];
    const env = new EnvReader(Object.fromEntries([...ok, ...bad].map((v, i) => [`T${i}`, v])));
    for (const [i, v] of ok.entries()) expect(env.target(`T${i}`)).toBe(v);
    bad.forEach((_, i) => {
      expect(configError(`T${ok.length + i}`, () => env.target(`T${ok.length + i}`))).toMatch(/dns:\/\/\//);
    });
    expect(env.target('MISSING', 'localhost:1')).toBe('localhost:1');
  });

  it('max connection age: defaults, 0 for never, at least one second otherwise', () => {
    expect(readMaxConnectionAgeMs(new EnvReader({}), 'AGE')).toBe(DEFAULT_GRPC_MAX_CONNECTION_AGE_MS);
    expect(readMaxConnectionAgeMs(new EnvReader({ AGE: '0' }), 'AGE')).toBe(0);
    expect(readMaxConnectionAgeMs(new EnvReader({ AGE: '1500' }), 'AGE')).toBe(1500);
    expect(configError('AGE', () => readMaxConnectionAgeMs(new EnvReader({ AGE: '999' }), 'AGE'))).toMatch(
      /at least 1000/,
    );
    configError('AGE', () => readMaxConnectionAgeMs(new EnvReader({ AGE: '-1' }), 'AGE'));
  });

  it('base64Key: decodes exactly the requested length, is absent when unset, rejects wrong size or junk', () => {
    const key = Buffer.alloc(32, 7);
    const env = new EnvReader({
      KEY: key.toString('base64'),
      UNPADDED: key.toString('base64').replace(/=+$/, ''),
      SHORT: Buffer.alloc(16).toString('base64'),
      JUNK: '!!!not-base64!!!',
    });
    expect(env.base64Key('KEY', 32)?.equals(key)).toBe(true);
    expect(env.base64Key('UNPADDED', 32)?.equals(key)).toBe(true);
    expect(env.base64Key('MISSING', 32)).toBeUndefined();
    expect(configError('SHORT', () => env.base64Key('SHORT', 32))).toMatch(/32 bytes/);
    configError('JUNK', () => env.base64Key('JUNK', 32));
  });
});
