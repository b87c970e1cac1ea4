/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/**
 * The web console in a real browser (Debian's chromium via playwright-core) against the real
 * embedded server, as `pnpm start` runs it (which builds the console when stale). Every test
 * ends with no console error, uncaught exception or CSP violation in any page it opened; the
 * page scan runs axe-core on every page in light and dark at 1280 and 360 px wide and writes
 * the screenshots docs/console.md shows (CONSOLE_SCREENSHOTS_DIR=docs/console to refresh them).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as OTPAuth from 'otpauth';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../support/api.ts';
import { accessibilityViolations, Browser, screenshotDir, settled } from '../support/browser.ts';
import { freePort, waitFor } from '../support/ports.ts';
import { type Proc, ROOT, startProcess } from '../support/processes.ts';

const OWNER = { email: 'console-owner@example.com', password: 'console-e2e-password-1234' };
const VIEWER = { email: 'console-viewer@example.com', password: 'console-viewer-password-1234' };
const CLI = join(ROOT, 'apps', 'cli', 'bin', 'relayplane.js');
const USER_CODE = /\b([BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4})\b/;
const KIB = 1024;

describe('the web console in chromium against the embedded server', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relayplane-console-'));
  const cliHome = mkdtempSync(join(tmpdir(), 'relayplane-console-cli-'));
  let proc: Proc;
  let base: string;
  let api: Api;
  let browser: Browser;
  let owner: BrowserContext;
  let page: Page;
  let projectId = '';
  let apiKey = '';
  let webhookId = '';
  const tokens = new Map<string, string>();
  const children = new Set<ChildProcess>();

  const url = (path: string) => `${base}${path}`;
  const heading = (p: Page) => p.locator('h1#page-title');

  async function signIn(p: Page, login: { email: string; password: string }, next = '/') {
    await p.goto(url(next));
    await p.waitForURL(/\/sign-in/);
    await p.getByLabel('Email').fill(login.email);
    await p.getByLabel('Password').fill(login.password);
    await p.getByRole('button', { name: 'Sign in' }).click();
  }

  /** A bearer session of `login` over the API (the test's own calls; the browser uses its cookie). */
  async function bearer(login: { email: string; password: string }) {
    let token = tokens.get(login.email);
    if (!token) {
      const res = await api.request('POST', '/admin/v1/auth/login', { body: login });
      expect(res.status).toBe(200);
      token = res.body.token as string;
      tokens.set(login.email, token);
    }
    return { authorization: `Bearer ${token}` };
  }

  /**
   * Milliseconds from the navigation's start until the page showed `title` as its heading and its
   * `button` was enabled: checked in the page on every animation frame, so the figure is the
   * page's own, not the test's polling.
   */
  async function interactiveAt(p: Page, title: string, button: string): Promise<number> {
    const at = await p.waitForFunction(
      ([t, b]) => {
        const h = document.querySelector('h1#page-title');
        const ready = [...document.querySelectorAll('button')].some(
          (e) => e.textContent === b && !e.disabled,
        );
        return h?.textContent === t && ready ? performance.now() : false;
      },
      [title, button] as const,
      { polling: 'raf', timeout: 30_000 },
    );
    return (await at.jsonValue()) as number;
  }

  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    proc = startProcess('console-embedded', 'apps/embedded/src/main.ts', {
      RELAYPLANE_DATA_DIR: dataDir,
      PORT: String(port),
      LOG_LEVEL: 'warn',
      RELAYPLANE_BOOTSTRAP_EMAIL: OWNER.email,
      RELAYPLANE_BOOTSTRAP_PASSWORD: OWNER.password,
      // Usage is aggregated by a job: every second here, so the chart has today's numbers.
      BILLING_USAGE_INTERVAL_MS: '1000',
      // The page scan shows a webhook endpoint on this machine.
      RELAYPLANE_WEBHOOKS_ALLOW_HTTP_LOOPBACK: 'true',
    });
    await waitFor(
      async () => proc.output().includes('Relayplane is running'),
      180_000,
      'the embedded banner',
      200,
    );
    api = await Api.connect(base);
    browser = await Browser.launch();
    owner = await browser.context();
    page = await owner.newPage();
  }, 240_000);

  afterEach(() => {
    expect(browser.problems()).toEqual([]);
  });

  afterAll(async () => {
    for (const child of children) child.kill('SIGTERM');
    await browser?.close();
    await proc?.stop();
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(cliHome, { recursive: true, force: true });
  });

  it('pnpm start prints the console URL first; / is served with a strict CSP and hashed, immutable assets', async () => {
    const urls = proc
      .output()
      .split('\n')
      .filter((line) => /https?:\/\//.test(line));
    expect(urls[0]).toContain(`Console        ${base}/`);
    const res = await fetch(url('/'));
    expect(res.status).toBe(200);
    const csp = res.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("style-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).not.toContain('unsafe-eval');
    expect(res.headers.get('cache-control')).toBe('no-store');
    const html = await res.text();
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(html).not.toMatch(/<style|style="/);
    const script = /<script[^>]*src="(\/assets\/[^"]+\.js)"/.exec(html)?.[1] ?? '';
    const asset = await fetch(url(script), { headers: { 'accept-encoding': 'br' } });
    expect(asset.status).toBe(200);
    expect(asset.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(asset.headers.get('content-encoding')).toBe('br');
  });

  it('budgets: first load of / ≤ 200 KiB of JavaScript as transferred, navigation to the first interactive page ≤ 1 s', async () => {
    // A started server and browser, as a user meets them: one page load in another context first
    // (the server's code paths and chromium's renderer warm), then every measured load has an empty cache.
    const warm = await browser.context();
    const w = await warm.newPage();
    await w.goto(url('/sign-in'));
    await w.getByRole('button', { name: 'Sign in' }).waitFor();
    await warm.close();
    expect(browser.refusals()).toEqual(['401 GET /admin/v1/auth/session']);

    // Signed out: / lands on the sign-in page (after the session probe's 401).
    const cold = await browser.context();
    const p = await cold.newPage();
    await p.goto(url('/'));
    const signInMs = await interactiveAt(p, 'Sign in to Relayplane', 'Sign in');
    await signIn(p, OWNER);
    await heading(p).filter({ hasText: 'Overview' }).waitFor();
    const cookies = await cold.cookies();
    await cold.close();
    expect(browser.refusals()).toEqual(['401 GET /admin/v1/auth/session', '401 GET /admin/v1/auth/session']);

    // Signed in, with an empty cache: every byte of the first load of / is transferred.
    const fresh = await browser.context();
    await fresh.addCookies(cookies);
    const q = await fresh.newPage();
    await q.goto(url('/'));
    const interactiveMs = await interactiveAt(q, 'Overview', 'Sign out');
    await q.waitForLoadState('networkidle');
    const js = await q.evaluate(() =>
      performance
        .getEntriesByType('resource')
        .map((e) => e as PerformanceResourceTiming)
        .filter((e) => new URL(e.name).pathname.endsWith('.js'))
        .reduce((sum, e) => sum + e.transferSize, 0),
    );
    await fresh.close();
    console.log(
      `console budgets: first load of / (signed in, overview with its chart): ${(js / KIB).toFixed(1)} KiB of JavaScript ` +
        `transferred (budget 200 KiB); navigation → overview interactive ${interactiveMs.toFixed(0)} ms, ` +
        `→ sign-in page ${signInMs.toFixed(0)} ms (budget 1000 ms)`,
    );
    expect(js).toBeGreaterThan(10 * KIB);
    expect(js).toBeLessThanOrEqual(200 * KIB);
    expect(interactiveMs).toBeLessThanOrEqual(1000);
    expect(signInMs).toBeLessThanOrEqual(1000);
  });

  it('signs in and lands on the page asked for; no token in the page storage, the cookie is HttpOnly', async () => {
    await signIn(page, OWNER, '/projects');
    await heading(page).filter({ hasText: 'Projects' }).waitFor();
    expect(new URL(page.url()).pathname).toBe('/projects');
    expect(await page.evaluate(() => localStorage.length + sessionStorage.length)).toBe(0);
    const cookies = await owner.cookies();
    expect(cookies.find((c) => c.name === 'rp_session')?.httpOnly).toBe(true);
    expect(cookies.find((c) => c.name === 'rp_session')?.sameSite).toBe('Strict');
    expect(browser.refusals()).toEqual(['401 GET /admin/v1/auth/session']);
  });

  it('creates a project and an API key; the key is shown once and gone after navigation', async () => {
    await page.getByLabel('Name', { exact: true }).fill('console-demo');
    await page.getByRole('button', { name: 'Create project' }).click();
    await page.getByRole('link', { name: 'console-demo' }).click();
    await heading(page).filter({ hasText: 'console-demo' }).waitFor();
    projectId = /\/projects\/([^/]+)\/api-keys$/.exec(new URL(page.url()).pathname)?.[1] ?? '';
    expect(projectId).toMatch(/^prj_/);

    await page.getByLabel('Name', { exact: true }).fill('web');
    await page.getByRole('button', { name: 'Create API key' }).click();
    const shown = page.getByRole('textbox', { name: /^API key/ });
    await shown.waitFor();
    apiKey = await shown.inputValue();
    expect(apiKey).toMatch(/^svc_live_/);
    await page.getByRole('button', { name: 'Copy', exact: true }).click();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(apiKey);

    // Away and back: the key is nowhere in the page any more.
    await page.getByRole('link', { name: 'Projects', exact: true }).click();
    await heading(page).filter({ hasText: 'Projects' }).waitFor();
    await page.goBack();
    await heading(page).filter({ hasText: 'console-demo' }).waitFor();
    await page.getByRole('table').first().waitFor();
    expect(await page.content()).not.toContain(apiKey);
    expect(await page.getByRole('textbox', { name: /^API key/ }).count()).toBe(0);
    expect(browser.refusals()).toEqual([]);
  });

  it('a credential issued with that key over HTTP is listed; revoking it there writes the audit event shown in the log', async () => {
    const issued = await api.request('POST', '/api/v1/credentials', {
      headers: { 'x-api-key': apiKey },
      body: { ttl_seconds: 600 },
    });
    expect(issued.status).toBe(201);
    const jti: string = issued.body.jti;
    await page.goto(url(`/projects/${projectId}/credentials`));
    const revoke = page.getByRole('button', { name: `Revoke credential ${jti}` });
    await revoke.waitFor();
    await revoke.click();
    const dialog = page.getByRole('dialog');
    await dialog.getByRole('button', { name: 'Revoke credential' }).click();
    await dialog.waitFor({ state: 'hidden' });
    await expect
      .poll(async () => page.getByRole('button', { name: `Revoke credential ${jti}` }).count())
      .toBe(0);

    const listed = await api.request('GET', `/admin/v1/projects/${projectId}/credentials?active=false`, {
      headers: await bearer(OWNER),
    });
    const revoked = listed.body.credentials.find((c: { jti: string }) => c.jti === jti);
    expect(revoked?.revoked_at).toEqual(expect.any(String));

    await page.getByRole('link', { name: 'Audit log' }).click();
    await heading(page).filter({ hasText: 'Audit log' }).waitFor();
    await page.getByText('credential.revoke', { exact: true }).first().waitFor();
    expect(browser.refusals()).toEqual([]);
  });

  it("the overview shows the gauge against the cap and the usage chart with today's numbers", async () => {
    const today = new Date().toISOString().slice(0, 10);
    await expect
      .poll(
        async () => {
          const usage = await api.request('GET', `/admin/v1/billing/usage?from=${today}&to=${today}`, {
            headers: await bearer(OWNER),
          });
          return (
            usage.body.days?.find((d: { project_id: string | null }) => d.project_id === null)
              ?.credentials_issued ?? 0
          );
        },
        { timeout: 30_000 },
      )
      .toBeGreaterThanOrEqual(1);
    await page.getByRole('link', { name: 'Overview' }).click();
    await heading(page).filter({ hasText: 'Overview' }).waitFor();
    const gauge = page.getByRole('img', { name: /of \d+/ });
    await gauge.waitFor();
    await page.locator('.uplot canvas').first().waitFor();
    await page
      .locator('summary')
      .filter({ hasText: /numbers|table|data/i })
      .first()
      .click();
    const row = page.getByRole('row').filter({ hasText: today });
    await row.waitFor();
    const cells = await row.getByRole('cell').allTextContents();
    expect(Number(cells[1])).toBeGreaterThanOrEqual(1);
    await page.screenshot({ path: join(screenshotDir(), 'overview-light.png'), fullPage: true });
    expect(browser.refusals()).toEqual([]);
  });

  it('approves a device login started by the real CLI binary on the /activate page it prints', async () => {
    const login = spawn(process.execPath, [CLI, 'login'], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: cliHome,
        XDG_CONFIG_HOME: cliHome,
        RELAYPLANE_API_URL: base,
        NO_COLOR: '1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.add(login);
    let out = '';
    let err = '';
    login.stdout?.on('data', (c: Buffer) => {
      out += c.toString();
    });
    login.stderr?.on('data', (c: Buffer) => {
      err += c.toString();
    });
    const exited = new Promise<number | null>((resolve) => login.once('close', resolve));
    await waitFor(
      async () => USER_CODE.test(err) && err.includes('/activate?user_code='),
      30_000,
      "the CLI's code and URL",
    );
    const complete = /(https?:\/\/\S+\/activate\?user_code=\S+?)\)?\s/.exec(err)?.[1] ?? '';
    const userCode = USER_CODE.exec(err)?.[1] ?? '';
    expect(complete).toContain(`${base}/activate?user_code=`);
    await page.goto(complete);
    await expect.poll(() => page.getByLabel('Code shown by the CLI').inputValue()).toBe(userCode);
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.getByText(/^Approved: /).waitFor();
    expect(await exited).toBe(0);
    children.delete(login);
    expect(out).toContain(`Logged in as ${OWNER.email}`);
    expect(browser.refusals()).toEqual([]);
  });

  it("a member without permission sees the API's 403 text; a member of two tenants switches between them", async () => {
    const signup = await api.request('POST', '/admin/v1/auth/signup', {
      body: { ...VIEWER, tenant_name: 'viewer-home' },
    });
    expect(signup.status).toBe(201);
    const added = await api.request('POST', '/admin/v1/members', {
      headers: await bearer(OWNER),
      body: { email: VIEWER.email, role: 'viewer' },
    });
    expect(added.status).toBe(201);
    const ownerTenant = (await api.request('GET', '/admin/v1/auth/session', { headers: await bearer(OWNER) }))
      .body.tenant;

    // What the API answers the viewer in the owner's tenant: the text the page must show.
    const viewer = await bearer(VIEWER);
    expect(
      (
        await api.request('POST', '/admin/v1/auth/session/tenant', {
          headers: viewer,
          body: { tenant_id: ownerTenant.id },
        })
      ).status,
    ).toBe(200);
    const refused = await api.request('GET', `/admin/v1/projects/${projectId}/webhooks`, { headers: viewer });
    expect(refused.status).toBe(403);

    const context = await browser.context();
    const v = await context.newPage();
    await signIn(v, VIEWER);
    await heading(v).filter({ hasText: 'Overview' }).waitFor();
    const switcher = v.getByLabel('Tenant');
    await switcher.selectOption(ownerTenant.id);
    await expect.poll(async () => (await v.getByText(`${VIEWER.email} · viewer`).count()) > 0).toBe(true);
    await v.goto(url(`/projects/${projectId}/webhooks`));
    await v.getByRole('alert').filter({ hasText: refused.body.error }).waitFor();
    await v.screenshot({ path: join(screenshotDir(), 'viewer-403-light.png') });
    await context.close();
    const refusals = browser.refusals();
    expect(refusals).toContain(`403 GET /admin/v1/projects/${projectId}/webhooks`);
    for (const r of refusals) expect(r).toMatch(/^(401 GET \/admin\/v1\/auth\/session|403 GET )/);
  });

  it('enrols MFA with a code computed by otpauth from the page, gets new recovery codes, then signs in again with the second step', async () => {
    await page.goto(url('/account'));
    await page.getByRole('button', { name: 'Set up an authenticator app' }).click();
    await page.getByRole('img', { name: 'QR code for your authenticator app' }).waitFor();
    const secret = (await page.getByTestId('totp-secret').textContent())?.replace(/\s+/g, '') ?? '';
    const totp = new OTPAuth.TOTP({
      secret: OTPAuth.Secret.fromBase32(secret),
      digits: 6,
      period: 30,
      algorithm: 'SHA1',
    });
    await page.getByLabel('Code from your authenticator app').fill(totp.generate());
    await page.getByRole('button', { name: 'Turn on' }).click();
    const codes = page.getByTestId('recovery-codes');
    await codes.waitFor();
    const recovery = (await codes.locator('li').allTextContents()).map((c) => c.trim());
    expect(recovery.length).toBeGreaterThanOrEqual(8);
    // Away and back: the recovery codes are gone.
    await page.getByRole('link', { name: 'Overview' }).click();
    await heading(page).filter({ hasText: 'Overview' }).waitFor();
    await page.getByRole('link', { name: 'Account' }).click();
    await heading(page).filter({ hasText: 'Account' }).waitFor();
    expect(await page.content()).not.toContain(recovery[0]);

    // New recovery codes, proven by one of the first ones: ten others, shown once.
    await page.getByRole('button', { name: 'New recovery codes' }).click();
    const renew = page.getByRole('dialog', { name: 'Get new recovery codes?' });
    await renew.getByLabel('Code or recovery code').fill(recovery[0] ?? '');
    await renew.getByRole('button', { name: 'Get new codes' }).click();
    await codes.waitFor();
    const renewed = (await codes.locator('li').allTextContents()).map((c) => c.trim());
    expect(renewed).toHaveLength(10);
    expect(renewed.filter((c) => recovery.includes(c))).toEqual([]);
    await page.getByRole('button', { name: 'I have saved them' }).click();
    await codes.waitFor({ state: 'detached' });
    expect(await page.content()).not.toContain(renewed[0]);

    const context = await browser.context();
    const again = await context.newPage();
    await signIn(again, OWNER);
    const code = again.getByLabel('Code', { exact: true });
    await code.waitFor();
    // The next time step: the enrolment used this one (each step is accepted once).
    await code.fill(totp.generate({ timestamp: Date.now() + 30_000 }));
    await again.getByRole('button', { name: 'Verify' }).click();
    await heading(again).filter({ hasText: 'Overview' }).waitFor();
    await context.close();
    expect(browser.refusals()).toEqual(['401 GET /admin/v1/auth/session', '401 POST /admin/v1/auth/login']);
  });

  /** Every page of the console, once the project and its webhook exist. */
  async function everyPage(): Promise<string[]> {
    if (!webhookId) {
      const webhook = await api.request('POST', `/admin/v1/projects/${projectId}/webhooks`, {
        headers: await bearer(OWNER),
        body: {
          url: 'http://127.0.0.1:9/hook',
          events: ['session.started', 'session.ended'],
          description: 'page scan',
        },
      });
      expect(webhook.status).toBe(201);
      webhookId = webhook.body.webhook.id;
    }
    return [
      '/',
      '/projects',
      ...['api-keys', 'credentials', 'sessions', 'bots', 'identity-tokens', 'allowlist', 'webhooks'].map(
        (tab) => `/projects/${projectId}/${tab}`,
      ),
      `/projects/${projectId}/webhooks/${webhookId}`,
      '/members',
      '/audit',
      '/account',
      '/billing',
      '/platform/relays',
      '/platform/signing-keys',
      '/platform/tenants',
      '/activate',
    ];
  }

  const SHOTS = [
    '/',
    'api-keys',
    'credentials',
    'webhooks',
    '/audit',
    '/account',
    '/billing',
    '/platform/signing-keys',
  ];
  const shotName = (path: string) =>
    path === '/'
      ? 'overview'
      : path
          .replace(/^\/projects\/[^/]+\//, 'project-')
          .replace(/^\//, '')
          .replace(/\//g, '-');

  // axe in both schemes at 1280 px and in light at 360 px (the layout changes with the width, the
  // colours with the scheme); at 360 px in dark, the layout check only.
  for (const [scheme, width, axe] of [
    ['light', 1280, true],
    ['dark', 1280, true],
    ['light', 360, true],
    ['dark', 360, false],
  ] as const) {
    it(`every page in ${scheme} at ${width} px: ${axe ? 'no serious or critical axe violation, ' : ''}nothing wider than the window`, async () => {
      const pages = await everyPage();
      const context = await browser.context({ scheme, width, height: width === 360 ? 780 : 860 });
      await context.addCookies(await owner.cookies());
      const p = await context.newPage();
      const violations: string[] = [];
      for (const path of pages) {
        await p.goto(url(path));
        await heading(p).waitFor();
        await settled(p);
        if (axe) violations.push(...(await accessibilityViolations(p)));
        // Tables scroll inside their own box; the page itself never scrolls sideways.
        const overflow = await p.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
        if (overflow > 1)
          violations.push(`${path} at ${width} px (${scheme}) is ${overflow} px wider than the window`);
        const shot = SHOTS.some((s) => path === s || path.endsWith(`/${s}`));
        if (shot && width === 1280) {
          await p.screenshot({
            path: join(screenshotDir(), `${shotName(path)}-${scheme}.png`),
            fullPage: true,
          });
        }
        if (path === '/' && width === 360)
          await p.screenshot({ path: join(screenshotDir(), `overview-360-${scheme}.png`) });
      }
      await context.close();
      if (width === 1280) {
        // Signed out: the sign-in page.
        const out = await browser.context({ scheme, width });
        const q = await out.newPage();
        await q.goto(url('/sign-in'));
        await q.getByRole('button', { name: 'Sign in' }).waitFor();
        violations.push(...(await accessibilityViolations(q)));
        await q.screenshot({ path: join(screenshotDir(), `sign-in-${scheme}.png`) });
        await out.close();
      }
      expect(violations).toEqual([]);
      expect(browser.refusals()).toEqual(width === 1280 ? ['401 GET /admin/v1/auth/session'] : []);
    }, 180_000);
  }
});
