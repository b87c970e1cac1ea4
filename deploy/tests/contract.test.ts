import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ADMIN_SETTINGS } from '../../apps/admin/src/settings.ts';
import { BILLING_PROVIDERS, BILLING_SETTINGS } from '../../apps/billing/src/settings.ts';
import { GATEWAY_SETTINGS } from '../../apps/gateway/src/settings.ts';
import { ISSUER_SETTINGS } from '../../apps/issuer/src/settings.ts';
import type { Setting } from '../../packages/shared/src/settings.ts';
import {
  byKind,
  type Container,
  exampleFiles,
  examplesDir,
  podSpec,
  readYaml,
  render,
} from './support/chart.ts';
import { chartDir, deployDir } from './support/helm.ts';

const repoRoot = resolve(deployDir, '..');
const COMPONENTS = ['gateway', 'issuer', 'admin', 'billing'] as const;
/** The CMD of every app image (deploy/docker/Dockerfile). */
const IMAGE_CMD = ['node', '--conditions=relayplane-dist', 'dist/main.js'];
const DEFAULT_PORTS: Record<(typeof COMPONENTS)[number], number> = {
  gateway: 8080,
  issuer: 50051,
  admin: 50052,
  billing: 50053,
};

/** Read by Node.js or glibc, not by the app's config. */
const READ_BY_THE_RUNTIME = new Set(['NODE_ENV', 'NODE_OPTIONS', 'MALLOC_MMAP_THRESHOLD_']);

/** Every variable an app declares (apps/<app>/src/settings.ts), its fallbacks included: what it reads. */
const SETTINGS: Record<string, readonly Setting[]> = {
  gateway: GATEWAY_SETTINGS,
  issuer: ISSUER_SETTINGS,
  admin: ADMIN_SETTINGS,
  billing: BILLING_SETTINGS,
};
function declaredBy(component: string): Set<string> {
  const settings = SETTINGS[component];
  if (!settings) throw new Error(`no settings for ${component}`);
  return new Set(settings.flatMap((s) => [s.env, ...(s.fallback ?? [])]));
}

async function renderedContainers(): Promise<{ component: string; container: Container }[]> {
  const out: { component: string; container: Container }[] = [];
  for (const file of exampleFiles()) {
    const objects = await render({ valuesFiles: [join(examplesDir, file)] });
    for (const w of [...byKind(objects, 'Deployment'), ...byKind(objects, 'Job')]) {
      for (const container of podSpec(w).containers) {
        const component = container.name.replace(/^migrate-/, '');
        out.push({ component, container });
      }
    }
  }
  return out;
}

