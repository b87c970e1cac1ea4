/**
 * The images, without a Docker engine: each app's `pnpm deploy --prod` bundle, made in a clean
 * directory outside the repo with production dependencies only, is started with exactly the
 * CMD of its Dockerfile target (cwd = the bundle, as WORKDIR /app; env = the image's ENV plus
 * what the app needs) after its migrations, and must answer its health check. Needs
 * TEST_DATABASE_URL and TEST_REDIS_URL; fails without them.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminService } from '../../packages/proto/src/gen/relayplane/admin/v1/admin_pb.js';
import { BillingService } from '../../packages/proto/src/gen/relayplane/billing/v1/billing_pb.js';
import { IssuerService } from '../../packages/proto/src/gen/relayplane/issuer/v1/issuer_pb.js';
import {
  APPS,
  type App,
  buildApps,
  bundleContents,
  DEPLOY_FLAGS,
  deployBundle,
  dockerfilePath,
  readManifest,
  run,
  workspaceProductionClosure,
} from './support/bundle-build.ts';
import { readImageSpec } from './support/bundle-dockerfile.ts';
import {
  type BundleProcess,
  createScratch,
  freePort,
  grpcHealth,
  type Scratch,
  ServingStatus,
  startBundle,
  waitUntil,
} from './support/bundle-runtime.ts';

const GRPC_SERVICES: Record<Exclude<App, 'gateway'>, string> = {
  issuer: IssuerService.typeName,
  admin: AdminService.typeName,
  billing: BillingService.typeName,
};
/** Started in this order: admin calls billing, the gateway calls all three. */
const START_ORDER = ['billing', 'issuer', 'admin', 'gateway'] as const satisfies readonly App[];
/** Never in a production bundle, whatever depends on what. */
const DEV_ONLY = ['vitest', 'typescript', '@biomejs/biome', 'turbo', 'node', '@relayplane/testing'];

