import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  byKind,
  type Container,
  dataOf,
  envOf,
  exampleFiles,
  examplesDir,
  invalidDir,
  invalidFiles,
  type K8sObject,
  lint,
  named,
  podSpec,
  REQUIRED_SETS,
  render,
  template,
  WORKLOAD_KINDS,
} from './support/chart.ts';

const COMPONENTS = ['gateway', 'issuer', 'admin', 'billing'] as const;
const SELECTOR_KEYS = ['app.kubernetes.io/component', 'app.kubernetes.io/instance', 'app.kubernetes.io/name'];

const exampleRenders = new Map<string, Promise<K8sObject[]>>();
function renderExample(file: string): Promise<K8sObject[]> {
  let p = exampleRenders.get(file);
  if (!p) {
    p = render({ valuesFiles: [join(examplesDir, file)] });
    exampleRenders.set(file, p);
  }
  return p;
}

/** Validates one object against the Kubernetes OpenAPI schemas shipped in kubernetes-models. */
async function validateK8s(o: K8sObject): Promise<void> {
  const mod = (await import(/* @vite-ignore */ `kubernetes-models/${o.apiVersion}/${o.kind}`)) as Record<
    string,
    new (
      data: unknown,
    ) => { validate(): void }
  >;
  const Model = mod[o.kind];
  if (!Model) throw new Error(`kubernetes-models has no ${o.apiVersion} ${o.kind}`);
  new Model(o).validate();
}

function containersOf(o: K8sObject): Container[] {
  const spec = podSpec(o);
  return [...(spec.initContainers ?? []), ...spec.containers];
}

