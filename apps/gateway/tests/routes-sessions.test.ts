/**
 * Sessions a user controls, through the gateway's HTTP surface with the real services behind
 * it: the list, ending one or all other sessions (401 on every gateway at once), the password
 * change, CSRF with the session cookie, machine tokens refused, and the approval page telling
 * where and when a device asked.
 */
import { testLogger } from '@relayplane/testing/logger';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../cli/src/errors.ts';
import { csrfTokenFor } from '../src/plugins/csrf.ts';
import { type TestApp, testApp } from './support/app.ts';
import { inProcessCli } from './support/cli.ts';
import { type Stack, startStack } from './support/stack.ts';
import { PASSWORD, tenant } from './support/tenant.ts';

const INVALID_TOKEN = { error: 'invalid or expired token' };
const CSRF_REFUSED = { error: 'missing or invalid CSRF token' };
const NOT_FOUND = { error: 'session not found' };
const MACHINE_REFUSED = {
  error: 'this operation needs a user session; bot tokens and identity tokens are not accepted',
};
const NEW_PASSWORD = 'a brand new long password';
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const SESSION_KEYS = [
  'created_at',
  'current',
  'expires_at',
  'id',
  'ip',
  'kind',
  'last_used_at',
  'user_agent',
];

describe('sessions a user controls, over HTTP', () => {
  let stack: Stack;
  /** A second gateway on the same services: every gateway must refuse a revoked token. */
  let secondGateway: TestApp;
  let second: FastifyInstance;
  let seq = 0;

  beforeAll(async () => {
    stack = await startStack('gw_sessions');
    secondGateway = await testApp({
      config: { bodyLimitBytes: 64 * 1024, jwksCacheMs: 10_000, trustedProxies: [] },
      clients: stack.clients,
      logger: testLogger('gateway-2'),
    });
    second = secondGateway.app;
  });
  afterAll(async () => {
    await secondGateway?.close();
    await stack?.close();
  });

  const user = () => tenant(stack, { email: `sessions${++seq}@example.test`, name: `sessions ${seq}` });

  /** A JSON login from `userAgent` at `ip`: the bearer token and the cookie it also sets. */
  async function login(email: string, userAgent: string, ip = '127.0.0.1', password = PASSWORD) {
    const res = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/auth/login',
      payload: { email, password },
      headers: { 'user-agent': userAgent },
      remoteAddress: ip,
    });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json<{ token: string; csrf_token: string; session: { id: string } }>();
    return {
      id: body.session.id,
      token: body.token,
      bearer: { authorization: `Bearer ${body.token}` },
      cookie: { cookie: `rp_session=${body.token}` },
      csrf: { 'x-csrf-token': body.csrf_token },
    };
  }

  const whoami = (app: FastifyInstance, headers: Record<string, string>) =>
    app.inject({ method: 'GET', url: '/admin/v1/auth/session', headers });

  async function listed(headers: Record<string, string>) {
    const res = await stack.app.inject({ method: 'GET', url: '/admin/v1/auth/sessions', headers });
    expect(res.statusCode, res.body).toBe(200);
    return res.json<{ sessions: Record<string, unknown>[] }>().sessions;
  }

  /** Polls both gateways with `headers` until each answers 401; answers how long that took. */
  async function refusedEverywhereWithin(headers: Record<string, string>, limitMs: number): Promise<number> {
    const started = performance.now();
    for (const app of [stack.app, second]) {
      for (;;) {
        const res = await whoami(app, headers);
        if (res.statusCode === 401) {
          expect(res.json()).toEqual(INVALID_TOKEN);
          break;
        }
        expect(res.statusCode).toBe(200);
        if (performance.now() - started > limitMs) throw new Error(`still accepted after ${limitMs} ms`);
        await new Promise((r) => setTimeout(r, 20));
      }
    }
    return performance.now() - started;
  }

  it('GET /admin/v1/auth/sessions lists kind, origin, times and the current one, never a token', async () => {
    const owner = await user();
    const laptop = await login(owner.email, 'Mozilla/5.0 (laptop)', '203.0.113.7');
    // The cookie authenticating it: a browser session.
    expect((await whoami(stack.app, laptop.cookie)).statusCode).toBe(200);
    const script = await login(owner.email, 'curl/8.5.0', '198.51.100.9');
    expect((await whoami(stack.app, script.bearer)).statusCode).toBe(200);

    const res = await stack.app.inject({
      method: 'GET',
      url: '/admin/v1/auth/sessions',
      headers: laptop.cookie,
    });
    expect(res.statusCode).toBe(200);
    expect(Object.keys(res.json())).toEqual(['sessions', 'next_cursor']);
    expect(res.json().next_cursor).toBeNull();
    const sessions = res.json<{ sessions: Record<string, unknown>[] }>().sessions;
    for (const s of sessions) expect(Object.keys(s).sort()).toEqual(SESSION_KEYS);
    // Newest first: the script's, the laptop's, the one tenant() logged in with.
    expect(sessions.map((s) => [s.id, s.kind, s.ip, s.user_agent, s.current])).toEqual([
      [script.id, 'bearer', '198.51.100.9', 'curl/8.5.0', false],
      [laptop.id, 'browser', '203.0.113.7', 'Mozilla/5.0 (laptop)', true],
      [expect.stringMatching(/^ses_[0-9a-z]{20}$/), 'bearer', '127.0.0.1', 'lightMyRequest', false],
    ]);
    const laptopRow = sessions[1] ?? {};
    expect(Date.parse(String(laptopRow.last_used_at))).toBeGreaterThanOrEqual(
      Date.parse(String(laptopRow.created_at)),
    );
    expect(Date.parse(String(laptopRow.expires_at))).toBeGreaterThan(Date.now());
    for (const token of [owner.token, laptop.token, script.token]) expect(res.body).not.toContain(token);
    // The same list over the bearer: only `current` moves.
    expect((await listed(script.bearer)).map((s) => s.current)).toEqual([true, false, false]);
  });

  it('DELETE /admin/v1/auth/sessions/{id}: 204, and the token answers 401 on both gateways within 1 s', async () => {
    const owner = await user();
    const phone = await login(owner.email, 'phone');
    expect((await whoami(second, phone.bearer)).statusCode).toBe(200);
    const res = await stack.app.inject({
      method: 'DELETE',
      url: `/admin/v1/auth/sessions/${phone.id}`,
      headers: owner.auth,
    });
    expect(res.statusCode).toBe(204);
    expect(res.body).toBe('');
    expect(await refusedEverywhereWithin(phone.bearer, 1_000)).toBeLessThan(1_000);
    // The caller's own session still works, on both.
    expect((await whoami(second, owner.auth)).statusCode).toBe(200);
    expect((await listed(owner.auth)).map((s) => s.id)).not.toContain(phone.id);
    const again = await stack.app.inject({
      method: 'DELETE',
      url: `/admin/v1/auth/sessions/${phone.id}`,
      headers: owner.auth,
    });
    expect({ status: again.statusCode, body: again.json() }).toEqual({ status: 404, body: NOT_FOUND });
  });

  it("another user's session answers 404 like an unknown one, and keeps working", async () => {
    const alice = await user();
    const bob = await user();
    const bobs = (await listed(bob.auth))[0]?.id as string;
    for (const id of [bobs, 'ses_00000000000000000000', 'whatever']) {
      const res = await stack.app.inject({
        method: 'DELETE',
        url: `/admin/v1/auth/sessions/${id}`,
        headers: alice.auth,
      });
      expect({ id, status: res.statusCode, body: res.json() }).toEqual({ id, status: 404, body: NOT_FOUND });
    }
    expect((await whoami(stack.app, bob.auth)).statusCode).toBe(200);
  });

  it('POST /admin/v1/auth/sessions/revoke-others: 200 {"revoked": N}; the others answer 401 on both gateways', async () => {
    const owner = await user();
    const others = [await login(owner.email, 'a'), await login(owner.email, 'b')];
    const res = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/auth/sessions/revoke-others',
      headers: owner.auth,
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ revoked: 2, sessions: 2, device_grants: 0, identity_tokens: 0 });
    for (const o of others) expect(await refusedEverywhereWithin(o.bearer, 1_000)).toBeLessThan(1_000);
    expect((await listed(owner.auth)).map((s) => s.current)).toEqual([true]);
    const none = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/auth/sessions/revoke-others',
      headers: owner.auth,
    });
    expect(none.json()).toEqual({ revoked: 0, sessions: 0, device_grants: 0, identity_tokens: 0 });
  });

  it('POST /admin/v1/auth/password: 200 with what ended, the other sessions end, the new password logs in', async () => {
    const owner = await user();
    const other = await login(owner.email, 'other');
    const res = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/auth/password',
      headers: owner.auth,
      payload: { current_password: PASSWORD, new_password: NEW_PASSWORD },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ sessions: 1, device_grants: 0, identity_tokens: 0 });
    expect(await refusedEverywhereWithin(other.bearer, 1_000)).toBeLessThan(1_000);
    expect((await whoami(second, owner.auth)).statusCode).toBe(200);
    const old = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/auth/login',
      payload: { email: owner.email, password: PASSWORD },
    });
    expect({ status: old.statusCode, body: old.json() }).toEqual({
      status: 401,
      body: { error: 'invalid email or password' },
    });
    await login(owner.email, 'new', '127.0.0.1', NEW_PASSWORD);
  });

  it('a wrong current password answers 403 and changes nothing; bad new passwords and bodies 400', async () => {
    const owner = await user();
    const other = await login(owner.email, 'other');
    const change = (payload: unknown) =>
      stack.app.inject({
        method: 'POST',
        url: '/admin/v1/auth/password',
        headers: owner.auth,
        payload: payload as object,
      });
    const wrong = await change({ current_password: 'not my password', new_password: NEW_PASSWORD });
    expect({ status: wrong.statusCode, body: wrong.json() }).toEqual({
      status: 403,
      body: { error: 'the current password is wrong' },
    });
    const short = await change({ current_password: PASSWORD, new_password: 'short' });
    expect(short.statusCode).toBe(400);
    expect(short.json().error).toMatch(/12/);
    const same = await change({ current_password: PASSWORD, new_password: PASSWORD });
    expect({ status: same.statusCode, body: same.json() }).toEqual({
      status: 400,
      body: { error: 'the new password must differ from the current one' },
    });
    for (const payload of [{ new_password: NEW_PASSWORD }, { current_password: PASSWORD }, {}]) {
      const res = await change(payload);
      expect(res.statusCode).toBe(400);
      expect(Object.keys(res.json())).toEqual(['error']);
    }
    expect((await whoami(stack.app, other.bearer)).statusCode).toBe(200);
    await login(owner.email, 'still', '127.0.0.1', PASSWORD);
  });

  it('with the session cookie, every state change needs X-CSRF-Token; the list does not', async () => {
    const owner = await user();
    const browser = await login(owner.email, 'browser');
    const victim = await login(owner.email, 'victim');
    expect((await listed(browser.cookie)).length).toBe(3);
    const writes = [
      { method: 'DELETE' as const, url: `/admin/v1/auth/sessions/${victim.id}` },
      { method: 'POST' as const, url: '/admin/v1/auth/sessions/revoke-others' },
      {
        method: 'POST' as const,
        url: '/admin/v1/auth/password',
        payload: { current_password: PASSWORD, new_password: NEW_PASSWORD },
      },
    ];
    for (const w of writes) {
      for (const csrf of [
        {},
        { 'x-csrf-token': 'A'.repeat(43) },
        { 'x-csrf-token': victim.csrf['x-csrf-token'] },
      ]) {
        const res = await stack.app.inject({ ...w, headers: { ...browser.cookie, ...csrf } });
        expect({ url: w.url, status: res.statusCode, body: res.json() }).toEqual({
          url: w.url,
          status: 403,
          body: CSRF_REFUSED,
        });
      }
    }
    // None of them did anything.
    expect((await whoami(stack.app, victim.bearer)).statusCode).toBe(200);
    const revoked = await stack.app.inject({
      method: 'DELETE',
      url: `/admin/v1/auth/sessions/${victim.id}`,
      headers: { ...browser.cookie, ...browser.csrf },
    });
    expect(revoked.statusCode).toBe(204);
    expect((await whoami(second, victim.bearer)).statusCode).toBe(401);
    expect(csrfTokenFor(browser.token)).toBe(browser.csrf['x-csrf-token']);
  });

  it('ending the current session with its cookie is a logout: the cookie is cleared', async () => {
    const owner = await user();
    const browser = await login(owner.email, 'browser');
    const res = await stack.app.inject({
      method: 'DELETE',
      url: `/admin/v1/auth/sessions/${browser.id}`,
      headers: { ...browser.cookie, ...browser.csrf },
    });
    expect(res.statusCode).toBe(204);
    expect(String(res.headers['set-cookie'])).toMatch(/^rp_session=; Max-Age=0;/);
    expect((await whoami(stack.app, browser.cookie)).statusCode).toBe(401);
  });

  it('bot and identity tokens are refused with 403; no credentials with 401', async () => {
    const owner = await user();
    const project = await owner.project('bots-here');
    const bot = await stack.app.inject({
      method: 'POST',
      url: `/admin/v1/projects/${project}/bots`,
      headers: owner.auth,
      payload: { name: 'deployer' },
    });
    expect(bot.statusCode).toBe(201);
    const botId = bot.json<{ id: string }>().id;
    const key = await stack.app.inject({
      method: 'POST',
      url: `/admin/v1/projects/${project}/bots/${botId}/keys`,
      headers: owner.auth,
    });
    expect(key.statusCode).toBe(201);
    const identity = await stack.app.inject({
      method: 'POST',
      url: `/v1/projects/${project}/identities/${botId}/tokens`,
      headers: owner.auth,
      payload: { scopes: ['projects:read'] },
    });
    expect(identity.statusCode).toBe(201);
    const machines = [
      { authorization: `Bearer ${key.json<{ token: string }>().token}` },
      { authorization: `Bearer ${identity.json<{ value: string }>().value}` },
    ];
    const calls = [
      { method: 'GET' as const, url: '/admin/v1/auth/sessions' },
      { method: 'DELETE' as const, url: '/admin/v1/auth/sessions/ses_00000000000000000000' },
      { method: 'POST' as const, url: '/admin/v1/auth/sessions/revoke-others' },
      {
        method: 'POST' as const,
        url: '/admin/v1/auth/password',
        payload: { current_password: PASSWORD, new_password: NEW_PASSWORD },
      },
    ];
    for (const call of calls) {
      for (const headers of machines) {
        const res = await stack.app.inject({ ...call, headers });
        expect({ url: call.url, status: res.statusCode, body: res.json() }).toEqual({
          url: call.url,
          status: 403,
          body: MACHINE_REFUSED,
        });
      }
      const anonymous = await stack.app.inject(call);
      expect(anonymous.statusCode).toBe(401);
    }
    expect((await whoami(stack.app, owner.auth)).statusCode).toBe(200);
  });

  it('the approval page shows when, from which IP and with which client the device asked, escaped, with a warning', async () => {
    const owner = await user();
    const hostileAgent = 'evil-cli/1.0 "><script>alert(1)</script>';
    const before = Date.now();
    const started = await stack.app.inject({
      method: 'POST',
      url: '/admin/v1/auth/device/code',
      headers: { ...FORM, 'user-agent': hostileAgent },
      remoteAddress: '198.51.100.23',
      payload: new URLSearchParams({ client_id: 'relayplane-cli' }).toString(),
    });
    expect(started.statusCode).toBe(200);
    const after = Date.now();
    const { user_code } = started.json<{ user_code: string }>();
    const browser = await login(owner.email, 'browser');
    const page = await stack.app.inject({
      method: 'GET',
      url: `/device?user_code=${user_code}`,
      headers: browser.cookie,
      remoteAddress: '203.0.113.50',
    });
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('from IP address <b>198.51.100.23</b>');
    expect(page.body).toContain(
      'by the client <b>evil-cli/1.0 &#34;&#62;&#60;script&#62;alert(1)&#60;/script&#62;</b>',
    );
    expect(page.body).not.toContain('<script>');
    const at = /<li>at <b>([^<]+)<\/b><\/li>/.exec(page.body)?.[1] ?? '';
    expect(at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(Date.parse(at)).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000 - 1000);
    expect(Date.parse(at)).toBeLessThanOrEqual(after + 1000);
    expect(page.body).toContain('<b>Approving gives that device your access</b>');
    expect(page.body).toContain(`you can do in tenant <b>sessions ${seq}</b>`);
  });
  describe('relayplane sessions (the CLI, in-process, against this gateway over HTTP)', () => {
    const cli = inProcessCli(() => stack.app, 'sessions');

    it('sessions list: --json is the whole list the API pages (its sessions field); the table marks the current session', async () => {
      const owner = await user();
      const other = await login(owner.email, 'curl/8.5.0', '198.51.100.9');
      const json = await cli(['sessions', 'list', '--json'], owner.token);
      expect(json.code).toBe(EXIT.ok);
      const api = await stack.app.inject({
        method: 'GET',
        url: '/admin/v1/auth/sessions',
        headers: owner.auth,
      });
      // The whole list, followed through next_cursor (one page here), in the API's items field.
      expect(api.json().next_cursor).toBeNull();
      expect(JSON.parse(json.stdout)).toEqual({ sessions: api.json().sessions });
      const human = await cli(['sessions', 'list'], owner.token);
      expect(human.code).toBe(EXIT.ok);
      const lines = human.stdout.trimEnd().split('\n');
      expect(lines[0]).toMatch(/^ID\s+KIND\s+CURRENT\s+CREATED\s+LAST USED\s+EXPIRES\s+IP\s+CLIENT$/);
      expect(lines[1]).toMatch(
        new RegExp(`^${other.id}\\s+bearer\\s+no\\s+.*198\\.51\\.100\\.9\\s+curl/8\\.5\\.0$`),
      );
      expect(lines[2]).toMatch(/^ses_[0-9a-z]{20}\s+bearer\s+yes\s/);
      expect(lines).toHaveLength(3);
      for (const out of [json.stdout, human.stdout]) {
        expect(out).not.toContain(owner.token);
        expect(out).not.toContain(other.token);
      }
    });

    it('sessions revoke <id> ends it (401 after); an id that is not yours exits 5', async () => {
      const owner = await user();
      const other = await login(owner.email, 'other');
      const res = await cli(['sessions', 'revoke', other.id], owner.token);
      expect(res).toEqual({ code: EXIT.ok, stdout: `Ended session ${other.id}.\n`, stderr: '' });
      expect((await whoami(second, other.bearer)).statusCode).toBe(401);
      const missing = await cli(['sessions', 'revoke', other.id], owner.token);
      expect(missing.code).toBe(EXIT.notFound);
      expect(missing.stdout).toBe('');
      expect(missing.stderr).toContain('session not found');
      const usage = await cli(['sessions', 'revoke'], owner.token);
      expect(usage.code).toBe(EXIT.usage);
    });

    it('sessions revoke-others ends the rest and keeps the CLI logged in', async () => {
      const owner = await user();
      const others = [await login(owner.email, 'a'), await login(owner.email, 'b')];
      const res = await cli(['sessions', 'revoke-others'], owner.token);
      expect(res).toEqual({
        code: EXIT.ok,
        stdout: 'Ended 2 other sessions; this one is still logged in.\n',
        stderr: '',
      });
      for (const o of others) expect((await whoami(second, o.bearer)).statusCode).toBe(401);
      expect(await cli(['sessions', 'revoke-others', '--json'], owner.token)).toEqual({
        code: EXIT.ok,
        stdout: '{\n  "revoked": 0,\n  "sessions": 0,\n  "device_grants": 0,\n  "identity_tokens": 0\n}\n',
        stderr: '',
      });
      expect((await whoami(stack.app, owner.auth)).statusCode).toBe(200);
    });

    it('sessions --help lists the three commands; a revoked token exits 3', async () => {
      const owner = await user();
      const help = await cli(['sessions', '--help'], owner.token);
      expect(help.code).toBe(EXIT.ok);
      expect(help.stdout).toMatch(/sessions list\s+List your login sessions and CLI tokens/);
      expect(help.stdout).toMatch(/sessions revoke <id>\s+End one of your sessions or CLI tokens/);
      expect(help.stdout).toMatch(
        /sessions revoke-others \[flags\]\s+Sign out everywhere: end every access but the session/,
      );
      const own = (await listed(owner.auth))[0]?.id as string;
      expect((await cli(['sessions', 'revoke', own], owner.token)).code).toBe(EXIT.ok);
      expect((await cli(['sessions', 'list'], owner.token)).code).toBe(EXIT.unauthenticated);
    });
  });
});