describe('chart ↔ apps contract', () => {
  it('every command the chart runs is a built entry point of that app (dist/<x>.js from src/<x>.ts)', async () => {
    const objects = await render({ valuesFiles: [join(examplesDir, 'minimal.yaml')] });
    const commands = new Map<string, string[]>();
    for (const component of COMPONENTS) {
      const d = byKind(objects, 'Deployment').find((o) => o.metadata.name.endsWith(`-${component}`));
      const c = d && podSpec(d).containers[0];
      // Deployments run the image's CMD, which start:dist mirrors.
      expect(c?.command, component).toBeUndefined();
      expect(c?.args, component).toBeUndefined();
      commands.set(`${component} main`, IMAGE_CMD);
    }
    for (const job of byKind(objects, 'Job')) {
      const c = podSpec(job).containers[0];
      const component = c?.name.replace(/^migrate-/, '') ?? '';
      expect(c?.image, job.metadata.name).toMatch(new RegExp(`/${component}:`));
      commands.set(`${component} migrate`, c?.command ?? []);
    }
    expect([...commands.keys()].sort()).toEqual([
      'admin main',
      'admin migrate',
      'billing main',
      'billing migrate',
      'gateway main',
      'issuer main',
      'issuer migrate',
    ]);
    for (const [key, command] of commands) {
      const [component = '', kind = ''] = key.split(' ');
      const appDir = join(repoRoot, 'apps', component);
      const pkg = JSON.parse(readFileSync(join(appDir, 'package.json'), 'utf8')) as {
        scripts: Record<string, string>;
      };
      // The app's own script runs the bundle exactly as the chart does.
      expect(pkg.scripts[`${kind === 'main' ? 'start' : 'migrate'}:dist`], key).toBe(command.join(' '));
      const build = JSON.parse(readFileSync(join(appDir, 'tsconfig.build.json'), 'utf8')) as {
        compilerOptions: { rootDir: string; outDir: string };
      };
      const entry = command.at(-1) ?? '';
      expect(entry.startsWith(`${build.compilerOptions.outDir}/`), key).toBe(true);
      const source = entry
        .replace(`${build.compilerOptions.outDir}/`, `${build.compilerOptions.rootDir}/`)
        .replace(/\.js$/, '.ts');
      expect(existsSync(join(appDir, source)), `apps/${component}/${source}`).toBe(true);
    }
  });

  it("every environment variable the chart sets is declared (so read and documented) in that app's settings", async () => {
    let checked = 0;
    for (const { component, container } of await renderedContainers()) {
      const declared = declaredBy(component);
      for (const { name } of container.env ?? []) {
        if (READ_BY_THE_RUNTIME.has(name)) continue;
        checked++;
        expect(declared.has(name), `apps/${component}/src/settings.ts declares ${name}`).toBe(true);
      }
    }
    expect(checked).toBeGreaterThan(30);
  });

  it('every billing variable the chart can render (Stripe, checkout and Redis tuning) is read by billing', async () => {
    const objects = await render({
      set: [
        'database.existingSecret=rp-db',
        'redis.existingSecret=rp-redis',
        'kek.existingSecret=rp-kek',
        'plans.pro.stripe_price_id=price_123',
        'billing.provider=stripe',
        'billing.stripe.existingSecret=rp-stripe',
        'billing.stripe.webhookToleranceSeconds=300',
        'billing.redisCommandTimeoutMs=250',
        'billing.checkout.maxPerWindow=5',
        'billing.checkout.windowSeconds=60',
        'billing.checkout.sessionTtlSeconds=86400',
        'billing.maxConnectionAgeMs=0',
      ],
    });
    const billing = byKind(objects, 'Deployment').find((d) => d.metadata.name.endsWith('-billing'));
    const names = (billing ? (podSpec(billing).containers[0]?.env ?? []) : []).map((e) => e.name);
    const declared = declaredBy('billing');
    expect(names).toEqual(
      expect.arrayContaining([
        'BILLING_REDIS_URL',
        'BILLING_REDIS_PREFIX',
        'BILLING_REDIS_COMMAND_TIMEOUT_MS',
        'BILLING_ISSUER_ADDRESS',
        'BILLING_ADMIN_ADDRESS',
        'BILLING_PROVIDER',
        'STRIPE_SECRET_KEY',
        'STRIPE_WEBHOOK_SECRET',
        'STRIPE_WEBHOOK_TOLERANCE_SECONDS',
        'BILLING_CHECKOUT_MAX_PER_WINDOW',
        'BILLING_CHECKOUT_WINDOW_SECONDS',
        'BILLING_CHECKOUT_SESSION_TTL_SECONDS',
      ]),
    );
    for (const name of names.filter((n) => n !== 'NODE_ENV' && n !== 'NODE_OPTIONS'))
      expect(declared.has(name), `apps/billing/src/settings.ts declares ${name}`).toBe(true);
    // Read by the app for its tests only (a Stripe mock); the chart must never set it.
    expect(declared.has('STRIPE_API_BASE')).toBe(true);
    expect(names).not.toContain('STRIPE_API_BASE');
  });

  it('the billing provider enum of the chart is the one the app accepts', () => {
    const schema = readYaml(join(chartDir, 'values.schema.json')) as {
      properties: { billing: { properties: { provider: { enum: string[] } } } };
    };
    const appProviders = [...BILLING_PROVIDERS];
    expect(appProviders.length).toBeGreaterThan(0);
    expect(schema.properties.billing.properties.provider.enum).toEqual(appProviders);
    const values = readYaml(join(chartDir, 'values.yaml')) as { billing: { provider: string } };
    expect(values.billing.provider).toBe('builtin');
  });

  it('readiness probes name gRPC services that the .proto contracts define', async () => {
    const objects = await render({ valuesFiles: [join(examplesDir, 'minimal.yaml')] });
    for (const component of COMPONENTS.filter((c) => c !== 'gateway')) {
      const d = byKind(objects, 'Deployment').find((o) => o.metadata.name.endsWith(`-${component}`));
      const probe = d && (podSpec(d).containers[0]?.readinessProbe as { grpc: { service: string } });
      const proto = readFileSync(
        join(repoRoot, `packages/proto/proto/relayplane/${component}/v1/${component}.proto`),
        'utf8',
      );
      const pkg = /^package ([\w.]+);/m.exec(proto)?.[1];
      const service = /^service (\w+) \{/m.exec(proto)?.[1];
      expect(probe?.grpc.service).toBe(`${pkg}.${service}`);
    }
  });
});

describe('container images ↔ chart', () => {
  const dockerfile = readFileSync(join(deployDir, 'docker/Dockerfile'), 'utf8');
  const values = readYaml(join(chartDir, 'values.yaml')) as Record<string, { port?: number }> & {
    podSecurityContext: { runAsUser: number };
  };

  /** The lines of the `FROM … AS <target>` stage. */
  function stage(target: string): string {
    const start = dockerfile.search(new RegExp(`^FROM \\S+ AS ${target}$`, 'm'));
    if (start < 0) return '';
    const rest = dockerfile.slice(start);
    const next = rest.slice(1).search(/^FROM /m);
    return next < 0 ? rest : rest.slice(0, next + 1);
  }

  it('builds on node:24-bookworm-slim from the frozen lockfile', () => {
    expect(dockerfile).toMatch(/^ARG NODE_IMAGE=node:24-bookworm-slim$/m);
    expect(dockerfile).toContain('pnpm install --frozen-lockfile');
  });

  it.each(COMPONENTS)('has a %s target that runs its CMD on the port the chart declares', (component) => {
    const body = stage(component);
    expect(body, `FROM … AS ${component}`).not.toBe('');
    const cmd = /^CMD (\[.*\])$/m.exec(body)?.[1];
    expect(cmd && JSON.parse(cmd)).toEqual(IMAGE_CMD);
    expect(body).toMatch(new RegExp(`^EXPOSE ${DEFAULT_PORTS[component]}$`, 'm'));
    expect(values[component]?.port).toBe(DEFAULT_PORTS[component]);
  });

  it('runs as the non-root UID the chart declares, with no ENTRYPOINT in front of the CMD', () => {
    const user = /^USER (\d+):(\d+)$/m.exec(dockerfile);
    expect(Number(user?.[1])).toBe(values.podSecurityContext.runAsUser);
    expect(Number(user?.[1])).toBeGreaterThan(0);
    // Only an empty ENTRYPOINT (clearing the base image's) is allowed: the chart's Job command
    // and the image CMD are complete commands.
    for (const m of dockerfile.matchAll(/^ENTRYPOINT (.*)$/gm)) expect(m[1]).toBe('[]');
  });

  it('the ignore file BuildKit uses equals .dockerignore and keeps every workspace manifest', () => {
    const ignore = readFileSync(join(deployDir, 'docker/.dockerignore'), 'utf8');
    expect(readFileSync(join(deployDir, 'docker/Dockerfile.dockerignore'), 'utf8')).toBe(ignore);
    const lines = ignore.split('\n').filter((l) => l && !l.startsWith('#'));
    expect(lines).toEqual(expect.arrayContaining(['**/node_modules', '.git']));
    const workspace = readYaml(join(repoRoot, 'pnpm-workspace.yaml')) as { packages: string[] };
    for (const pattern of workspace.packages) {
      const top = pattern.replace(/\/\*$/, '');
      // A workspace folder is either kept whole or has its package.json re-included.
      if (lines.some((l) => l === `${top}/**` || l === top)) {
        expect(lines, pattern).toContain(`!${top}/package.json`);
      }
    }
  });
});