describe('helm lint --strict', () => {
  it('passes for the default values', async () => {
    const r = await lint();
    expect(r.stderr + r.stdout).toContain('0 chart(s) failed');
    expect(r.code).toBe(0);
  });

  it.each(exampleFiles())('passes for examples/%s', async (file) => {
    const r = await lint({ valuesFiles: [join(examplesDir, file)] });
    expect(r.code, r.stderr + r.stdout).toBe(0);
  });

  it.each(invalidFiles())('fails on the schema for tests/invalid/%s', async (file) => {
    const r = await lint({ valuesFiles: [join(invalidDir, file)] });
    expect(r.code).not.toBe(0);
    expect(r.stderr + r.stdout).toMatch(/values don't meet the specifications of the schema/);
  });
});

describe('helm template', () => {
  it.each(exampleFiles())('renders examples/%s into valid Kubernetes objects', async (file) => {
    const objects = await renderExample(file);
    expect(byKind(objects, 'Deployment')).toHaveLength(4);
    expect(byKind(objects, 'Service')).toHaveLength(4);
    for (const o of objects)
      await expect(validateK8s(o), `${o.kind}/${o.metadata.name}`).resolves.toBeUndefined();
  });

  it('renders the defaults once only the required secrets are referenced', async () => {
    const objects = await render({ set: REQUIRED_SETS });
    expect(byKind(objects, 'Deployment').map((d) => d.metadata.name)).toEqual(
      COMPONENTS.map((c) => `rp-relayplane-${c}`),
    );
    // Everything comes from existing Secrets: the chart stores no secret of its own.
    expect(byKind(objects, 'Secret')).toEqual([]);
    for (const o of objects) await validateK8s(o);
  });

  it('kubernetes-models validation rejects a malformed object (the check has teeth)', async () => {
    const [deployment] = byKind(await renderExample('minimal.yaml'), 'Deployment');
    const broken = structuredClone(deployment) as K8sObject;
    (broken.spec as Record<string, unknown>).replicas = 'two';
    await expect(validateK8s(broken)).rejects.toThrow();
  });
});

describe.each(exampleFiles())('workloads rendered from examples/%s', (file) => {
  it('every container has liveness, readiness and startup probes, resources and the restricted securityContext', async () => {
    const objects = await renderExample(file);
    const workloads = objects.filter((o) => WORKLOAD_KINDS.includes(o.kind));
    expect(workloads.length).toBeGreaterThanOrEqual(5);
    for (const w of workloads) {
      const spec = podSpec(w);
      expect(spec.securityContext, w.metadata.name).toMatchObject({
        runAsNonRoot: true,
        seccompProfile: { type: 'RuntimeDefault' },
      });
      expect(spec.automountServiceAccountToken).toBe(false);
      for (const c of containersOf(w)) {
        const where = `${w.kind}/${w.metadata.name}/${c.name}`;
        // A Job runs to completion and serves nothing, so only long-running pods are probed.
        if (w.kind !== 'Job') {
          expect(c.livenessProbe, where).toBeDefined();
          expect(c.readinessProbe, where).toBeDefined();
          expect(c.startupProbe, where).toBeDefined();
        }
        expect(c.resources?.requests, where).toMatchObject({
          cpu: expect.anything(),
          memory: expect.anything(),
        });
        expect(c.resources?.limits?.memory, where).toBeDefined();
        expect(c.securityContext, where).toEqual({
          runAsNonRoot: true,
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          privileged: false,
          capabilities: { drop: ['ALL'] },
          seccompProfile: { type: 'RuntimeDefault' },
        });
        // Read-only root: the writable /tmp is an emptyDir.
        const tmp = c.volumeMounts?.find((m) => m.mountPath === '/tmp');
        expect(tmp, where).toBeDefined();
        expect(spec.volumes?.find((v) => v.name === tmp?.name)?.emptyDir, where).toBeDefined();
        expect(c.image, where).not.toMatch(/:latest(@|$)/);
      }
    }
  });

  it('selectors use only the stable name/instance/component labels and match their pods', async () => {
    const objects = await renderExample(file);
    for (const d of byKind(objects, 'Deployment')) {
      const spec = d.spec as {
        selector: { matchLabels: Record<string, string> };
        template: { metadata: { labels: Record<string, string> } };
      };
      expect(Object.keys(spec.selector.matchLabels).sort()).toEqual(SELECTOR_KEYS);
      expect(spec.template.metadata.labels).toMatchObject(spec.selector.matchLabels);
    }
    for (const s of byKind(objects, 'Service')) {
      expect(Object.keys((s.spec as { selector: Record<string, string> }).selector).sort()).toEqual(
        SELECTOR_KEYS,
      );
    }
  });

  it('no secret value appears as a plain env value: URLs, KEK and passwords come from Secrets', async () => {
    const objects = await renderExample(file);
    const secretVars = /(_DATABASE_URL|_REDIS_URL|RELAYPLANE_KEK|RELAYPLANE_BOOTSTRAP_PASSWORD)$/;
    let checked = 0;
    for (const w of objects.filter((o) => WORKLOAD_KINDS.includes(o.kind))) {
      for (const c of containersOf(w)) {
        for (const e of c.env ?? []) {
          if (!secretVars.test(e.name)) continue;
          checked++;
          expect(e.value, `${c.name} ${e.name}`).toBeUndefined();
          expect(e.valueFrom?.secretKeyRef?.key, `${c.name} ${e.name}`).toBeTruthy();
        }
      }
    }
    expect(checked).toBeGreaterThanOrEqual(9);
  });
});

describe('service wiring', () => {
  it('binds every gRPC service to 0.0.0.0 and points the gateway and admin at the in-cluster Services', async () => {
    const objects = await renderExample('minimal.yaml');
    const container = (component: string): Container => {
      const d = byKind(objects, 'Deployment').find((o) => o.metadata.name === `rp-relayplane-${component}`);
      const c = d && podSpec(d).containers[0];
      if (!c) throw new Error(`no ${component} container`);
      return c;
    };
    const gateway = envOf(container('gateway'));
    expect(gateway.get('HOST')?.value).toBe('0.0.0.0');
    expect(gateway.get('PORT')?.value).toBe('8080');
    expect(gateway.get('GATEWAY_ISSUER_ADDRESS')?.value).toBe('rp-relayplane-issuer:50051');
    expect(gateway.get('GATEWAY_ADMIN_ADDRESS')?.value).toBe('rp-relayplane-admin:50052');
    expect(gateway.get('GATEWAY_BILLING_ADDRESS')?.value).toBe('rp-relayplane-billing:50053');
    expect(envOf(container('admin')).get('ADMIN_BILLING_ADDRESS')?.value).toBe('rp-relayplane-billing:50053');
    expect(envOf(container('admin')).get('RELAYPLANE_SIGNUP_ENABLED')?.value).toBe('false');
    for (const [component, port] of [
      ['issuer', 50051],
      ['admin', 50052],
      ['billing', 50053],
    ] as const) {
      const c = container(component);
      expect(envOf(c).get(`${component.toUpperCase()}_LISTEN_ADDRESS`)?.value).toBe(`0.0.0.0:${port}`);
      expect(c.args).toEqual([`apps/${component}/src/main.ts`]);
      expect(c.livenessProbe).toMatchObject({ grpc: { port, service: '' } });
      expect(c.readinessProbe).toMatchObject({
        grpc: {
          port,
          service: `relayplane.${component}.v1.${component[0]?.toUpperCase()}${component.slice(1)}Service`,
        },
      });
      const svc = byKind(objects, 'Service').find((s) => s.metadata.name === `rp-relayplane-${component}`);
      expect(svc?.spec).toMatchObject({
        type: 'ClusterIP',
        ports: [{ name: 'grpc', port, targetPort: 'grpc' }],
      });
    }
    expect(container('gateway').readinessProbe).toMatchObject({ httpGet: { path: '/readyz', port: 'http' } });
    expect(container('gateway').livenessProbe).toMatchObject({ httpGet: { path: '/healthz', port: 'http' } });
  });

  it('runs all three migrations in a pre-install/pre-upgrade hook Job that can read its database URL', async () => {
    const objects = await renderExample('minimal.yaml');
    const [job] = byKind(objects, 'Job');
    expect(job?.metadata.annotations?.['helm.sh/hook']).toBe('pre-install,pre-upgrade');
    const containers = job ? containersOf(job) : [];
    expect(containers.map((c) => c.args?.[0]).sort()).toEqual([
      'apps/admin/src/migrate.ts',
      'apps/billing/src/migrate.ts',
      'apps/issuer/src/migrate.ts',
    ]);
    // Hooks run before the release's Secret exists: the Job's Secret must itself be a hook
    // that is created earlier (lower weight).
    const hookSecrets = byKind(objects, 'Secret').filter((s) => s.metadata.annotations?.['helm.sh/hook']);
    for (const c of containers) {
      const ref = c.env?.find((e) => e.name.endsWith('_DATABASE_URL'))?.valueFrom?.secretKeyRef;
      const secret = hookSecrets.find((s) => s.metadata.name === ref?.name);
      expect(secret, c.name).toBeDefined();
      expect(Number(secret?.metadata.annotations?.['helm.sh/hook-weight'])).toBeLessThan(
        Number(job?.metadata.annotations?.['helm.sh/hook-weight']),
      );
      expect(Object.keys(dataOf(secret))).toContain(ref?.key);
    }
  });

  it('mounts the plans file into billing and the relays file into the issuer when given', async () => {
    const objects = await renderExample('production.yaml');
    const [cm] = byKind(objects, 'ConfigMap');
    const data = dataOf(cm);
    expect(data['plans.yaml']).toContain('max_concurrent_connections: 2000');
    expect(data['plans.yaml']?.startsWith('plans:')).toBe(true);
    expect(data['relays.yaml']).toContain('edge-fra-1');
    const billing = byKind(objects, 'Deployment').find((d) => d.metadata.name.endsWith('-billing'));
    const c = billing && podSpec(billing).containers[0];
    expect(c && envOf(c).get('RELAYPLANE_PLANS_FILE')?.value).toBe('/etc/relayplane/plans.yaml');
    expect(c?.volumeMounts?.map((m) => m.mountPath)).toContain('/etc/relayplane/plans.yaml');
  });
});

describe('availability objects', () => {
  it('renders a PodDisruptionBudget only for components with more than one replica', async () => {
    const minimal = await renderExample('minimal.yaml');
    expect(byKind(minimal, 'PodDisruptionBudget')).toEqual([]);
    const two = await render({ set: [...REQUIRED_SETS, 'issuer.replicaCount=1'] });
    expect(
      byKind(two, 'PodDisruptionBudget')
        .map((p) => p.metadata.name)
        .sort(),
    ).toEqual(['rp-relayplane-admin', 'rp-relayplane-billing', 'rp-relayplane-gateway']);
  });

  it('with autoscaling, renders an autoscaling/v2 HPA and leaves replicas to it', async () => {
    const objects = await renderExample('production.yaml');
    const hpas = byKind(objects, 'HorizontalPodAutoscaler');
    expect(hpas.map((h) => h.apiVersion)).toEqual(['autoscaling/v2', 'autoscaling/v2']);
    const gateway = byKind(objects, 'Deployment').find((d) => d.metadata.name.endsWith('-gateway'));
    expect(gateway?.spec?.replicas).toBeUndefined();
    const billing = byKind(objects, 'Deployment').find((d) => d.metadata.name.endsWith('-billing'));
    expect(billing?.spec?.replicas).toBe(2);
  });

  it('NetworkPolicy lets only the gateway (and admin, for billing) reach the gRPC services', async () => {
    const objects = await renderExample('minimal.yaml');
    const policies = byKind(objects, 'NetworkPolicy');
    expect(policies).toHaveLength(5);
    const callers = (component: string): string[] => {
      const p = named(policies, 'NetworkPolicy', `rp-relayplane-${component}`);
      const ingress = (
        p.spec as { ingress: { from?: { podSelector: { matchLabels: Record<string, string> } }[] }[] }
      ).ingress;
      return ingress.flatMap((r) =>
        (r.from ?? []).map((f) => f.podSelector.matchLabels['app.kubernetes.io/component'] ?? ''),
      );
    };
    expect(callers('issuer')).toEqual(['gateway']);
    expect(callers('admin')).toEqual(['gateway']);
    expect(callers('billing')).toEqual(['gateway', 'admin']);
    const migrate = named(policies, 'NetworkPolicy', 'rp-relayplane-migrate');
    expect((migrate.spec as { ingress: unknown[] }).ingress).toEqual([]);
  });
});

describe('templates/validate.yaml', () => {
  it('fails the default values with how-to-fix messages for the database, Redis and KEK', async () => {
    const r = await template();
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('database: no PostgreSQL URL. Set database.existingSecret');
    expect(r.stderr).toContain('redis: no Redis URL. Set redis.existingSecret');
    expect(r.stderr).toContain('openssl rand -base64 32');
  });

  it('reports only what is missing', async () => {
    const r = await template({ set: ['database.existingSecret=db', 'kek.existingSecret=kek'] });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('redis: no Redis URL');
    expect(r.stderr).not.toContain('database: no PostgreSQL URL');
    expect(r.stderr).not.toContain('kek:');
  });

  it('fails a bootstrap email without a password', async () => {
    const r = await template({ set: [...REQUIRED_SETS, 'admin.bootstrap.email=owner@example.com'] });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(
      'admin.bootstrap: email is set but no password. Set admin.bootstrap.existingSecret',
    );
  });

  it('fails autoscaling whose maximum is below its minimum', async () => {
    const r = await template({
      set: [
        ...REQUIRED_SETS,
        'gateway.autoscaling.enabled=true',
        'gateway.autoscaling.minReplicas=5',
        'gateway.autoscaling.maxReplicas=3',
      ],
    });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('gateway.autoscaling: maxReplicas (3) is below minReplicas (5)');
  });

  it('fails a PDB that would block every drain', async () => {
    const r = await template({ set: [...REQUIRED_SETS, 'issuer.pdb.minAvailable=2'] });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('issuer.pdb: minAvailable (2) must be below the replica count (2)');
  });

  it('still refuses image.tag=latest when schema validation is skipped', async () => {
    const r = await template({
      set: [...REQUIRED_SETS, 'image.tag=latest'],
      extraArgs: ['--skip-schema-validation'],
    });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('image.tag: "latest" is not allowed');
  });
});
