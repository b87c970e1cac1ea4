import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
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

/** Variables the chart sets that an app does not read yet; each entry must still be unread. */
const NOT_YET_READ: Record<string, string> = {
  // Static relays file: documented product interface, issuer support pending.
  RELAYPLANE_RELAYS_FILE: 'issuer',
};

function appSource(component: string): string {
  return readFileSync(join(repoRoot, 'apps', component, 'src/config.ts'), 'utf8');
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
  it('every script the chart runs exists in the repository', async () => {
    const scripts = new Set((await renderedContainers()).map(({ container }) => container.args?.[0] ?? ''));
    expect(scripts.size).toBe(7);
    for (const script of scripts) expect(existsSync(join(repoRoot, script)), script).toBe(true);
  });

  it("every environment variable the chart sets is read by that app's config", async () => {
    let checked = 0;
    for (const { component, container } of await renderedContainers()) {
      const source = appSource(component);
      for (const { name } of container.env ?? []) {
        if (name === 'NODE_ENV') continue;
        if (NOT_YET_READ[name] === component) continue;
        checked++;
        expect(source.includes(`'${name}'`), `apps/${component}/src/config.ts reads ${name}`).toBe(true);
      }
    }
    expect(checked).toBeGreaterThan(30);
  });

  it('the pending variables are really still unread (remove them from NOT_YET_READ once they are)', () => {
    for (const [name, component] of Object.entries(NOT_YET_READ)) {
      expect(appSource(component).includes(`'${name}'`), name).toBe(false);
    }
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

describe('container image', () => {
  const dockerfile = readFileSync(join(deployDir, 'docker/Dockerfile'), 'utf8');

  it('builds on node:24-bookworm-slim from the frozen lockfile and prunes to production dependencies', () => {
    expect(dockerfile).toMatch(/^ARG NODE_IMAGE=node:24-bookworm-slim$/m);
    expect(dockerfile.match(/^FROM \$\{NODE_IMAGE\}/gm)).toHaveLength(2);
    expect(dockerfile).toContain('corepack pnpm install --frozen-lockfile --prod=false');
    expect(dockerfile).toContain('corepack pnpm install --frozen-lockfile --prod --offline');
  });

  it('runs as the same non-root UID the chart declares, with node as the entrypoint', () => {
    const user = /^USER (\d+):(\d+)$/m.exec(dockerfile);
    const values = readYaml(join(chartDir, 'values.yaml')) as { podSecurityContext: { runAsUser: number } };
    expect(Number(user?.[1])).toBe(values.podSecurityContext.runAsUser);
    expect(Number(user?.[1])).toBeGreaterThan(0);
    expect(dockerfile).toMatch(/^ENTRYPOINT \["node"\]$/m);
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
