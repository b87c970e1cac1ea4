import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, EnvReader } from '@relayplane/shared/config';
import { afterAll, describe, expect, it } from 'vitest';
import { DEMO_RELAYS, type RelayConfig, readRelayConfig } from './relay-config.ts';

const dir = mkdtempSync(join(tmpdir(), 'relays-file-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
function file(text: string, ext = 'yaml'): string {
  const path = join(dir, `relays-${n++}.${ext}`);
  writeFileSync(path, text);
  return path;
}

/** What RELAYPLANE_RELAYS_FILE=`path` configures. */
function relaysFile(path: string): Pick<RelayConfig, 'staticRelays' | 'fallback'> {
  const { staticRelays, fallback } = readRelayConfig(new EnvReader({ RELAYPLANE_RELAYS_FILE: path }));
  return { staticRelays, fallback };
}

function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('readRelayConfig', () => {
  it('defaults: 30 s window, 1 s refresh, 3 relays, nothing static', () => {
    expect(readRelayConfig(new EnvReader({}))).toEqual({
      healthWindowSeconds: 30,
      refreshIntervalMs: 1000,
      maxAssigned: 3,
      staticRelays: [],
      fallback: [],
    });
  });

  it('reads the variables and their bounds, naming the variable when out of range', () => {
    const config = readRelayConfig(
      new EnvReader({
        ISSUER_RELAY_HEALTH_WINDOW_SECONDS: '5',
        ISSUER_RELAY_REFRESH_MS: '250',
        ISSUER_MAX_ASSIGNED_RELAYS: '20',
      }),
    );
    expect(config).toMatchObject({ healthWindowSeconds: 5, refreshIntervalMs: 250, maxAssigned: 20 });
    for (const [variable, value] of [
      ['ISSUER_RELAY_HEALTH_WINDOW_SECONDS', '4'],
      ['ISSUER_RELAY_HEALTH_WINDOW_SECONDS', '3601'],
      ['ISSUER_MAX_ASSIGNED_RELAYS', '0'],
      ['ISSUER_MAX_ASSIGNED_RELAYS', '21'],
      ['ISSUER_RELAY_REFRESH_MS', 'soon'],
    ] as const) {
      expect(configError(() => readRelayConfig(new EnvReader({ [variable]: value }))).variable).toBe(
        variable,
      );
    }
  });

  it('reads a YAML relays file: generated ids per region, given ids kept, addresses normalized', () => {
    const path = file(`
relays:
  - region: eu-west
    host: Relay-1.Example.NET
    port: 4433
  - id: paris-a
    region: eu-west
    host: 10.0.0.2
    port: 4433
  - region: eu-west
    host: "2001:db8::7"
    port: 443
  - region: us-east
    host: relay-3.example.net
    port: 4433
fallback:
  - Edge.Example.net:443
  - "[2001:DB8::1]:443"
`);
    const config = readRelayConfig(new EnvReader({ RELAYPLANE_RELAYS_FILE: path }));
    expect(config.staticRelays).toEqual([
      { id: 'rly_static_eu-west_1', region: 'eu-west', host: 'relay-1.example.net', port: 4433 },
      { id: 'paris-a', region: 'eu-west', host: '10.0.0.2', port: 4433 },
      { id: 'rly_static_eu-west_3', region: 'eu-west', host: '2001:db8::7', port: 443 },
      { id: 'rly_static_us-east_1', region: 'us-east', host: 'relay-3.example.net', port: 4433 },
    ]);
    expect(config.fallback).toEqual(['edge.example.net:443', '[2001:db8::1]:443']);
  });

  it('reads a JSON relays file, and a file with only one of the two keys', () => {
    const json = file(
      JSON.stringify({ relays: [{ region: 'ap-south', host: '192.0.2.10', port: 443 }], fallback: [] }),
      'json',
    );
    expect(relaysFile(json)).toEqual({
      staticRelays: [{ id: 'rly_static_ap-south_1', region: 'ap-south', host: '192.0.2.10', port: 443 }],
      fallback: [],
    });
    expect(relaysFile(file('fallback: ["edge.example:443"]\n'))).toEqual({
      staticRelays: [],
      fallback: ['edge.example:443'],
    });
  });

  it('lets overrides replace the file (embedded mode passes the demo relays)', () => {
    const config = readRelayConfig(new EnvReader({ RELAYPLANE_RELAYS_FILE: join(dir, 'missing.yaml') }), {
      ...DEMO_RELAYS,
      maxAssigned: 2,
    });
    expect(config.staticRelays.map((r) => r.region)).toEqual(['eu-west', 'us-east']);
    expect(config.fallback).toEqual(['127.0.0.1:4443']);
    expect(config.maxAssigned).toBe(2);
  });

  it('names RELAYPLANE_RELAYS_FILE, the file and the path of each invalid value', () => {
    const relay = 'region: eu-west\n    host: relay.example\n    port: 443';
    const cases: Array<[string, string]> = [
      ['- just a list\n', 'must be a mapping'],
      ['relays: []\nextra: 1\n', 'extra: unknown key'],
      ['relays: {a: 1}\n', 'relays: must be a list'],
      ['relays:\n  - nope\n', 'relays[0]: must be a mapping'],
      [`relays:\n  - ${relay}\n  - region: EU\n    host: b.example\n    port: 443\n`, 'relays[1].region:'],
      ['relays:\n  - region: eu-west\n    host: "bad host"\n    port: 443\n', 'relays[0].host:'],
      ['relays:\n  - region: eu-west\n    port: 443\n', 'relays[0].host:'],
      ['relays:\n  - region: eu-west\n    host: a.example\n    port: "443"\n', 'relays[0].port:'],
      ['relays:\n  - region: eu-west\n    host: a.example\n    port: 70000\n', 'relays[0].port:'],
      [`relays:\n  - ${relay}\n    weight: 3\n`, 'relays[0].weight: unknown key'],
      [`relays:\n  - ${relay}\n    id: "Bad Id"\n`, 'relays[0].id:'],
      [
        `relays:\n  - ${relay}\n    id: x\n  - region: us-east\n    host: b.example\n    port: 443\n    id: x\n`,
        'relays[1].id: duplicate relay id x',
      ],
      [
        `relays:\n  - ${relay}\n  - region: us-east\n    host: RELAY.example\n    port: 443\n`,
        'relays[1]: duplicate address relay.example:443',
      ],
      ['fallback: edge.example:443\n', 'fallback: must be a list'],
      ['fallback: ["a.example:1", "edge.example"]\n', 'fallback[1]:'],
      ['fallback: ["2001:db8::1:443"]\n', 'fallback[0]:'],
      ['fallback: [443]\n', 'fallback[0]:'],
      ['fallback: ["a.example:1", "A.example:1"]\n', 'fallback[1]: duplicate entry a.example:1'],
      ['relays: [\n', 'is invalid'],
      ['', 'must be a mapping'],
    ];
    for (const [text, expected] of cases) {
      const path = file(text);
      const err = configError(() => readRelayConfig(new EnvReader({ RELAYPLANE_RELAYS_FILE: path })));
      expect(err.variable, text).toBe('RELAYPLANE_RELAYS_FILE');
      expect(err.message, text).toContain(path);
      expect(err.message, text).toContain(expected);
    }
  });

  it('names the variable when the file cannot be read', () => {
    const path = join(dir, 'does-not-exist.yaml');
    const err = configError(() => readRelayConfig(new EnvReader({ RELAYPLANE_RELAYS_FILE: path })));
    expect(err.variable).toBe('RELAYPLANE_RELAYS_FILE');
    expect(err.message).toContain('ENOENT');
    expect(err.message).toContain(path);
  });

  it('ships demo relays that are themselves valid', () => {
    const path = file(
      JSON.stringify({ relays: DEMO_RELAYS.staticRelays, fallback: DEMO_RELAYS.fallback }),
      'json',
    );
    expect(relaysFile(path)).toEqual(DEMO_RELAYS);
  });
});
