import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  ConfigError,
  DEFAULT_GRPC_MAX_CONNECTION_AGE_MS,
  EnvReader,
  readDatabase,
  readMaxConnectionAgeMs,
  readRedis,
  readYamlFile,
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

describe('service setting readers', () => {
  const DATABASE = { url: ['SVC_DATABASE_URL', 'DATABASE_URL'], poolMax: 'SVC_DATABASE_POOL_MAX' } as const;
  const REDIS = {
    url: ['SVC_REDIS_URL', 'REDIS_URL'],
    prefix: ['SVC_REDIS_PREFIX', 'RELAYPLANE_REDIS_PREFIX'],
  } as const;

  it('readDatabase: the service URL wins over the shared one; pool size defaults to 10', () => {
    const shared = { DATABASE_URL: 'postgres://db/all' };
    expect(readDatabase(new EnvReader(shared), DATABASE)).toEqual({
      kind: 'postgres',
      url: 'postgres://db/all',
      poolMax: 10,
    });
    expect(
      readDatabase(
        new EnvReader({ ...shared, SVC_DATABASE_URL: 'postgresql://db/svc', SVC_DATABASE_POOL_MAX: '3' }),
        DATABASE,
      ),
    ).toEqual({ kind: 'postgres', url: 'postgresql://db/svc', poolMax: 3 });
    expect(configError('SVC_DATABASE_URL', () => readDatabase(new EnvReader({}), DATABASE))).toMatch(
      /required/,
    );
    configError('SVC_DATABASE_URL', () =>
      readDatabase(new EnvReader({ SVC_DATABASE_URL: 'redis://db' }), DATABASE),
    );
    configError('SVC_DATABASE_POOL_MAX', () =>
      readDatabase(new EnvReader({ ...shared, SVC_DATABASE_POOL_MAX: '0' }), DATABASE),
    );
  });

  it('readRedis: absent without a URL unless required; own variables win; default prefix', () => {
    expect(readRedis(new EnvReader({ SVC_REDIS_PREFIX: 'x:' }), REDIS)).toBeUndefined();
    expect(
      configError('SVC_REDIS_URL', () => readRedis(new EnvReader({}), REDIS, { required: true })),
    ).toMatch(/required/);
    expect(readRedis(new EnvReader({ REDIS_URL: 'redis://shared:6379' }), REDIS)).toEqual({
      url: 'redis://shared:6379',
      prefix: 'relayplane:',
    });
    const shared = { REDIS_URL: 'redis://shared:6379', RELAYPLANE_REDIS_PREFIX: 'rp:' };
    expect(readRedis(new EnvReader(shared), REDIS)).toEqual({ url: 'redis://shared:6379', prefix: 'rp:' });
    expect(
      readRedis(
        new EnvReader({ ...shared, SVC_REDIS_URL: 'rediss://own:6380', SVC_REDIS_PREFIX: 'svc:' }),
        REDIS,
      ),
    ).toEqual({ url: 'rediss://own:6380', prefix: 'svc:' });
    configError('SVC_REDIS_URL', () => readRedis(new EnvReader({ SVC_REDIS_URL: 'http://cache' }), REDIS));
  });

  const CLUSTER = {
    ...REDIS,
    clusterNodes: ['SVC_REDIS_CLUSTER_NODES', 'RELAYPLANE_REDIS_CLUSTER_NODES'],
  } as const;

  it('readRedis: cluster nodes give a cluster config (IPv6 in brackets, spaces trimmed); the URL path is unchanged', () => {
    expect(
      readRedis(
        new EnvReader({ RELAYPLANE_REDIS_CLUSTER_NODES: 'redis-0.redis:6379, 10.0.0.2:7000,[fd00::1]:6380' }),
        CLUSTER,
      ),
    ).toEqual({
      clusterNodes: [
        { host: 'redis-0.redis', port: 6379 },
        { host: '10.0.0.2', port: 7000 },
        { host: 'fd00::1', port: 6380 },
      ],
      prefix: 'relayplane:',
    });
    expect(
      readRedis(new EnvReader({ SVC_REDIS_CLUSTER_NODES: 'a:1', SVC_REDIS_PREFIX: 'svc:' }), CLUSTER, {
        required: true,
      }),
    ).toEqual({ clusterNodes: [{ host: 'a', port: 1 }], prefix: 'svc:' });
    expect(readRedis(new EnvReader({ REDIS_URL: 'redis://shared:6379' }), CLUSTER)).toEqual({
      url: 'redis://shared:6379',
      prefix: 'relayplane:',
    });
    expect(readRedis(new EnvReader({}), CLUSTER)).toBeUndefined();
    expect(
      configError('SVC_REDIS_URL', () => readRedis(new EnvReader({}), CLUSTER, { required: true })),
    ).toMatch(/required/);
  });

  it("readRedis: the service's own variable wins over the deployment-wide one, whichever kind each is", () => {
    expect(
      readRedis(
        new EnvReader({ REDIS_URL: 'redis://shared:6379', SVC_REDIS_CLUSTER_NODES: 'own:7000' }),
        CLUSTER,
      ),
    ).toEqual({ clusterNodes: [{ host: 'own', port: 7000 }], prefix: 'relayplane:' });
    expect(
      readRedis(
        new EnvReader({ RELAYPLANE_REDIS_CLUSTER_NODES: 'shared:7000', SVC_REDIS_URL: 'redis://own:6379' }),
        CLUSTER,
      ),
    ).toEqual({ url: 'redis://own:6379', prefix: 'relayplane:' });
  });

  it('readRedis: a URL and cluster nodes at the same level fail naming both; a bad node list fails naming the own variable', () => {
    expect(
      configError('SVC_REDIS_CLUSTER_NODES', () =>
        readRedis(
          new EnvReader({ SVC_REDIS_URL: 'redis://own:6379', SVC_REDIS_CLUSTER_NODES: 'own:7000' }),
          CLUSTER,
        ),
      ),
    ).toBe(
      'configuration error: SVC_REDIS_CLUSTER_NODES and SVC_REDIS_URL are both set: set SVC_REDIS_URL for one Redis server or SVC_REDIS_CLUSTER_NODES for a Redis Cluster, not both',
    );
    expect(
      configError('RELAYPLANE_REDIS_CLUSTER_NODES', () =>
        readRedis(
          new EnvReader({ REDIS_URL: 'redis://shared:6379', RELAYPLANE_REDIS_CLUSTER_NODES: 'shared:7000' }),
          CLUSTER,
        ),
      ),
    ).toMatch(/RELAYPLANE_REDIS_CLUSTER_NODES and REDIS_URL are both set/);
    for (const bad of ['shared', 'a:1,,b:2', 'a:0', 'a:65536', 'a:1:2', 'fd00::1:6379']) {
      expect(
        configError('SVC_REDIS_CLUSTER_NODES', () =>
          readRedis(new EnvReader({ RELAYPLANE_REDIS_CLUSTER_NODES: bad }), CLUSTER),
        ),
        bad,
      ).toMatch(/must be a comma-separated list of host:port seed nodes/);
    }
  });

  it('readRedis: cluster nodes as URLs carry the credentials and TLS of every node; they must agree, and a refusal never echoes a password', () => {
    const read = (nodes: string) =>
      readRedis(new EnvReader({ RELAYPLANE_REDIS_CLUSTER_NODES: nodes }), CLUSTER);
    expect(read('redis://:s3cret@a:7000, redis://:s3cret@[fd00::2]:7001')).toEqual({
      clusterNodes: [
        { host: 'a', port: 7000 },
        { host: 'fd00::2', port: 7001 },
      ],
      clusterAuth: { password: 's3cret', tls: false },
      prefix: 'relayplane:',
    });
    expect(read('rediss://relay%40plane:p%2Fw@a:6380')).toEqual({
      clusterNodes: [{ host: 'a', port: 6380 }],
      clusterAuth: { username: 'relay@plane', password: 'p/w', tls: true },
      prefix: 'relayplane:',
    });
    expect(read('redis://a:7000')).toEqual({
      clusterNodes: [{ host: 'a', port: 7000 }],
      clusterAuth: { tls: false },
      prefix: 'relayplane:',
    });
    const refusals: [string, RegExp][] = [
      ['redis://:s3cret@a:7000,b:7001', /mixes host:port nodes and URLs/],
      ['redis://:s3cret@a:7000,redis://:other@b:7001', /different schemes or credentials/],
      ['redis://:s3cret@a:7000,rediss://:s3cret@b:7001', /different schemes or credentials/],
      ['http://:s3cret@a:7000', /must be redis:\/\/\[user:password@\]host:port or rediss/],
      ['redis://:s3cret@a', /must be redis:\/\//],
      ['redis://:s3cret@a:7000/2', /no database/],
    ];
    for (const [nodes, message] of refusals) {
      const text = configError('SVC_REDIS_CLUSTER_NODES', () => read(nodes));
      expect(text, nodes).toMatch(message);
      expect(text, nodes).not.toContain('s3cret');
    }
  });

  it('readYamlFile: parses YAML or JSON, absent when unset, names the variable and file when it fails', () => {
    const dir = mkdtempSync(join(tmpdir(), 'shared-config-'));
    const file = (name: string, text: string) => {
      const path = join(dir, name);
      writeFileSync(path, text);
      return path;
    };
    const numbers = (doc: unknown) => {
      if (!Array.isArray(doc)) throw new Error('must be a list');
      return doc as number[];
    };
    const read = (path: string | undefined) =>
      readYamlFile(new EnvReader(path === undefined ? {} : { FILE: path }), 'FILE', numbers);
    expect(read(undefined)).toBeUndefined();
    expect(read(file('a.yaml', '- 1\n- 2\n'))).toEqual([1, 2]);
    expect(read(file('a.json', '[3]'))).toEqual([3]);
    const refused = file('b.yaml', 'a: 1\n');
    expect(configError('FILE', () => read(refused))).toContain(`(${refused}) is invalid: must be a list`);
    expect(configError('FILE', () => read(file('c.yaml', '[1,\n')))).toMatch(/is invalid/);
    const missing = join(dir, 'missing.yaml');
    expect(configError('FILE', () => read(missing))).toContain(`ENOENT: ${missing}`);
  });
});
