import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ConfigStore, defaultConfigPath } from './config.ts';
import { CliError } from './errors.ts';

describe('the saved login', () => {
  let home: string;

  beforeEach(() => {
    home = mkdtempSync(join(tmpdir(), 'relayplane-cli-config-'));
    vi.stubEnv('XDG_CONFIG_HOME', home);
  });

  afterEach(() => {
    vi.unstubAllEnvs();
    rmSync(home, { recursive: true, force: true });
  });

  it('lives in $XDG_CONFIG_HOME/relayplane/config.json', () => {
    expect(defaultConfigPath()).toBe(join(home, 'relayplane', 'config.json'));
  });

  it('is written with mode 0600 in a 0700 directory, and reads back', () => {
    const store = new ConfigStore(defaultConfigPath());
    store.write({ api_url: 'http://127.0.0.1:8080', token: 'rpc_secret' });
    expect(statSync(store.path).mode & 0o777).toBe(0o600);
    expect(statSync(join(home, 'relayplane')).mode & 0o777).toBe(0o700);
    expect(store.read()).toEqual({ api_url: 'http://127.0.0.1:8080', token: 'rpc_secret' });
  });

  it('replaces a world-readable file with a 0600 one and tightens the directory, leaving no temp files', () => {
    const dir = join(home, 'relayplane');
    mkdirSync(dir, { mode: 0o755 });
    const path = join(dir, 'config.json');
    writeFileSync(path, '{}', { mode: 0o644 });
    const warnings: string[] = [];
    new ConfigStore(path).read((m) => warnings.push(m));
    expect(warnings).toEqual([expect.stringContaining('chmod 600')]);
    new ConfigStore(path).write({ token: 't' });
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(readdirSync(dir)).toEqual(['config.json']);
  });

  it('forgets the token but keeps the API URL on logout', () => {
    const store = new ConfigStore(defaultConfigPath());
    store.write({ api_url: 'https://rp.example', token: 't', email: 'a@b', tenant: 'x' });
    store.clearToken();
    expect(JSON.parse(readFileSync(store.path, 'utf8'))).toEqual({ api_url: 'https://rp.example' });
  });

  it('is empty when missing and a clear error when corrupt', () => {
    const store = new ConfigStore(defaultConfigPath());
    expect(store.read()).toEqual({});
    mkdirSync(join(home, 'relayplane'));
    writeFileSync(store.path, '{"token": ', { mode: 0o600 });
    expect(() => store.read()).toThrow(CliError);
    expect(() => store.read()).toThrow(/is not valid JSON/);
  });
});