function log(message: string): void {
  console.log(`[bundles] ${message}`);
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

function requiredEnv(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: the bundle tests need it (they fail rather than skip)`);
  return value;
}

/** host:port with the host the image sets (or 127.0.0.1) and a free port. */
function withPort(address: string | undefined, port: number): string {
  const host = address?.replace(/:\d+$/, '') || '127.0.0.1';
  return `${host}:${port}`;
}

describe('production bundles start with their image CMD', () => {
  let root: string | undefined;
  let scratch: Scratch | undefined;
  const bundles = new Map<App, string>();
  const procs: BundleProcess[] = [];
  const ports = new Map<App, number>();
  /** Set when the setup failed: every test then fails with it (none is skipped). */
  let setupError: unknown;
  const ready = () => {
    if (setupError !== undefined) throw setupError;
  };

  beforeAll(async () => {
    try {
      await setUp();
    } catch (err) {
      setupError = err;
    }
  }, 240_000);

  async function setUp(): Promise<void> {
    const databaseUrl = requiredEnv('TEST_DATABASE_URL');
    const redisUrl = requiredEnv('TEST_REDIS_URL');
    expect(
      Number(process.versions.node.split('.')[0]),
      'run vitest on the repo Node 24',
    ).toBeGreaterThanOrEqual(24);

    let start = Date.now();
    await buildApps(APPS);
    log(
      `workspace build (pnpm run build of ${APPS.join(', ')} and their packages): ${seconds(Date.now() - start)}`,
    );

    root = mkdtempSync(join(tmpdir(), 'relayplane-bundles-'));
    for (const app of APPS) {
      const dir = join(root, app);
      start = Date.now();
      await deployBundle(app, dir);
      bundles.set(app, dir);
      log(`${app}: bundle (pnpm deploy ${DEPLOY_FLAGS.join(' ')}) made in ${seconds(Date.now() - start)}`);
    }
    for (const app of APPS) ports.set(app, await freePort());
    scratch = await createScratch(databaseUrl, redisUrl);
  }

  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop()));
    await scratch?.dispose();
    if (root) rmSync(root, { recursive: true, force: true });
  }, 60_000);

  it('the Dockerfile makes the bundles the same way', () => {
    ready();
    const dockerfile = readFileSync(dockerfilePath, 'utf8');
    expect(dockerfile).toContain(`deploy ${DEPLOY_FLAGS.join(' ')}`);
  });

  /** The command and environment the image of `app` runs, with `node` the repo's Node 24. */
  function imageCommand(app: App): { argv: string[]; env: Record<string, string> } {
    const spec = readImageSpec(dockerfilePath, app);
    expect(spec.base, `${app} base image`).toMatch(/^node:24-/);
    expect(spec.entrypoint ?? [], `${app} ENTRYPOINT`).toEqual([]);
    // A non-root numeric user, and the bundle in the WORKDIR.
    expect(spec.user, `${app} USER`).toMatch(/^[1-9]\d*:[1-9]\d*$/);
    expect(spec.workdir).toBe('/app');
    expect(spec.copies.some((c) => c.endsWith(` /out/${app} /app`))).toBe(true);
    expect(spec.env.NODE_ENV).toBe('production');
    const cmd = spec.cmd ?? [];
    expect(cmd[0], `${app} CMD runs node`).toBe('node');
    return { argv: [process.execPath, ...cmd.slice(1)], env: spec.env };
  }

  function appEnv(app: App, imageEnv: Record<string, string>): Record<string, string> {
    if (!scratch) throw new Error('no scratch storage');
    const address = (a: App) => `127.0.0.1:${ports.get(a)}`;
    const common = {
      PATH: process.env.PATH ?? '',
      ...imageEnv,
      RELAYPLANE_REDIS_PREFIX: scratch.redisPrefix,
    };
    const listen = (name: string) => ({ [name]: withPort(imageEnv[name], ports.get(app) ?? 0) });
    switch (app) {
      case 'billing':
        return { ...common, ...listen('BILLING_LISTEN_ADDRESS'), BILLING_DATABASE_URL: scratch.databaseUrl };
      case 'issuer':
        return {
          ...common,
          ...listen('ISSUER_LISTEN_ADDRESS'),
          ISSUER_DATABASE_URL: scratch.databaseUrl,
          ISSUER_REDIS_URL: scratch.redisUrl,
          RELAYPLANE_KEK: randomBytes(32).toString('base64'),
        };
      case 'admin':
        return {
          ...common,
          ...listen('ADMIN_LISTEN_ADDRESS'),
          ADMIN_DATABASE_URL: scratch.databaseUrl,
          ADMIN_REDIS_URL: scratch.redisUrl,
          ADMIN_BILLING_ADDRESS: address('billing'),
          RELAYPLANE_KEK: randomBytes(32).toString('base64'),
        };
      case 'gateway':
        return {
          ...common,
          PORT: String(ports.get('gateway')),
          GATEWAY_REDIS_URL: scratch.redisUrl,
          GATEWAY_ADMIN_ADDRESS: address('admin'),
          GATEWAY_ISSUER_ADDRESS: address('issuer'),
          GATEWAY_BILLING_ADDRESS: address('billing'),
        };
    }
  }

  for (const app of START_ORDER) {
    it(`${app}: production dependencies only, migrates, serves with the image CMD`, async () => {
      ready();
      const dir = bundles.get(app);
      if (!dir) throw new Error(`no ${app} bundle`);

      // Production dependencies only: the app's own at the top, nothing only a dev needs.
      const manifest = readManifest(join(dir, 'package.json'));
      const contents = bundleContents(dir);
      expect(contents.topLevel).toEqual(Object.keys(manifest.dependencies ?? {}).sort());
      const workspace = [...contents.installed].filter((n) => n.startsWith('@relayplane/')).sort();
      expect(workspace).toEqual(workspaceProductionClosure(app).filter((n) => n !== `@relayplane/${app}`));
      for (const name of DEV_ONLY)
        expect(contents.installed.has(name), `${name} in the ${app} bundle`).toBe(false);
      // @types/* only where a production package declares it (protobufjs depends on @types/node).
      for (const name of contents.installed) {
        if (name.startsWith('@types/'))
          expect(contents.requiredByInstalled.has(name), `${name} in the ${app} bundle`).toBe(true);
      }
      // Compiled JavaScript only: no TypeScript sources of the workspace packages.
      expect(existsSync(join(dir, 'src'))).toBe(false);
      for (const name of workspace) {
        expect(readdirSync(join(dir, 'node_modules', name)).sort(), name).toEqual(
          expect.arrayContaining(['dist', 'package.json']),
        );
        expect(existsSync(join(dir, 'node_modules', name, 'src')), `${name}/src`).toBe(false);
      }

      const { argv, env: imageEnv } = imageCommand(app);
      const env = appEnv(app, imageEnv);
      const script = argv.at(-1);
      expect(script).toBe('dist/main.js');

      if (existsSync(join(dir, 'dist/migrate.js'))) {
        const migrate = await run(process.execPath, [...argv.slice(1, -1), 'dist/migrate.js'], {
          cwd: dir,
          env,
        });
        expect(migrate.code, `${app} migrations:\n${migrate.output}`).toBe(0);
      }
      if (app === 'admin') {
        // argon2's native addon loads and works from the bundle.
        const argon2 = await run(
          process.execPath,
          [
            '--input-type=module',
            '-e',
            "import argon2 from 'argon2'; const h = await argon2.hash('x'); process.exit((await argon2.verify(h, 'x')) ? 0 : 1);",
          ],
          { cwd: dir, env },
        );
        expect(argon2.code, `argon2 in the admin bundle:\n${argon2.output}`).toBe(0);
      }

      const started = Date.now();
      const proc = startBundle(app, dir, argv, env);
      procs.push(proc);
      const port = ports.get(app) ?? 0;
      if (app === 'gateway') {
        await waitUntil(
          'gateway GET /healthz 200',
          async () => (await fetch(`http://127.0.0.1:${port}/healthz`)).status === 200,
          { timeoutMs: 30_000, proc },
        );
      } else {
        const address = `127.0.0.1:${port}`;
        await waitUntil(
          `${app} gRPC health SERVING`,
          async () =>
            (await grpcHealth(address, '')) === ServingStatus.SERVING &&
            (await grpcHealth(address, GRPC_SERVICES[app])) === ServingStatus.SERVING,
          { timeoutMs: 30_000, proc },
        );
      }
      log(`${app}: ${argv.slice(1).join(' ')} SERVING ${seconds(Date.now() - started)} after start`);
    });
  }

  it('gateway: GET /readyz 200 with all four bundles pointed at each other', async () => {
    ready();
    const gateway = procs.find((p) => p.name === 'gateway');
    expect(procs.map((p) => p.name).sort()).toEqual([...APPS].sort());
    const took = await waitUntil(
      'gateway GET /readyz 200',
      async () => (await fetch(`http://127.0.0.1:${ports.get('gateway')}/readyz`)).status === 200,
      { timeoutMs: 30_000, ...(gateway ? { proc: gateway } : {}) },
    );
    log(`gateway: /readyz 200 ${seconds(took)} after /healthz`);
    const body = (await (await fetch(`http://127.0.0.1:${ports.get('gateway')}/readyz`)).json()) as unknown;
    expect(body).toMatchObject({ status: 'ready' });
  });

  it("gateway: serves the web console from its bundle (the console package's dist/), with its assets", async () => {
    ready();
    const base = `http://127.0.0.1:${ports.get('gateway')}`;
    const page = await fetch(`${base}/projects`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    const html = await page.text();
    const script = /<script[^>]*src="(\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    expect(script, html).toBeDefined();
    const asset = await fetch(`${base}${script}`);
    expect(asset.status).toBe(200);
    expect(asset.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
  });

  it('every bundle is still running', () => {
    ready();
    for (const p of procs) expect(p.child.exitCode, `${p.name}:\n${p.output()}`).toBeNull();
  });
});
