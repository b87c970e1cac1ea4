import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { COMMANDS, run } from './cli.ts';
import { ConfigStore } from './config.ts';
import { EXIT } from './errors.ts';
import type { Io } from './io.ts';

const SESSION = {
  id: 'ses_1',
  user: {
    id: 'usr_1',
    email: 'ada@example.com',
    platform_admin: false,
    created_at: '2026-01-01T00:00:00.000Z',
  },
  tenant: { id: 'ten_1', name: 'acme', created_at: '2026-01-01T00:00:00.000Z' },
  role: 'owner',
  created_at: '2026-01-01T00:00:00.000Z',
  expires_at: '2026-01-02T00:00:00.000Z',
  authenticated_by: 'bearer',
};
const GOOD_TOKEN = 'rpc_good';

/** A stand-in API: device flow, session, projects. Records what it was sent. */
function stubApi(deviceAnswer: () => { status: number; body: unknown }) {
  const seen: { method: string; url: string; authorization?: string }[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    seen.push({ method: req.method ?? '', url: req.url ?? '', authorization: req.headers.authorization });
    const send = (status: number, body: unknown) =>
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    const base = `http://${req.headers.host}`;
    req.resume();
    req.on('end', () => {
      const authed = req.headers.authorization === `Bearer ${GOOD_TOKEN}`;
      switch (`${req.method} ${req.url}`) {
        case 'GET /.well-known/oauth-authorization-server':
          return send(200, {
            issuer: base,
            device_authorization_endpoint: `${base}/device/code`,
            token_endpoint: `${base}/token`,
          });
        case 'POST /device/code':
          return send(200, {
            device_code: 'dev_1',
            user_code: 'WDJB-MJHT',
            verification_uri: `${base}/device`,
            verification_uri_complete: `${base}/device?user_code=WDJB-MJHT`,
            expires_in: 900,
            interval: 5,
          });
        case 'POST /token': {
          const a = deviceAnswer();
          return send(a.status, a.body);
        }
        case 'GET /admin/v1/auth/session':
          return authed ? send(200, SESSION) : send(401, { error: 'invalid or expired token' });
        // The CLI pages through lists; a paged API's last (here: only) page has next_cursor null.
        case 'GET /admin/v1/projects?limit=200':
          return authed
            ? send(200, {
                projects: [
                  {
                    id: 'prj_1',
                    name: 'demo',
                    tenant_id: 'ten_1',
                    environment: 'production',
                    created_at: SESSION.created_at,
                  },
                ],
                next_cursor: null,
              })
            : send(401, { error: 'invalid or expired token' });
        case 'POST /admin/v1/auth/logout':
          return authed ? res.writeHead(204).end() : send(401, { error: 'invalid or expired token' });
        default:
          return send(404, { error: 'not found' });
      }
    });
  });
  return { server, seen };
}

