/**
 * How the gateway serves the web console (src/console.ts, docs/console.md), through its HTTP
 * surface: a build directory of the console's shape, then none. No services are needed: the
 * console's files are static, the app's clients point nowhere and are never called.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { brotliCompressSync, brotliDecompressSync, gunzipSync, gzipSync } from 'node:zlib';
import { createLogger } from '@relayplane/shared/logger';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.ts';
import { closeClients, connectClients } from '../src/clients.ts';
import { CONSOLE_CSP, CONSOLE_PATHS } from '../src/console.ts';
import { GatewayContext } from '../src/context.ts';
import { DOCS_CSP } from '../src/plugins/security-headers.ts';

const INDEX =
  '<!doctype html><html><head><script type="module" src="/assets/index-AbC123.js"></script></head><body></body></html>';
const SCRIPT = `export const answer = ${JSON.stringify('x'.repeat(4096))};\n`;

async function gatewayWith(consoleDir: string) {
  const clients = connectClients(
    { admin: '127.0.0.1:1', issuer: '127.0.0.1:1', billing: '127.0.0.1:1' },
    100,
  );
  const ctx = await GatewayContext.fromConfig(
    { bodyLimitBytes: 65_536, jwksCacheMs: 1_000, consoleDir },
    { clients, logger: createLogger({ level: 'silent', service: 'gateway' }) },
  );
  const { app } = await buildApp(ctx);
  return {
    app,
    close: async () => {
      await app.close();
      await ctx.close();
      closeClients(clients);
    },
  };
}

describe('the web console, built', () => {
  const dir = mkdtempSync(join(tmpdir(), 'console-build-'));
  let app: FastifyInstance;
  let close: () => Promise<void>;

  beforeAll(async () => {
    mkdirSync(join(dir, 'assets'));
    writeFileSync(join(dir, 'index.html'), INDEX);
    writeFileSync(join(dir, 'assets', 'index-AbC123.js'), SCRIPT);
    writeFileSync(join(dir, 'assets', 'style-Xyz789.css'), 'body{margin:0}');
    // Compressed by the build (marked, to tell them from compression at runtime).
    writeFileSync(join(dir, 'assets', 'pre-Q1w2e3.js'), SCRIPT);
    writeFileSync(join(dir, 'assets', 'pre-Q1w2e3.js.br'), brotliCompressSync(`${SCRIPT}// br by the build`));
    writeFileSync(join(dir, 'assets', 'pre-Q1w2e3.js.gz'), gzipSync(`${SCRIPT}// gz by the build`));
    ({ app, close } = await gatewayWith(dir));
  });
  afterAll(async () => {
    await close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers index.html for every console URL, uncached, with the strict policy and no framing', async () => {
    for (const url of [
      '/',
      '/sign-in',
      '/activate?user_code=BCDF-GHJK',
      '/projects',
      '/projects/prj_1/api-keys',
      '/members',
      '/audit',
      '/account',
      '/billing',
      '/platform/relays',
    ]) {
      const res = await app.inject({ method: 'GET', url });
      expect(res.statusCode, url).toBe(200);
      expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(res.body).toBe(INDEX);
      expect(res.headers['content-security-policy']).toBe(CONSOLE_CSP);
      expect(res.headers['cache-control']).toBe('no-store');
      expect(res.headers['x-frame-options']).toBe('DENY');
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.headers['referrer-policy']).toBe('no-referrer');
    }
    expect(CONSOLE_CSP).toContain("script-src 'self'");
    expect(CONSOLE_CSP).toContain("frame-ancestors 'none'");
    expect(CONSOLE_CSP).not.toMatch(/unsafe-(inline|eval)/);
  });

  it('serves the hashed assets immutable, compressed as the client accepts, and 404 {error} for others', async () => {
    const plain = await app.inject({ method: 'GET', url: '/assets/index-AbC123.js' });
    expect(plain.statusCode).toBe(200);
    expect(plain.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(plain.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.body).toBe(SCRIPT);

    const br = await app.inject({
      method: 'GET',
      url: '/assets/index-AbC123.js',
      headers: { 'accept-encoding': 'gzip, br' },
    });
    expect(br.headers['content-encoding']).toBe('br');
    expect(br.headers.vary).toContain('accept-encoding');
    expect(brotliDecompressSync(br.rawPayload).toString()).toBe(SCRIPT);
    expect(br.rawPayload.length).toBeLessThan(SCRIPT.length / 10);

    const gz = await app.inject({
      method: 'GET',
      url: '/assets/index-AbC123.js',
      headers: { 'accept-encoding': 'gzip' },
    });
    expect(gz.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(gz.rawPayload).toString()).toBe(SCRIPT);

    const preBr = await app.inject({
      method: 'GET',
      url: '/assets/pre-Q1w2e3.js',
      headers: { 'accept-encoding': 'br' },
    });
    expect(brotliDecompressSync(preBr.rawPayload).toString()).toBe(`${SCRIPT}// br by the build`);
    const preGz = await app.inject({
      method: 'GET',
      url: '/assets/pre-Q1w2e3.js',
      headers: { 'accept-encoding': 'gzip' },
    });
    expect(gunzipSync(preGz.rawPayload).toString()).toBe(`${SCRIPT}// gz by the build`);
    // The compressed copies are not assets of their own.
    expect((await app.inject({ method: 'GET', url: '/assets/pre-Q1w2e3.js.br' })).statusCode).toBe(404);

    const css = await app.inject({ method: 'GET', url: '/assets/style-Xyz789.css' });
    expect(css.headers['content-type']).toBe('text/css; charset=utf-8');

    for (const url of ['/assets/nope.js', '/assets/..%2Findex.html', '/assets/index.html']) {
      const res = await app.inject({ method: 'GET', url });
      expect(res.statusCode, url).toBe(404);
      expect(res.json()).toEqual({ error: 'no such console asset' });
    }
  });

  it('leaves the API, /docs and the server-rendered pages where they were', async () => {
    const unknown = await app.inject({ method: 'GET', url: '/admin/v1/nope' });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.headers['content-type']).toContain('application/json');
    const docs = await app.inject({ method: 'GET', url: '/docs/' });
    expect(docs.headers['content-security-policy']).toBe(DOCS_CSP);
    const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json() as {
      paths: Record<string, unknown>;
    };
    for (const path of CONSOLE_PATHS) expect(Object.keys(doc.paths)).not.toContain(path);
    expect(Object.keys(doc.paths)).toContain('/device');
    // Not a console route: writes to a console URL are not answered with the page.
    const post = await app.inject({ method: 'POST', url: '/projects', payload: {} });
    expect(post.statusCode).toBe(404);
  });
});

describe('the web console, not built', () => {
  const dir = mkdtempSync(join(tmpdir(), 'console-none-'));
  let app: FastifyInstance;
  let close: () => Promise<void>;
  beforeAll(async () => {
    ({ app, close } = await gatewayWith(dir));
  });
  afterAll(async () => {
    await close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers its pages 503 {error} saying how to build it', async () => {
    const res = await app.inject({ method: 'GET', url: '/projects' });
    expect(res.statusCode).toBe(503);
    expect(res.json().error).toContain('pnpm --filter @relayplane/console build');
  });

  it("sends /activate (the device flow's verification_uri) to the server-rendered /device page, query kept", async () => {
    const res = await app.inject({ method: 'GET', url: '/activate?user_code=BCDF-GHJK' });
    expect(res.statusCode).toBe(302);
    expect(res.headers.location).toBe('/device?user_code=BCDF-GHJK');
  });
});
