/**
 * The `relayplane` CLI as a new user runs it: the real binary (node apps/cli/bin/relayplane.js)
 * against `pnpm start` (embedded mode), with its own config home and no RELAYPLANE_TOKEN. The
 * test plays the human at the browser: it logs in over HTTP and approves (or denies) the code
 * the CLI printed.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../support/api.ts';
import { freePort, waitFor } from '../support/ports.ts';
import { type Proc, ROOT, startProcess } from '../support/processes.ts';

const BIN = join(ROOT, 'apps', 'cli', 'bin', 'relayplane.js');
const LOGIN = { email: 'cli-owner@example.com', password: 'cli-e2e-password-1234' };
const USER_CODE = /\b([BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4})\b/;

interface Run {
  child: ChildProcess;
  stderr(): string;
  done: Promise<{ code: number | null; stdout: string; stderr: string }>;
}

describe('relayplane CLI against the embedded server', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relayplane-cli-e2e-'));
  const configHome = mkdtempSync(join(tmpdir(), 'relayplane-cli-home-'));
  const configFile = join(configHome, 'relayplane', 'config.json');
  let proc: Proc;
  let api: Api;
  let apiUrl: string;
  let human: { authorization: string };
  const running = new Set<ChildProcess>();

  function start(args: string[], env: Record<string, string> = {}): Run {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: configHome,
        XDG_CONFIG_HOME: configHome,
        RELAYPLANE_API_URL: apiUrl,
        NO_COLOR: '1',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    running.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr?.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
      child.once('close', (code) => {
        running.delete(child);
        resolve({ code, stdout, stderr });
      }),
    );
    return { child, stderr: () => stderr, done };
  }

  const relayplane = (args: string[], env?: Record<string, string>) => start(args, env).done;

  /** Runs `login`, waits for the code on its stderr, and lets the human approve or deny it. */
  async function loginAs(action: 'approve' | 'deny', env?: Record<string, string>) {
    const run = start(['login'], env);
    await waitFor(async () => USER_CODE.test(run.stderr()), 30_000, 'the user code on stderr');
    const userCode = USER_CODE.exec(run.stderr())?.[1] ?? '';
    const decided = await api.request('POST', '/admin/v1/auth/device/approve', {
      headers: human,
      body: { user_code: userCode, action },
    });
    expect(decided.status).toBe(200);
    return { ...(await run.done), userCode };
  }

  beforeAll(async () => {
    const port = await freePort();
    apiUrl = `http://127.0.0.1:${port}`;
    proc = startProcess('cli-embedded', 'apps/embedded/src/main.ts', {
      RELAYPLANE_DATA_DIR: dataDir,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      RELAYPLANE_BOOTSTRAP_EMAIL: LOGIN.email,
      RELAYPLANE_BOOTSTRAP_PASSWORD: LOGIN.password,
    });
    await waitFor(
      async () => proc.output().includes('Relayplane is running'),
      90_000,
      'the embedded banner',
      200,
    );
    api = await Api.connect(apiUrl);
    const session = await api.request('POST', '/admin/v1/auth/login', { body: LOGIN });
    expect(session.status).toBe(200);
    human = { authorization: `Bearer ${session.body.token}` };
  }, 120_000);

  afterAll(async () => {
    for (const child of running) child.kill('SIGTERM');
    await proc?.stop();
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(configHome, { recursive: true, force: true });
  });

  it('--help lists every command with the exit codes, and every command and subcommand answers --help', async () => {
    const top = await relayplane(['--help']);
    expect(top.code).toBe(0);
    expect(top.stdout).toContain('7  device login denied or expired');
    const section = top.stdout.split('Commands:\n')[1]?.split('\n\n')[0] ?? '';
    // Each line: the synopsis, two or more spaces, the summary. The command words lead the synopsis.
    const commands = section.split('\n').map((line) => {
      const words = (line.trim().split(/\s{2,}/)[0] ?? '').split(' ');
      const end = words.findIndex((w) => !/^[a-z-]+$/.test(w));
      return end === -1 ? words : words.slice(0, end);
    });
    expect(commands.map((c) => c.join(' '))).toEqual(
      expect.arrayContaining([
        'login',
        'logout',
        'whoami',
        'projects create',
        'bots keys create',
        'credentials issue',
        'keys rotate',
        'keys revoke',
      ]),
    );
    for (const words of [...commands, ['bots'], ['bots', 'keys'], ['credentials'], ['api-keys']]) {
      const res = await relayplane([...words, '--help']);
      expect(res.code, words.join(' ')).toBe(0);
      expect(res.stdout, words.join(' ')).toMatch(/^usage: relayplane /);
    }
  });

  it('a bad flag exits 2 with the usage on stderr and nothing on stdout', async () => {
    const res = await relayplane(['projects', 'create', 'demo', '--enviroment', 'staging']);
    expect(res.code).toBe(2);
    expect(res.stdout).toBe('');
    expect(res.stderr).toContain('relayplane: unknown option --enviroment');
    expect(res.stderr).toContain('usage: relayplane projects create <name> [flags]');
  });

  it('before login, commands exit 3 and say to log in', async () => {
    const res = await relayplane(['whoami']);
    expect(res.code).toBe(3);
    expect(res.stderr).toContain('relayplane login');
  });

  it('login: the user approves the printed code; exit 0, token checked and saved 0600, never printed', async () => {
    const res = await loginAs('approve');
    expect(res.code, res.stderr).toBe(0);
    expect(res.stderr).toContain(`${apiUrl}/activate`);
    expect(res.stdout).toBe(`Logged in as ${LOGIN.email} (tenant default, role owner)\n`);
    expect(statSync(configFile).mode & 0o777).toBe(0o600);
    expect(statSync(join(configHome, 'relayplane')).mode & 0o777).toBe(0o700);
    const saved = JSON.parse(readFileSync(configFile, 'utf8'));
    expect(saved.api_url).toBe(apiUrl);
    expect(saved.token).toMatch(/^rpc_/);
    expect(res.stdout + res.stderr).not.toContain(saved.token);
  });

  it('whoami names the user, tenant and role; --json is the API session as is', async () => {
    const human = await relayplane(['whoami']);
    expect(human.code).toBe(0);
    expect(human.stdout).toContain(`Logged in as ${LOGIN.email} (tenant default, role owner)`);
    const json = await relayplane(['whoami', '--json']);
    expect(JSON.parse(json.stdout)).toMatchObject({ user: { email: LOGIN.email }, role: 'owner' });
  });

  let projectId: string;
  let apiKey: string;

  it('projects create demo, then projects lists it', async () => {
    const created = await relayplane(['projects', 'create', 'demo', '--json']);
    expect(created.code, created.stderr).toBe(0);
    const project = JSON.parse(created.stdout);
    expect(project).toMatchObject({ name: 'demo', environment: 'production' });
    projectId = project.id;
    const list = await relayplane(['projects']);
    expect(list.stdout).toMatch(new RegExp(`^${projectId}\\s+demo\\s+production\\s`, 'm'));
    const again = await relayplane(['projects', 'create', 'demo']);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^relayplane: .*exists/m);
  });

  it('api-keys create shows the key once, with a warning; the list never shows it', async () => {
    const created = await relayplane(['api-keys', 'create', projectId, '--name', 'backend', '--json']);
    expect(created.code, created.stderr).toBe(0);
    const body = JSON.parse(created.stdout);
    expect(body.key).toMatch(/^svc_live_[0-9a-f]{64}$/);
    expect(created.stderr).toContain('shown only once');
    apiKey = body.key;
    const list = await relayplane(['api-keys', projectId]);
    expect(list.stdout).toContain(body.api_key.id);
    expect(list.stdout).not.toContain(apiKey);
  });

  it('credentials issue with the key, then credentials revoke makes the credential refused', async () => {
    const issued = await relayplane(['credentials', 'issue', '--api-key', apiKey, '--ttl', '120', '--json']);
    expect(issued.code, issued.stderr).toBe(0);
    const credential = JSON.parse(issued.stdout);
    expect(credential.token).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
    expect(credential.jti).toEqual(expect.any(String));
    const assignment = () =>
      api.request('GET', '/v1/relays/assignment', {
        headers: { authorization: `Bearer ${credential.token}` },
      });
    expect((await assignment()).status).toBe(200);

    const revoked = await relayplane(['credentials', 'revoke', credential.jti, '--json']);
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(JSON.parse(revoked.stdout)).toEqual({ jti: credential.jti, revoked_at: expect.any(String) });
    expect((await assignment()).status).toBe(401);

    const fromEnv = await relayplane(['credentials', 'issue', '--json'], { RELAYPLANE_API_KEY: apiKey });
    expect(fromEnv.code, fromEnv.stderr).toBe(0);
    expect(JSON.parse(fromEnv.stdout).jti).not.toBe(credential.jti);
    const unknown = await relayplane(['credentials', 'revoke', 'crd_doesnotexist000000']);
    expect(unknown.code).toBe(5);
  });

  it('bots: create one and a bot token for it', async () => {
    const bot = await relayplane(['bots', 'create', projectId, 'ci', '--role', 'viewer', '--json']);
    expect(bot.code, bot.stderr).toBe(0);
    const botId = JSON.parse(bot.stdout).id;
    const key = await relayplane(['bots', 'keys', 'create', projectId, botId, '--json']);
    expect(key.code, key.stderr).toBe(0);
    expect(JSON.parse(key.stdout).token).toMatch(/^rpb_/);
    const list = await relayplane(['bots', projectId]);
    expect(list.stdout).toMatch(new RegExp(`^${botId}\\s+ci\\s+viewer\\s`, 'm'));
  });

  it('relays and signing keys are listed for the platform admin', async () => {
    const relays = await relayplane(['relays', '--json']);
    expect(relays.code, relays.stderr).toBe(0);
    expect(JSON.parse(relays.stdout).relays.length).toBeGreaterThan(0);
    const keys = await relayplane(['keys']);
    expect(keys.code, keys.stderr).toBe(0);
    expect(keys.stdout).toMatch(/^KID\s+STATE/);
    expect(keys.stdout).toMatch(/\sactive\s/);
    // A fresh server's next key is younger than one JWKS lifetime: the rotation is pending (202).
    const rotate = await relayplane(['keys', 'rotate']);
    expect(rotate.code, rotate.stderr).toBe(0);
    expect(rotate.stdout).toMatch(/^Rotation pending: the next key starts signing at \d{4}-\d\d-\d\dT/);
    expect(rotate.stdout).toMatch(/\snext\s/);
  });

  it('keys revoke asks for --yes, then revokes: the key leaves the JWKS and another one signs', async () => {
    const listed = await relayplane(['keys', '--json']);
    expect(listed.code, listed.stderr).toBe(0);
    const keyList = JSON.parse(listed.stdout) as { keys: { kid: string; state: string }[] };
    const kid = keyList.keys.find((k) => k.state === 'active')?.kid;
    if (!kid) throw new Error('no active key listed');

    // A kid is base64url: it may start with "-", so it goes after "--".
    const unconfirmed = await relayplane(['keys', 'revoke', '--', kid]);
    expect(unconfirmed.code).toBe(2);
    expect(unconfirmed.stdout).toBe('');
    expect(unconfirmed.stderr).toContain('cannot be undone: add --yes');
    const jwksBefore = await api.request('GET', '/v1/credentials/jwks');
    expect(jwksBefore.body.keys.map((k: { kid: string }) => k.kid)).toContain(kid);

    const revoked = await relayplane(['keys', 'revoke', '--yes', '--', kid]);
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(revoked.stdout).toMatch(
      new RegExp(`^Revoked ${kid} at \\d{4}-\\d\\d-\\d\\dT.*refused from now on\\.$`, 'm'),
    );
    const signing = /^Signing now: (\S+) \(active\)\.$/m.exec(revoked.stdout)?.[1];
    expect(signing).toBeDefined();
    expect(signing).not.toBe(kid);
    const jwksAfter = await api.request('GET', '/v1/credentials/jwks');
    const kids = jwksAfter.body.keys.map((k: { kid: string }) => k.kid);
    expect(kids).not.toContain(kid);
    expect(kids).toContain(signing);

    const again = await relayplane(['keys', 'revoke', '--yes', '--json', '--', kid]);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ already_revoked: true, revoked: { kid } });
    const unknown = await relayplane(['keys', 'revoke', 'kid-that-does-not-exist', '--yes']);
    expect(unknown.code).toBe(5);
  });

  it('a denied login exits 7 and leaves the saved login alone', async () => {
    const before = readFileSync(configFile, 'utf8');
    const res = await loginAs('deny');
    expect(res.code).toBe(7);
    expect(res.stderr).toContain('relayplane: login denied');
    expect(readFileSync(configFile, 'utf8')).toBe(before);
  });

  it('logout revokes the token on the server; whoami then exits 3', async () => {
    const token = JSON.parse(readFileSync(configFile, 'utf8')).token;
    const res = await relayplane(['logout']);
    expect(res.code, res.stderr).toBe(0);
    expect(JSON.parse(readFileSync(configFile, 'utf8')).token).toBeUndefined();
    const session = await api.request('GET', '/admin/v1/auth/session', {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(session.status).toBe(401);
    const whoami = await relayplane(['whoami']);
    expect(whoami.code).toBe(3);
    const refused = await relayplane(['whoami'], { RELAYPLANE_TOKEN: token });
    expect(refused.code).toBe(3);
  });

  it('an unreachable server exits 6', async () => {
    const port = await freePort();
    const res = await relayplane(['projects'], {
      RELAYPLANE_API_URL: `http://127.0.0.1:${port}`,
      RELAYPLANE_TOKEN: 'rpc_x',
    });
    expect(res.code).toBe(6);
    expect(res.stderr).toContain(`cannot reach http://127.0.0.1:${port}`);
  });
});