describe('relayplane, run in-process', () => {
  let deviceAnswers: { status: number; body: unknown }[] = [];
  const { server, seen } = stubApi(
    () => deviceAnswers.shift() ?? { status: 500, body: { error: 'server_error' } },
  );
  let apiUrl: string;
  let dir: string;

  beforeAll(async () => {
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    apiUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'relayplane-cli-run-'));
    seen.length = 0;
    return () => rmSync(dir, { recursive: true, force: true });
  });

  async function cli(argv: string[], env: Record<string, string> = {}) {
    let stdout = '';
    let stderr = '';
    const sleeps: number[] = [];
    const io: Io = {
      env: { RELAYPLANE_API_URL: apiUrl, ...env },
      stdout: { write: (s: string) => (stdout += s), isTTY: false },
      stderr: { write: (s: string) => (stderr += s), isTTY: false },
      fetch: (input, init) => fetch(input, init),
      sleep: async (ms) => {
        sleeps.push(ms);
      },
      now: () => Date.now(),
      configPath: join(dir, 'relayplane', 'config.json'),
      readStdin: async () => '',
    };
    const code = await run(argv, io);
    return { code, stdout, stderr, sleeps };
  }

  it('logs in with the device flow: code on stderr, token checked, saved 0600, never printed', async () => {
    deviceAnswers = [
      { status: 400, body: { error: 'authorization_pending' } },
      { status: 200, body: { access_token: GOOD_TOKEN, token_type: 'Bearer', expires_in: 3600 } },
    ];
    const r = await cli(['login']);
    expect(r.code).toBe(EXIT.ok);
    expect(r.stderr).toContain('WDJB-MJHT');
    expect(r.stderr).toContain(`${apiUrl}/device`);
    expect(r.stdout).toBe('Logged in as ada@example.com (tenant acme, role owner)\n');
    expect(r.sleeps).toEqual([5000, 5000]);
    expect(r.stdout + r.stderr).not.toContain(GOOD_TOKEN);
    const path = join(dir, 'relayplane', 'config.json');
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(path, 'utf8'))).toMatchObject({ api_url: apiUrl, token: GOOD_TOKEN });
  });

  it('with --json, login prints only the session JSON on stdout', async () => {
    deviceAnswers = [{ status: 200, body: { access_token: GOOD_TOKEN, token_type: 'Bearer' } }];
    const r = await cli(['login', '--json']);
    expect(r.code).toBe(EXIT.ok);
    expect(JSON.parse(r.stdout)).toEqual(SESSION);
  });

  it('does not save a token the API refuses', async () => {
    deviceAnswers = [{ status: 200, body: { access_token: 'rpc_bad', token_type: 'Bearer' } }];
    const r = await cli(['login']);
    expect(r.code).toBe(EXIT.api);
    expect(r.stderr).toContain('the new token was not accepted');
    expect(new ConfigStore(join(dir, 'relayplane', 'config.json')).read()).toEqual({});
  });

  it('exits 7 when the login is denied, and saves nothing', async () => {
    deviceAnswers = [{ status: 400, body: { error: 'access_denied' } }];
    const r = await cli(['login']);
    expect(r.code).toBe(EXIT.loginRefused);
    expect(r.stderr).toMatch(/^relayplane: login denied/m);
    expect(new ConfigStore(join(dir, 'relayplane', 'config.json')).read()).toEqual({});
  });

  it('prints the API JSON as is with --json, and a table without it', async () => {
    new ConfigStore(join(dir, 'relayplane', 'config.json')).write({ api_url: apiUrl, token: GOOD_TOKEN });
    const json = await cli(['projects', '--json']);
    expect(json.code).toBe(EXIT.ok);
    expect(JSON.parse(json.stdout).projects[0].id).toBe('prj_1');
    const human = await cli(['projects']);
    expect(human.stdout.split('\n')[0]).toMatch(/^ID\s+NAME\s+ENVIRONMENT\s+CREATED$/);
    expect(human.stdout).not.toContain('\u001b[');
  });

  it('RELAYPLANE_TOKEN overrides the saved token', async () => {
    new ConfigStore(join(dir, 'relayplane', 'config.json')).write({ api_url: apiUrl, token: 'rpc_saved' });
    const r = await cli(['whoami'], { RELAYPLANE_TOKEN: GOOD_TOKEN });
    expect(r.code).toBe(EXIT.ok);
    expect(seen.at(-1)?.authorization).toBe(`Bearer ${GOOD_TOKEN}`);
  });

  it('never sends a saved token to another API URL: exit 3 without a request', async () => {
    new ConfigStore(join(dir, 'relayplane', 'config.json')).write({
      api_url: 'https://elsewhere.example',
      token: GOOD_TOKEN,
    });
    const r = await cli(['projects']);
    expect(r.code).toBe(EXIT.unauthenticated);
    expect(r.stderr).toContain(`not logged in to ${apiUrl}`);
    expect(seen).toEqual([]);
  });

  it('maps a refused token to exit 3 with the login hint, on stderr only', async () => {
    const r = await cli(['whoami'], { RELAYPLANE_TOKEN: 'rpc_revoked' });
    expect(r.code).toBe(EXIT.unauthenticated);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(
      'relayplane: invalid or expired token\nhint: the token in RELAYPLANE_TOKEN was refused; unset it or set a valid one\n',
    );
  });

  it('logout revokes the saved token and forgets it; a 401 there forgets it too', async () => {
    const store = new ConfigStore(join(dir, 'relayplane', 'config.json'));
    store.write({ api_url: apiUrl, token: GOOD_TOKEN });
    expect((await cli(['logout'])).code).toBe(EXIT.ok);
    expect(seen.at(-1)).toMatchObject({ method: 'POST', url: '/admin/v1/auth/logout' });
    expect(store.read()).toEqual({ api_url: apiUrl });
    store.write({ api_url: apiUrl, token: 'rpc_already_revoked' });
    expect((await cli(['logout'])).code).toBe(EXIT.ok);
    expect(store.read().token).toBeUndefined();
    expect((await cli(['whoami'])).code).toBe(EXIT.unauthenticated);
  });

  it('usage errors exit 2 with the usage line on stderr and nothing on stdout', async () => {
    const r = await cli(['projects', 'create', '--nope']);
    expect(r.code).toBe(EXIT.usage);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain(
      'relayplane: unknown option --nope\nusage: relayplane projects create <name> [flags]\n',
    );
    expect((await cli(['--api-url', 'ftp://x', 'projects'])).code).toBe(EXIT.usage);
  });

  it('--help works for every command and lists the exit codes at the top level', async () => {
    for (const c of COMMANDS) {
      const r = await cli([...c.path, '--help']);
      expect(r.code, c.path.join(' ')).toBe(EXIT.ok);
      expect(r.stdout, c.path.join(' ')).toMatch(new RegExp(`^usage: relayplane ${c.path.join(' ')}`));
    }
    const viaHelp = await cli(['help', 'bots', 'keys', 'create']);
    expect(viaHelp.stdout).toMatch(/^usage: relayplane bots keys create <project_id> <bot_id>\n/);
    const top = await cli(['--help']);
    expect(top.stdout).toContain('7  device login denied or expired');
    expect(seen).toEqual([]);
  });
});
