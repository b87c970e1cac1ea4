/** `pnpm start` as a newcomer runs it: embedded mode on PGlite in a fresh data directory. */
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../support/api.ts';
import { freePort, waitFor } from '../support/ports.ts';
import { type Proc, startProcess } from '../support/processes.ts';

describe('embedded mode: the four services in one process on PGlite', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relayplane-embedded-'));
  let port: number;
  let proc: Proc;
  let api: Api;
  let login: { email: string; password: string };

  const start = async (name: string, env: Record<string, string> = {}) => {
    const p = startProcess(name, 'apps/embedded/src/main.ts', {
      RELAYPLANE_DATA_DIR: dataDir,
      PORT: String(port),
      LOG_LEVEL: 'warn',
      ...env,
    });
    await waitFor(
      async () => p.output().includes('Relayplane is running'),
      90_000,
      'the embedded banner',
      200,
    );
    return p;
  };

  beforeAll(async () => {
    port = await freePort();
    proc = await start('embedded-1');
    const out = proc.output();
    const email = /email\s+(\S+)/.exec(out)?.[1];
    const passwordFile = /password file\s+(\S+)/.exec(out)?.[1];
    if (!email || !passwordFile) throw new Error(`no generated login in the banner:\n${out}`);
    // Not a terminal: the banner names the file and never prints the password itself.
    expect(statSync(passwordFile).mode & 0o777).toBe(0o600);
    const password = readFileSync(passwordFile, 'utf8').trim();
    expect(out).not.toContain(password);
    login = { email, password };
    api = await Api.connect(`http://127.0.0.1:${port}`);
  }, 120_000);

  afterAll(async () => {
    await proc?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('prints the URLs and the generated first login, and warns about the generated key-encryption key', () => {
    const out = proc.output();
    expect(out).toContain(`http://127.0.0.1:${port}/docs`);
    expect(out).toContain('generated a key-encryption key');
    expect(statSync(join(dataDir, 'issuer', 'kek')).mode & 0o777).toBe(0o600);
  });

  it('is live and ready', async () => {
    expect((await api.request('GET', '/healthz')).status).toBe(200);
    expect((await api.request('GET', '/readyz')).status).toBe(200);
  });

  it('serves a JWKS whose kid equals an independent RFC 7638 computation', async () => {
    const res = await api.request('GET', '/v1/credentials/jwks');
    const [active] = res.body.keys;
    const canonical = `{"crv":"${active.crv}","kty":"${active.kty}","x":"${active.x}"}`;
    expect(active.kid).toBe(createHash('sha256').update(canonical).digest('base64url'));
  });

  it('accepts the printed login; a project can be created and listed; the same name again is 409 {error}', async () => {
    const session = await api.request('POST', '/admin/v1/auth/login', { body: login });
    expect(session.status).toBe(200);
    const auth = { authorization: `Bearer ${session.body.token}` };
    expect(
      (await api.request('POST', '/admin/v1/projects', { headers: auth, body: { name: 'first' } })).status,
    ).toBe(201);
    const list = await api.request('GET', '/admin/v1/projects', { headers: auth });
    expect(list.body.projects.map((p: { name: string }) => p.name)).toEqual(['first']);
    const dup = await api.request('POST', '/admin/v1/projects', { headers: auth, body: { name: 'first' } });
    expect(dup.status).toBe(409);
    expect(dup.body).toEqual({ error: expect.any(String) });
  });

  it('keeps its data across a restart and does not print the password again', async () => {
    const before = await api.request('GET', '/v1/credentials/jwks');
    expect(await proc.stop()).toBe(0);
    // The distributed mode's gRPC TLS variables do not apply to the in-process links: files that
    // do not exist would make any distributed app exit 78; embedded starts and serves.
    proc = await start('embedded-2', {
      RELAYPLANE_GRPC_TLS_CERT_FILE: join(dataDir, 'no-such-cert.pem'),
      RELAYPLANE_GRPC_TLS_KEY_FILE: join(dataDir, 'no-such-key.pem'),
      RELAYPLANE_GRPC_TLS_CA_FILE: join(dataDir, 'no-such-ca.pem'),
      ISSUER_HEALTH_LISTEN_ADDRESS: '127.0.0.1:1',
    });
    expect(proc.output()).not.toContain(login.password);
    const session = await api.request('POST', '/admin/v1/auth/login', { body: login });
    expect(session.status).toBe(200);
    const list = await api.request('GET', '/admin/v1/projects', {
      headers: { authorization: `Bearer ${session.body.token}` },
    });
    expect(list.body.projects.map((p: { name: string }) => p.name)).toEqual(['first']);
    const after = await api.request('GET', '/v1/credentials/jwks');
    expect(after.body.keys[0].kid).toBe(before.body.keys[0].kid);
  }, 120_000);

  it('keeps every credential it answered across a SIGKILL: the cap still counts them, each one revokes', async () => {
    // A tenant of its own, on the free plan (the first owner's is on enterprise).
    const owner = { email: 'kill@example.test', password: 'tenant password 123' };
    const signup = await api.request('POST', '/admin/v1/auth/signup', {
      body: { ...owner, tenant_name: 'Kill' },
    });
    expect(signup.status).toBe(201);
    const session = await api.request('POST', '/admin/v1/auth/login', { body: owner });
    const auth = { authorization: `Bearer ${session.body.token}` };
    const project = await api.request('POST', '/admin/v1/projects', {
      headers: auth,
      body: { name: 'kill' },
    });
    const created = await api.request('POST', `/admin/v1/projects/${project.body.id}/api-keys`, {
      headers: auth,
      body: { scopes: ['relay:session'] },
    });
    expect(created.status).toBe(201);
    const issue = () =>
      api.request('POST', '/api/v1/credentials', {
        headers: { 'x-api-key': created.body.key },
        body: { ttl_seconds: 600 },
      });
    // The free plan's cap: 10 concurrent connections.
    const jtis: string[] = [];
    for (let i = 0; i < 10; i++) {
      const res = await issue();
      expect(res.status).toBe(201);
      jtis.push(res.body.jti);
    }
    expect((await issue()).status).toBe(402);

    // No shutdown, no checkpoint: what was answered is in PGlite's WAL, replayed at the next start.
    proc.child.kill('SIGKILL');
    expect(await proc.exited).toBeNull();
    proc = await start('embedded-3');
    const again = await api.request('POST', '/admin/v1/auth/login', { body: owner });
    expect(again.status).toBe(200);
    const auth2 = { authorization: `Bearer ${again.body.token}` };
    expect((await issue()).status).toBe(402);
    for (const jti of jtis) {
      const revoked = await api.request('POST', `/admin/v1/credentials/${jti}/revoke`, { headers: auth2 });
      expect(revoked.status).toBe(200);
      expect(revoked.body.jti).toBe(jti);
    }
    const unknown = await api.request('POST', '/admin/v1/credentials/crd_aaaaaaaaaaaaaaaaaaaa/revoke', {
      headers: auth2,
    });
    expect(unknown.status).toBe(404);
    expect((await issue()).status).toBe(201);
  }, 180_000);
});
