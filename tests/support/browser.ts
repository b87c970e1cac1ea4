/**
 * A real browser for the console's tests: Debian's chromium driven by playwright-core
 * (Playwright's own browser download cannot work here; `.ci/run` installs chromium when
 * missing). Every page opened through `Browser.page()` records console errors, uncaught
 * exceptions and CSP violations (the `securitypolicyviolation` event, hooked before any page
 * script runs); `problems()` lists them, and the tests assert there are none.
 *
 * One kind of console message is not the page's: Chromium logs "Failed to load resource: the
 * server responded with a status of 4xx" for every API refusal a page fetches and handles (the
 * signed-out session probe's 401, a viewer's 403). Those are recorded as `refusals()` instead —
 * method, path and status of each API answer ≥ 400 — and each test asserts exactly which it
 * expected. A 5xx, or a failed load of anything but the JSON API (a script, a style), stays a problem.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import AxeBuilder from '@axe-core/playwright';
import { type BrowserContext, type Browser as Chromium, chromium, type Page } from 'playwright-core';

const CANDIDATES = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'];

export function chromiumPath(): string {
  const found = CANDIDATES.find((p): p is string => p !== undefined && existsSync(p));
  if (!found)
    throw new Error(
      "no chromium found: install Debian's chromium (apt-get install chromium) or set CHROMIUM_PATH",
    );
  return found;
}

export type Scheme = 'light' | 'dark';

export class Browser {
  readonly #chromium: Chromium;
  readonly #problems: string[] = [];
  readonly #refusals: string[] = [];
  readonly #refusedStatuses: number[] = [];
  readonly #consoleErrors: string[] = [];
  private constructor(chromium: Chromium) {
    this.#chromium = chromium;
  }

  static async launch(): Promise<Browser> {
    return new Browser(
      await chromium.launch({
        executablePath: chromiumPath(),
        args: ['--no-sandbox', '--disable-dev-shm-usage'],
      }),
    );
  }

  /** A fresh context (no cookies, empty cache) in a colour scheme and viewport. */
  async context(options: { scheme?: Scheme; width?: number; height?: number } = {}): Promise<BrowserContext> {
    const context = await this.#chromium.newContext({
      colorScheme: options.scheme ?? 'light',
      viewport: { width: options.width ?? 1280, height: options.height ?? 860 },
      timezoneId: 'Europe/Berlin',
    });
    await context.grantPermissions(['clipboard-read', 'clipboard-write']);
    await context.addInitScript(() => {
      // Fetches in flight and the last time one started or ended, for settled().
      const w = window as unknown as { __inflight: number; __lastFetch: number };
      w.__inflight = 0;
      w.__lastFetch = 0;
      const original = window.fetch.bind(window);
      window.fetch = (...args: Parameters<typeof fetch>) => {
        w.__inflight += 1;
        w.__lastFetch = performance.now();
        return original(...args).finally(() => {
          w.__inflight -= 1;
          w.__lastFetch = performance.now();
        });
      };
      document.addEventListener('securitypolicyviolation', (e) => {
        console.error(
          `CSP violation: ${e.violatedDirective} blocked ${e.blockedURI || 'inline'} (${e.sourceFile}:${e.lineNumber})`,
        );
      });
    });
    context.on('page', (page) => this.#watch(page));
    return context;
  }

  #watch(page: Page): void {
    page.on('response', (response) => {
      const { pathname } = new URL(response.url());
      if (response.status() >= 400 && response.status() < 500 && /^\/(admin|api|v1)\//.test(pathname)) {
        this.#refusedStatuses.push(response.status());
        this.#refusals.push(`${response.status()} ${response.request().method()} ${pathname}`);
      }
    });
    page.on('console', (message) => {
      if (message.type() === 'error')
        this.#consoleErrors.push(`console error on ${page.url()}: ${message.text()}`);
    });
    page.on('pageerror', (error) => this.#problems.push(`uncaught on ${page.url()}: ${error.message}`));
  }

  /**
   * Chromium's "Failed to load resource … status of 4xx" messages, each matched to one API refusal
   * recorded (the two events arrive in either order); what is left over is a problem.
   */
  #settle(): void {
    for (const text of this.#consoleErrors.splice(0)) {
      const status = /Failed to load resource: the server responded with a status of (\d{3})/.exec(text);
      const at = status ? this.#refusedStatuses.indexOf(Number(status[1])) : -1;
      if (at >= 0) this.#refusedStatuses.splice(at, 1);
      else this.#problems.push(text);
    }
  }

  /** API answers 400–499 the pages received (`<status> <method> <path>`) since the last call; cleared on read. */
  refusals(): string[] {
    this.#settle();
    return this.#refusals.splice(0);
  }

  /** Console errors (CSP violations among them) and uncaught exceptions seen so far; cleared on read. */
  problems(): string[] {
    this.#settle();
    return this.#problems.splice(0);
  }

  async close(): Promise<void> {
    await this.#chromium.close();
  }
}

/**
 * Waits until the page has had no fetch in flight for 200 ms (its data loaded, and a fetch an
 * effect starts after rendering the first answer had time to begin): quicker than Playwright's
 * `networkidle`, which waits for half a second of network silence.
 */
export async function settled(page: Page): Promise<void> {
  await page.waitForFunction(
    () => {
      const w = window as unknown as { __inflight: number; __lastFetch: number };
      return w.__inflight === 0 && performance.now() - w.__lastFetch > 200;
    },
    null,
    { polling: 50, timeout: 30_000 },
  );
}

/** axe-core's serious and critical violations of WCAG 2.2 A/AA on the page as it is now. */
export async function accessibilityViolations(page: Page): Promise<string[]> {
  const result = await new AxeBuilder({ page })
    .withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa'])
    .analyze();
  return result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map(
      (v) =>
        `${v.id} (${v.impact}) on ${page.url()}: ${v.help} — ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`,
    );
}

/** Where screenshots go: `CONSOLE_SCREENSHOTS_DIR` (docs/console/ when refreshing the docs), else tests/.logs/. */
export function screenshotDir(): string {
  const dir =
    process.env.CONSOLE_SCREENSHOTS_DIR ?? join(import.meta.dirname, '..', '.logs', 'console-screenshots');
  mkdirSync(dir, { recursive: true });
  return dir;
}
