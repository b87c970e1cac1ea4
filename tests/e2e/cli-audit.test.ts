/**
 * `relayplane audit list` and `relayplane audit verify`: the real binary against `pnpm start`
 * (embedded mode), authenticated with RELAYPLANE_TOKEN (a login token of the owner, or of a
 * developer of the same tenant).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../support/api.ts';
import { freePort, waitFor } from '../support/ports.ts';
import { type Proc, ROOT, startProcess } from '../support/processes.ts';

const BIN = join(ROOT, 'apps', 'cli', 'bin', 'relayplane.js');
const OWNER = { email: 'audit-owner@example.com', password: 'audit-e2e-password-1234' };
const DEVELOPER = { email: 'audit-dev@example.com', password: 'audit-e2e-password-5678' };

describe('relayplane audit against the embedded server', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relayplane-audit-e2e-'));
  const configHome = mkdtempSync(join(tmpdir(), 'relayplane-audit-home-'));
  let proc: Proc;
  let api: Api;
  let apiUrl: string;
  let ownerToken: string;
  let ownerId: string;
  let developerToken: string;
  let projectId: string;

  function relayplane(args: string[], token: string) {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: configHome,
        XDG_CONFIG_HOME: configHome,
        RELAYPLANE_API_URL: apiUrl,
        RELAYPLANE_TOKEN: token,
        NO_COLOR: '1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr?.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
      child.once('close', (code) => resolve({ code, stdout, stderr })),
    );
  }

  async function login(user: { email: string; password: string }) {
    const res = await api.request('POST', '/admin/v1/auth/login', { body: user });
    expect(res.status).toBe(200);
    return res.body as { token: string; session: { user: { id: string }; tenant: { id: string } } };
  }

  beforeAll(async () => {
    const port = await freePort();
    apiUrl = `http://127.0.0.1:${port}`;
    proc = startProcess('audit-embedded', 'apps/embedded/src/main.ts', {
      RELAYPLANE_DATA_DIR: dataDir,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      RELAYPLANE_BOOTSTRAP_EMAIL: OWNER.email,
      RELAYPLANE_BOOTSTRAP_PASSWORD: OWNER.password,
    });
    await waitFor(
      async () => proc.output().includes('Relayplane is running'),
      90_000,
      'the embedded banner',
      200,
    );
    api = await Api.connect(apiUrl);
    const owner = await login(OWNER);
    ownerToken = owner.token;
    ownerId = owner.session.user.id;
    const auth = { authorization: `Bearer ${ownerToken}` };
    const signup = await api.request('POST', '/admin/v1/auth/signup', {
      body: { ...DEVELOPER, tenant_name: 'dev home' },
    });
    expect(signup.status).toBe(201);
    const added = await api.request('POST', '/admin/v1/members', {
      headers: auth,
      body: { email: DEVELOPER.email, role: 'developer' },
    });
    expect(added.status).toBe(201);
    const developer = await login(DEVELOPER);
    developerToken = developer.token;
    const switched = await api.request('POST', '/admin/v1/auth/session/tenant', {
      headers: { authorization: `Bearer ${developerToken}` },
      body: { tenant_id: owner.session.tenant.id },
    });
    expect(switched.status).toBe(200);
    const project = await api.request('POST', '/admin/v1/projects', {
      headers: auth,
      body: { name: 'audited' },
    });
    expect(project.status).toBe(201);
    projectId = project.body.id;
  }, 120_000);

  afterAll(async () => {
    await proc?.stop();
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(configHome, { recursive: true, force: true });
  });

  it('audit list --json answers the API page; filters by action, actor and target', async () => {
    const res = await relayplane(['audit', 'list', '--action', 'project.create', '--json'], ownerToken);
    expect(res.code, res.stderr).toBe(0);
    const page = JSON.parse(res.stdout);
    expect(page.next_cursor).toBeNull();
    expect(page.events).toHaveLength(1);
    expect(page.events[0]).toMatchObject({
      action: 'project.create',
      actor: { type: 'user', id: ownerId },
      target: { type: 'project', id: projectId },
      outcome: 'success',
      ip: '127.0.0.1',
    });

    const byTarget = JSON.parse(
      (await relayplane(['audit', 'list', '--target', projectId, '--json'], ownerToken)).stdout,
    );
    expect(byTarget.events.map((e: { action: string }) => e.action)).toEqual(['project.create']);
    const byActor = JSON.parse(
      (await relayplane(['audit', 'list', '--actor', ownerId, '--since', '1h', '--json'], ownerToken)).stdout,
    );
    expect(byActor.events.map((e: { action: string }) => e.action)).toEqual(
      expect.arrayContaining(['project.create', 'member.add']),
    );
    expect(byActor.events.every((e: { actor: { id: string } }) => e.actor.id === ownerId)).toBe(true);
    const limited = JSON.parse(
      (await relayplane(['audit', 'list', '--limit', '1', '--json'], ownerToken)).stdout,
    );
    expect(limited.events).toHaveLength(1);
    expect(limited.next_cursor).toEqual(expect.any(String));
  });

  it('audit list prints a table newest first without --json', async () => {
    const res = await relayplane(['audit', 'list'], ownerToken);
    expect(res.code, res.stderr).toBe(0);
    const lines = res.stdout.split('\n');
    expect(lines[0]).toMatch(/^TIME\s+ACTION\s+OUTCOME\s+ACTOR\s+TARGET\s+IP$/);
    expect(res.stdout).toMatch(
      new RegExp(`project\\.create\\s+success\\s+user:${ownerId}\\s+project:${projectId}\\s+127\\.0\\.0\\.1`),
    );
    const actions = lines.slice(1).map((l) => l.split(/\s{2,}/)[1]);
    expect(actions.indexOf('project.create')).toBeLessThan(actions.indexOf('tenant.create'));
  });

  it('audit verify reports an intact chain (exit 0), as a table or the API JSON', async () => {
    const human = await relayplane(['audit', 'verify'], ownerToken);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/^Intact:\s+yes$/m);
    expect(human.stdout).toMatch(/^Events checked:\s+[1-9][0-9]*$/m);
    const json = await relayplane(['audit', 'verify', '--json'], ownerToken);
    expect(JSON.parse(json.stdout)).toEqual({
      ok: true,
      events_checked: expect.any(Number),
      first_bad_id: null,
      first_bad_seq: null,
      checkpoint_seq: null,
      checkpoint_ok: true,
      anchor_ok: true,
    });
  });

  it('bad flags exit 2 without a request; a developer is refused with exit 4', async () => {
    for (const args of [
      ['audit', 'list', '--limit', '0'],
      ['audit', 'list', '--limit', '201'],
      ['audit', 'list', '--since', 'yesterday'],
    ]) {
      const res = await relayplane(args, ownerToken);
      expect(res.code, args.join(' ')).toBe(2);
      expect(res.stdout).toBe('');
      expect(res.stderr).toMatch(/^relayplane: --(limit|since) must/m);
    }
    const refused = await relayplane(['audit', 'list'], developerToken);
    expect(refused.code).toBe(4);
    expect(refused.stderr).toContain('does not grant permission audit:read');
    expect((await relayplane(['audit', 'verify'], developerToken)).code).toBe(4);
  });
});
