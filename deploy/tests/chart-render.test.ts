import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  byKind,
  type Container,
  dataOf,
  envOf,
  exampleFiles,
  examplesDir,
  INVALID_FIXTURES,
  invalidDir,
  invalidFiles,
  type K8sObject,
  lint,
  named,
  podSpec,
  REQUIRED_SETS,
  readYaml,
  render,
  template,
  validateK8s,
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

  it('passes with only the required secrets referenced (so a fixture below fails for its own reason)', async () => {
    const r = await lint({ set: REQUIRED_SETS });
    expect(r.code, r.stderr + r.stdout).toBe(0);
    expect((await template({ set: REQUIRED_SETS })).code).toBe(0);
  });

  it.each(invalidFiles())('rejects tests/invalid/%s naming the offending value', async (file) => {
    const fixture = INVALID_FIXTURES[file];
    if (!fixture) throw new Error(`${file} is not listed in INVALID_FIXTURES`);
    const opts = { set: REQUIRED_SETS, valuesFiles: [join(invalidDir, file)] };
    const linted = await lint(opts);
    const rendered = await template(opts);
    // helm template (and so install/upgrade) refuses the file with a message naming the value.
    expect(rendered.code).not.toBe(0);
    expect(rendered.stderr).toContain(fixture.message);
    if (fixture.by === 'schema') {
      expect(rendered.stderr).toContain("values don't meet the specifications of the schema");
      expect(linted.code).not.toBe(0);
      expect(linted.stdout + linted.stderr).toContain(fixture.message);
    } else {
      expect(rendered.stderr).toContain('Relayplane chart values are invalid');
      // helm lint runs templates in lint mode, where `fail` only logs: the message must show up.
      expect(linted.stdout + linted.stderr).toContain(fixture.message);
    }
  });
});

describe('helm template', () => {
  it.each(exampleFiles())('renders examples/%s into valid Kubernetes objects', async (file) => {
    const objects = await renderExample(file);
    expect(byKind(objects, 'Deployment')).toHaveLength(4);
    // One Service per app plus a headless one per gRPC service.
    expect(byKind(objects, 'Service')).toHaveLength(7);
    expect(byKind(objects, 'Job')).toHaveLength(3);
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
    const secretVars =
      /(_DATABASE_URL|_REDIS_URL|RELAYPLANE_KEK|RELAYPLANE_BOOTSTRAP_PASSWORD|STRIPE_SECRET_KEY|STRIPE_WEBHOOK_SECRET)$/;
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

describe('secret hygiene', () => {
  it('inline secrets land only in Secrets: never in a ConfigMap, an env literal or any other object', async () => {
    const values = readYaml(join(examplesDir, 'minimal.yaml')) as {
      database: { url: string };
      redis: { url: string };
      kek: { value: string };
      admin: { bootstrap: { password: string } };
    };
    const secrets = [
      values.database.url,
      values.redis.url,
      values.kek.value,
      values.admin.bootstrap.password,
    ];
    expect(secrets.every((v) => typeof v === 'string' && v.length >= 8)).toBe(true);
    const objects = await renderExample('minimal.yaml');
    expect(byKind(objects, 'Secret').length).toBeGreaterThan(0);
    for (const o of objects) {
      if (o.kind === 'Secret') continue;
      const text = JSON.stringify(o);
      for (const secret of secrets) {
        expect(text.includes(secret), `${o.kind}/${o.metadata.name} contains a secret value`).toBe(false);
        expect(
          text.includes(Buffer.from(secret).toString('base64')),
          `${o.kind}/${o.metadata.name} contains a base64 secret value`,
        ).toBe(false);
      }
    }
    // And the Secrets do hold them (base64), so the check above is not vacuous.
    const stored = byKind(objects, 'Secret').flatMap((s) =>
      Object.values(dataOf(s)).map((v) => Buffer.from(v, 'base64').toString()),
    );
    expect(stored).toEqual(expect.arrayContaining(secrets));
  });
});

describe('service wiring', () => {
  it('binds every gRPC service to 0.0.0.0 and points the gateway and admin at the headless Services', async () => {
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
    // dns:/// + the headless Service: the client resolves every replica and round-robins over them.
    expect(gateway.get('GATEWAY_ISSUER_ADDRESS')?.value).toBe(
      'dns:///rp-relayplane-issuer-headless.relay.svc.cluster.local:50051',
    );
    expect(gateway.get('GATEWAY_ADMIN_ADDRESS')?.value).toBe(
      'dns:///rp-relayplane-admin-headless.relay.svc.cluster.local:50052',
    );
    expect(gateway.get('GATEWAY_BILLING_ADDRESS')?.value).toBe(
      'dns:///rp-relayplane-billing-headless.relay.svc.cluster.local:50053',
    );
    expect(envOf(container('admin')).get('ADMIN_BILLING_ADDRESS')?.value).toBe(
      'dns:///rp-relayplane-billing-headless.relay.svc.cluster.local:50053',
    );
    expect(envOf(container('admin')).get('RELAYPLANE_SIGNUP_ENABLED')?.value).toBe('false');
    // Billing reads usage summaries from the issuers, balanced the same way as the gateway.
    const billing = envOf(container('billing'));
    expect(billing.get('BILLING_ISSUER_ADDRESS')?.value).toBe(
      'dns:///rp-relayplane-issuer-headless.relay.svc.cluster.local:50051',
    );
    // Issuer and billing deliver their audit outboxes to every admin replica.
    for (const component of ['issuer', 'billing'] as const) {
      expect(envOf(container(component)).get(`${component.toUpperCase()}_ADMIN_ADDRESS`)?.value).toBe(
        'dns:///rp-relayplane-admin-headless.relay.svc.cluster.local:50052',
      );
    }
    // Redis for the plan-change bus, the checkout throttle and the usage jobs: the shared URL and prefix.
    expect(billing.get('BILLING_REDIS_URL')).toEqual({
      name: 'BILLING_REDIS_URL',
      valueFrom: { secretKeyRef: { name: 'rp-relayplane', key: 'redis-url' } },
    });
    expect(billing.get('BILLING_REDIS_PREFIX')?.value).toBe('rp:');
    expect(billing.get('BILLING_PROVIDER')?.value).toBe('builtin');
    for (const [component, port] of [
      ['issuer', 50051],
      ['admin', 50052],
      ['billing', 50053],
    ] as const) {
      const c = container(component);
      expect(envOf(c).get(`${component.toUpperCase()}_LISTEN_ADDRESS`)?.value).toBe(`0.0.0.0:${port}`);
      expect(c.livenessProbe).toMatchObject({ grpc: { port, service: '' } });
      expect(c.readinessProbe).toMatchObject({
        grpc: {
          port,
          service: `relayplane.${component}.v1.${component[0]?.toUpperCase()}${component.slice(1)}Service`,
        },
      });
      const svc = named(objects, 'Service', `rp-relayplane-${component}`);
      expect(svc.spec).toMatchObject({
        type: 'ClusterIP',
        // gRPC first; the metrics port (by default) is checked in 'metrics' below.
        ports: [{ name: 'grpc', port, targetPort: 'grpc' }, { name: 'metrics' }],
      });
      expect(svc.spec?.clusterIP).toBeUndefined();
      const headless = named(objects, 'Service', `rp-relayplane-${component}-headless`);
      expect(headless.spec).toMatchObject({
        clusterIP: 'None',
        ports: [{ name: 'grpc', port, targetPort: 'grpc' }],
      });
      expect(headless.spec?.selector).toEqual(svc.spec?.selector);
    }
    expect(byKind(objects, 'Service').find((s) => s.metadata.name.startsWith('rp-relayplane-gateway-'))).toBe(
      undefined,
    );
    expect(container('gateway').readinessProbe).toMatchObject({ httpGet: { path: '/readyz', port: 'http' } });
    expect(container('gateway').livenessProbe).toMatchObject({ httpGet: { path: '/healthz', port: 'http' } });
  });

  it('addresses follow the release namespace and clusterDomain', async () => {
    const objects = await render({ set: [...REQUIRED_SETS, 'clusterDomain=k8s.example'] });
    const gateway = podSpec(named(objects, 'Deployment', 'rp-relayplane-gateway')).containers[0];
    expect(gateway && envOf(gateway).get('GATEWAY_ISSUER_ADDRESS')?.value).toBe(
      'dns:///rp-relayplane-issuer-headless.relay.svc.k8s.example:50051',
    );
  });

  it('runs one image per app with its own CMD: <repository>/<app>:<appVersion>, digest when given', async () => {
    const objects = await renderExample('minimal.yaml');
    for (const component of COMPONENTS) {
      const c = podSpec(named(objects, 'Deployment', `rp-relayplane-${component}`)).containers[0];
      expect(c?.image).toBe(`ghcr.io/relayplane/${component}:1.0.0`);
      // The image's CMD (node --conditions=relayplane-dist dist/main.js) runs the app.
      expect(c?.command).toBeUndefined();
      expect(c?.args).toBeUndefined();
    }
    const pinned = await renderExample('production-ha.yaml');
    const digests = (
      readYaml(join(examplesDir, 'production-ha.yaml')) as { image: { digests: Record<string, string> } }
    ).image.digests;
    for (const component of COMPONENTS) {
      const c = podSpec(named(pinned, 'Deployment', `rp-relayplane-${component}`)).containers[0];
      expect(c?.image).toBe(`registry.example.com/relayplane/${component}:1.0.0@${digests[component]}`);
    }
    const tagged = await render({
      set: [...REQUIRED_SETS, 'image.repository=reg.local:5000/rp/', 'image.tag=2.0.1'],
    });
    const issuer = podSpec(named(tagged, 'Deployment', 'rp-relayplane-issuer')).containers[0];
    expect(issuer?.image).toBe('reg.local:5000/rp/issuer:2.0.1');
  });

  it('runs one pre-install/pre-upgrade hook Job per schema, in that service image, that can read its database URL', async () => {
    const objects = await renderExample('minimal.yaml');
    const jobs = byKind(objects, 'Job');
    expect(jobs.map((j) => j.metadata.name).sort()).toEqual([
      'rp-relayplane-migrate-admin',
      'rp-relayplane-migrate-billing',
      'rp-relayplane-migrate-issuer',
    ]);
    // Hooks run before the release's Secret exists: the Job's Secret must itself be a hook
    // that is created earlier (lower weight).
    const hookSecrets = byKind(objects, 'Secret').filter((s) => s.metadata.annotations?.['helm.sh/hook']);
    for (const job of jobs) {
      const service = job.metadata.name.replace('rp-relayplane-migrate-', '');
      expect(job.metadata.annotations?.['helm.sh/hook']).toBe('pre-install,pre-upgrade');
      expect(podSpec(job).automountServiceAccountToken).toBe(false);
      const containers = containersOf(job);
      expect(containers).toHaveLength(1);
      const [c] = containers;
      if (!c) continue;
      expect(c.image).toBe(`ghcr.io/relayplane/${service}:1.0.0`);
      expect(c.command).toEqual(['node', '--conditions=relayplane-dist', 'dist/migrate.js']);
      expect(c.args).toBeUndefined();
      const ref = c.env?.find((e) => e.name === `${service.toUpperCase()}_DATABASE_URL`)?.valueFrom
        ?.secretKeyRef;
      const secret = hookSecrets.find((s) => s.metadata.name === ref?.name);
      expect(secret, c.name).toBeDefined();
      expect(Number(secret?.metadata.annotations?.['helm.sh/hook-weight'])).toBeLessThan(
        Number(job.metadata.annotations?.['helm.sh/hook-weight']),
      );
      expect(Object.keys(dataOf(secret))).toContain(ref?.key);
    }
    // With existingSecret, each Job reads its own service's key and no hook Secret is rendered.
    const external = await renderExample('production-ha.yaml');
    expect(byKind(external, 'Secret')).toEqual([]);
    const issuerJob = containersOf(named(external, 'Job', 'rp-relayplane-migrate-issuer'))[0];
    expect(issuerJob?.env?.find((e) => e.name === 'ISSUER_DATABASE_URL')?.valueFrom?.secretKeyRef).toEqual({
      name: 'relayplane-database',
      key: 'issuer-url',
    });
  });

  it('renders the scaling and proxy settings as env only when set, and the issuer max connection age by default', async () => {
    const defaults = await render({ set: REQUIRED_SETS });
    const env = (objects: K8sObject[], component: string) => {
      const c = podSpec(named(objects, 'Deployment', `rp-relayplane-${component}`)).containers[0];
      if (!c) throw new Error(`no ${component} container`);
      return envOf(c);
    };
    const gw = env(defaults, 'gateway');
    for (const name of [
      'GATEWAY_TRUSTED_PROXIES',
      'GATEWAY_ISSUANCE_STREAMS',
      'GATEWAY_ISSUANCE_STREAM_MAX_AGE_MS',
      'GATEWAY_GRPC_DNS_MIN_INTERVAL_MS',
    ])
      expect(gw.has(name), name).toBe(false);
    expect(env(defaults, 'issuer').get('ISSUER_GRPC_MAX_CONNECTION_AGE_MS')?.value).toBe('60000');
    expect(env(defaults, 'issuer').has('ISSUER_CREDENTIAL_RETENTION_DAYS')).toBe(false);
    expect(env(defaults, 'admin').has('ADMIN_GRPC_MAX_CONNECTION_AGE_MS')).toBe(false);
    expect(env(defaults, 'billing').has('BILLING_GRPC_MAX_CONNECTION_AGE_MS')).toBe(false);

    const tuned = await render({
      set: [
        ...REQUIRED_SETS,
        'gateway.trustedProxies={10.0.0.0/8,192.168.1.7}',
        'gateway.issuanceStreams=16',
        'gateway.issuanceStreamMaxAgeMs=30000',
        'gateway.grpcDnsMinIntervalMs=1000',
        'admin.maxConnectionAgeMs=300000',
        'billing.maxConnectionAgeMs=0',
        'issuer.credentialRetentionDays=90',
        'issuer.relaySessionRevalidateSeconds=10',
        'issuer.relaySessionExpiresSeconds=300',
        'issuer.relayConnectWindowSeconds=30',
      ],
    });
    const tgw = env(tuned, 'gateway');
    expect(tgw.get('GATEWAY_TRUSTED_PROXIES')?.value).toBe('10.0.0.0/8,192.168.1.7');
    expect(tgw.get('GATEWAY_ISSUANCE_STREAMS')?.value).toBe('16');
    expect(tgw.get('GATEWAY_ISSUANCE_STREAM_MAX_AGE_MS')?.value).toBe('30000');
    expect(tgw.get('GATEWAY_GRPC_DNS_MIN_INTERVAL_MS')?.value).toBe('1000');
    expect(env(tuned, 'admin').get('ADMIN_GRPC_MAX_CONNECTION_AGE_MS')?.value).toBe('300000');
    expect(env(tuned, 'issuer').get('ISSUER_CREDENTIAL_RETENTION_DAYS')?.value).toBe('90');
    expect(env(tuned, 'issuer').get('RELAYPLANE_RELAY_SESSION_REVALIDATE_SECONDS')?.value).toBe('10');
    expect(env(tuned, 'issuer').get('RELAYPLANE_RELAY_SESSION_EXPIRES_SECONDS')?.value).toBe('300');
    expect(env(tuned, 'issuer').get('RELAYPLANE_RELAY_CONNECT_WINDOW_SECONDS')?.value).toBe('30');
    expect(env(defaults, 'issuer').has('RELAYPLANE_RELAY_SESSION_REVALIDATE_SECONDS')).toBe(false);
    // 0 means "never" and must still be rendered.
    expect(env(tuned, 'billing').get('BILLING_GRPC_MAX_CONNECTION_AGE_MS')?.value).toBe('0');
  });

  it('mounts the plans file into billing and the relays file into the issuer when given', async () => {
    const objects = await renderExample('production-ha.yaml');
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
  it('renders a PodDisruptionBudget only for components with more than one replica or an HPA', async () => {
    const pdbNames = (objects: K8sObject[]) =>
      byKind(objects, 'PodDisruptionBudget')
        .map((p) => p.metadata.name)
        .sort();
    expect(pdbNames(await renderExample('minimal.yaml'))).toEqual([]);
    const single = await render({
      set: [...REQUIRED_SETS, 'issuer.autoscaling.enabled=false', 'issuer.replicaCount=1'],
    });
    expect(pdbNames(single)).toEqual([
      'rp-relayplane-admin',
      'rp-relayplane-billing',
      'rp-relayplane-gateway',
    ]);
    // An HPA (even with minReplicas 1) gets a PDB: it can add a pod during a drain.
    const hpaOfOne = await render({
      set: [
        ...REQUIRED_SETS,
        'gateway.replicaCount=1',
        'gateway.autoscaling.enabled=true',
        'gateway.autoscaling.minReplicas=1',
      ],
    });
    expect(pdbNames(hpaOfOne)).toContain('rp-relayplane-gateway');
    const pdb = named(hpaOfOne, 'PodDisruptionBudget', 'rp-relayplane-gateway');
    expect(pdb.spec).toMatchObject({ maxUnavailable: 1 });
  });

  it('autoscales the issuer by default (autoscaling/v2 HPA on CPU) and nothing else', async () => {
    const objects = await render({ set: REQUIRED_SETS });
    const hpas = byKind(objects, 'HorizontalPodAutoscaler');
    expect(hpas.map((h) => h.metadata.name)).toEqual(['rp-relayplane-issuer']);
    expect(hpas[0]?.apiVersion).toBe('autoscaling/v2');
    expect(hpas[0]?.spec).toMatchObject({
      scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'rp-relayplane-issuer' },
      minReplicas: 2,
      maxReplicas: 10,
    });
    expect(named(objects, 'Deployment', 'rp-relayplane-issuer').spec?.replicas).toBeUndefined();
  });

  it('production-ha runs issuer ×4 under an HPA and gateway ×3 against external PostgreSQL and Redis', async () => {
    const objects = await renderExample('production-ha.yaml');
    expect(named(objects, 'HorizontalPodAutoscaler', 'rp-relayplane-issuer').spec).toMatchObject({
      minReplicas: 4,
    });
    expect(named(objects, 'HorizontalPodAutoscaler', 'rp-relayplane-gateway').spec).toMatchObject({
      minReplicas: 3,
    });
    const issuer = podSpec(named(objects, 'Deployment', 'rp-relayplane-issuer')).containers[0];
    const env = issuer ? envOf(issuer) : new Map();
    expect(env.get('ISSUER_DATABASE_URL')?.valueFrom?.secretKeyRef).toEqual({
      name: 'relayplane-database',
      key: 'issuer-url',
    });
    expect(env.get('ISSUER_REDIS_URL')?.valueFrom?.secretKeyRef).toEqual({
      name: 'relayplane-redis',
      key: 'url',
    });
    expect(env.get('RELAYPLANE_KEK')?.valueFrom?.secretKeyRef).toEqual({
      name: 'relayplane-kek',
      key: 'kek',
    });
  });

  it('with autoscaling, renders an autoscaling/v2 HPA and leaves replicas to it', async () => {
    const objects = await renderExample('production-ha.yaml');
    const hpas = byKind(objects, 'HorizontalPodAutoscaler');
    expect(hpas.map((h) => h.apiVersion)).toEqual(['autoscaling/v2', 'autoscaling/v2']);
    const gateway = byKind(objects, 'Deployment').find((d) => d.metadata.name.endsWith('-gateway'));
    expect(gateway?.spec?.replicas).toBeUndefined();
    const billing = byKind(objects, 'Deployment').find((d) => d.metadata.name.endsWith('-billing'));
    expect(billing?.spec?.replicas).toBe(2);
  });

  it('NetworkPolicy lets only the gateway (and admin, for billing; issuer and billing, for audit events to admin) reach the gRPC services', async () => {
    const objects = await renderExample('minimal.yaml');
    const policies = byKind(objects, 'NetworkPolicy');
    expect(policies).toHaveLength(6);
    // Default deny for every pod of the release; the per-component policies add the allowed paths.
    const deny = named(policies, 'NetworkPolicy', 'rp-relayplane-default-deny');
    expect(deny.spec).toEqual({
      podSelector: {
        matchLabels: { 'app.kubernetes.io/name': 'relayplane', 'app.kubernetes.io/instance': 'rp' },
      },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [],
      egress: [],
    });
    const APP_PORTS: Record<string, number> = { issuer: 50051, admin: 50052, billing: 50053 };
    // Callers of the gRPC port (the metrics port has its own rule, checked in 'metrics' below).
    const callers = (component: string): string[] => {
      const p = named(policies, 'NetworkPolicy', `rp-relayplane-${component}`);
      const ingress = (
        p.spec as {
          ingress: {
            ports: { port: number }[];
            from?: { podSelector: { matchLabels: Record<string, string> } }[];
          }[];
        }
      ).ingress;
      const rules = ingress.filter((r) => r.ports.some((port) => port.port === APP_PORTS[component]));
      expect(rules, component).toHaveLength(1);
      return rules.flatMap((r) =>
        (r.from ?? []).map((f) => f.podSelector.matchLabels['app.kubernetes.io/component'] ?? ''),
      );
    };
    expect(callers('issuer')).toEqual(['gateway', 'billing']);
    // Issuer and billing deliver their audit outboxes to admin.
    expect(callers('admin')).toEqual(['gateway', 'issuer', 'billing']);
    expect(callers('billing')).toEqual(['gateway', 'admin']);
    const migrate = named(policies, 'NetworkPolicy', 'rp-relayplane-migrate');
    expect((migrate.spec as { ingress: unknown[] }).ingress).toEqual([]);

    type Egress = {
      ports: { port: number; protocol: string }[];
      to?: { podSelector?: { matchLabels: Record<string, string> } }[];
    };
    const egressPorts = (component: string): number[] =>
      (named(policies, 'NetworkPolicy', `rp-relayplane-${component}`).spec as { egress: Egress[] }).egress
        .flatMap((r) => r.ports.map((p) => p.port))
        .sort((a, b) => a - b);
    // DNS everywhere; gateway → the three gRPC ports and Redis; services → PostgreSQL and Redis;
    // billing → issuer; issuer and billing → admin (audit events). No HTTPS (443) with the
    // built-in billing provider.
    expect(egressPorts('gateway')).toEqual([53, 53, 6379, 50051, 50052, 50053]);
    expect(egressPorts('issuer')).toEqual([53, 53, 5432, 6379, 50052]);
    expect(egressPorts('admin')).toEqual([53, 53, 5432, 6379, 50053]);
    expect(egressPorts('billing')).toEqual([53, 53, 5432, 6379, 50051, 50052]);
    for (const component of ['issuer', 'billing']) {
      const toAdmin = (
        named(policies, 'NetworkPolicy', `rp-relayplane-${component}`).spec as { egress: Egress[] }
      ).egress.find((r) => r.ports.some((p) => p.port === 50052));
      expect(
        toAdmin?.to?.map((t) => t.podSelector?.matchLabels['app.kubernetes.io/component']),
        component,
      ).toEqual(['admin']);
    }
    const billingToIssuer = (
      named(policies, 'NetworkPolicy', 'rp-relayplane-billing').spec as { egress: Egress[] }
    ).egress.find((r) => r.ports.some((p) => p.port === 50051));
    expect(
      billingToIssuer?.to?.map((t) => t.podSelector?.matchLabels['app.kubernetes.io/component']),
    ).toEqual(['issuer']);
    expect(egressPorts('migrate')).toEqual([53, 53, 5432]);
    // The migration Jobs' pods are the ones that policy selects.
    for (const job of byKind(objects, 'Job')) {
      const labels = (job.spec as { template: { metadata: { labels: Record<string, string> } } }).template
        .metadata.labels;
      expect(labels).toMatchObject(
        (migrate.spec as { podSelector: { matchLabels: Record<string, string> } }).podSelector.matchLabels,
      );
    }
  });
});

describe('metrics', () => {
  type Port = { name: string; port: number; targetPort?: string | number; protocol?: string };
  type IngressRule = { ports: { port: number; protocol: string }[]; from?: Record<string, unknown>[] };
  const MONITORING = [
    { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } },
  ];

  const appContainer = (objects: K8sObject[], component: string): Container => {
    const c = podSpec(named(objects, 'Deployment', `rp-relayplane-${component}`)).containers[0];
    if (!c) throw new Error(`no ${component} container`);
    return c;
  };
  const servicePorts = (objects: K8sObject[], name: string): Port[] =>
    (named(objects, 'Service', name).spec as { ports: Port[] }).ports;
  const ingressRules = (objects: K8sObject[], component: string): IngressRule[] =>
    (named(objects, 'NetworkPolicy', `rp-relayplane-${component}`).spec as { ingress: IngressRule[] })
      .ingress;

  it('by default every app serves metrics on 9464: env, container port, Service port and a NetworkPolicy rule from the monitoring namespace', async () => {
    const objects = await render({ set: REQUIRED_SETS });
    for (const component of COMPONENTS) {
      const c = appContainer(objects, component);
      expect(envOf(c).get(`${component.toUpperCase()}_METRICS_ADDRESS`)?.value, component).toBe(
        '0.0.0.0:9464',
      );
      expect(c.ports, component).toContainEqual({ name: 'metrics', containerPort: 9464, protocol: 'TCP' });
      const svc = named(objects, 'Service', `rp-relayplane-${component}`);
      expect(svc.spec?.ports, component).toContainEqual({
        name: 'metrics',
        port: 9464,
        targetPort: 'metrics',
        protocol: 'TCP',
        appProtocol: 'http',
      });
      expect(svc.metadata.labels?.['relayplane.dev/metrics']).toBe('true');
      // The app port keeps its own rule; scrapers get exactly the metrics port.
      const rules = ingressRules(objects, component);
      expect(rules, component).toHaveLength(2);
      expect(rules, component).toContainEqual({ ports: [{ port: 9464, protocol: 'TCP' }], from: MONITORING });
    }
    // The headless Services (client-side balancing) carry only gRPC, and no metrics label.
    for (const component of ['issuer', 'admin', 'billing']) {
      const headless = named(objects, 'Service', `rp-relayplane-${component}-headless`);
      expect(servicePorts(objects, headless.metadata.name).map((p) => p.name)).toEqual(['grpc']);
      expect(headless.metadata.labels?.['relayplane.dev/metrics']).toBeUndefined();
    }
    // The migration Jobs serve nothing, and the default deny stays.
    expect(ingressRules(objects, 'migrate')).toEqual([]);
    expect(named(objects, 'NetworkPolicy', 'rp-relayplane-default-deny').spec).toMatchObject({
      ingress: [],
      egress: [],
    });
    expect(byKind(objects, 'ServiceMonitor')).toEqual([]);
  });

  it('keeps the metrics port out of the Ingress', async () => {
    const objects = await renderExample('production-ha.yaml');
    const [ingress] = byKind(objects, 'Ingress');
    const backends = JSON.stringify(ingress?.spec);
    expect(backends).toContain('"name":"http"');
    expect(backends).not.toContain('metrics');
    expect(backends).not.toContain('9464');
  });

  it('metrics.enabled=false removes the env, the container and Service ports and the NetworkPolicy rule', async () => {
    const objects = await render({ set: [...REQUIRED_SETS, 'metrics.enabled=false'] });
    for (const component of COMPONENTS) {
      const c = appContainer(objects, component);
      expect(
        [...envOf(c).keys()].filter((name) => name.includes('METRICS')),
        component,
      ).toEqual([]);
      expect(
        c.ports?.map((p) => p.name),
        component,
      ).toEqual([component === 'gateway' ? 'http' : 'grpc']);
      expect(
        servicePorts(objects, `rp-relayplane-${component}`).map((p) => p.name),
        component,
      ).toEqual([component === 'gateway' ? 'http' : 'grpc']);
      const rules = ingressRules(objects, component);
      expect(rules, component).toHaveLength(1);
      expect(JSON.stringify(rules)).not.toContain('9464');
      expect(named(objects, 'Service', `rp-relayplane-${component}`).metadata.labels).not.toHaveProperty(
        'relayplane.dev/metrics',
      );
    }
    expect(byKind(objects, 'ServiceMonitor')).toEqual([]);
  });

  it('follows metrics.port and metrics.networkPolicy.from', async () => {
    const objects = await render({
      set: [...REQUIRED_SETS, 'metrics.port=9100', 'metrics.networkPolicy.from[0].ipBlock.cidr=10.8.0.0/16'],
    });
    for (const component of COMPONENTS) {
      const c = appContainer(objects, component);
      expect(envOf(c).get(`${component.toUpperCase()}_METRICS_ADDRESS`)?.value).toBe('0.0.0.0:9100');
      expect(c.ports).toContainEqual({ name: 'metrics', containerPort: 9100, protocol: 'TCP' });
      expect(servicePorts(objects, `rp-relayplane-${component}`)).toContainEqual(
        expect.objectContaining({ name: 'metrics', port: 9100, targetPort: 'metrics' }),
      );
      expect(ingressRules(objects, component)).toContainEqual({
        ports: [{ port: 9100, protocol: 'TCP' }],
        from: [{ ipBlock: { cidr: '10.8.0.0/16' } }],
      });
    }
    for (const o of objects) await validateK8s(o);
  });

  it('renders no ServiceMonitor unless enabled (minimal keeps it off)', async () => {
    expect(byKind(await renderExample('minimal.yaml'), 'ServiceMonitor')).toEqual([]);
    expect(byKind(await render({ set: REQUIRED_SETS }), 'ServiceMonitor')).toEqual([]);
  });

  it('renders one valid ServiceMonitor per app when enabled, each selecting exactly that app’s metrics Service', async () => {
    const objects = await render({
      set: [
        ...REQUIRED_SETS,
        'metrics.serviceMonitor.enabled=true',
        'metrics.serviceMonitor.interval=1m',
        'metrics.serviceMonitor.scrapeTimeout=20s',
        'metrics.serviceMonitor.labels.release=prometheus',
        'metrics.serviceMonitor.labels.team=edge',
      ],
    });
    const monitors = byKind(objects, 'ServiceMonitor');
    expect(monitors.map((m) => m.metadata.name)).toEqual(COMPONENTS.map((c) => `rp-relayplane-${c}`));
    const services = byKind(objects, 'Service');
    for (const component of COMPONENTS) {
      const sm = named(monitors, 'ServiceMonitor', `rp-relayplane-${component}`);
      expect(sm.apiVersion).toBe('monitoring.coreos.com/v1');
      await expect(validateK8s(sm), sm.metadata.name).resolves.toBeUndefined();
      expect((sm.metadata as { namespace?: string }).namespace).toBe('relay');
      // The chart's standard labels (those of the app's Service, from _helpers.tpl) plus the extra ones.
      const svc = named(objects, 'Service', `rp-relayplane-${component}`);
      const { 'relayplane.dev/metrics': _, ...standard } = svc.metadata.labels ?? {};
      expect(sm.metadata.labels).toEqual({ ...standard, release: 'prometheus', team: 'edge' });
      expect(sm.spec).toEqual({
        namespaceSelector: { matchNames: ['relay'] },
        selector: { matchLabels: expect.any(Object) },
        endpoints: [
          { port: 'metrics', path: '/metrics', scheme: 'http', interval: '1m', scrapeTimeout: '20s' },
        ],
      });
      const selector = (sm.spec as { selector: { matchLabels: Record<string, string> } }).selector
        .matchLabels;
      const selected = services.filter((s) =>
        Object.entries(selector).every(([k, v]) => s.metadata.labels?.[k] === v),
      );
      expect(selected.map((s) => s.metadata.name)).toEqual([`rp-relayplane-${component}`]);
      expect(servicePorts(objects, svc.metadata.name).map((p) => p.name)).toContain('metrics');
    }
  });

  it('puts the ServiceMonitors in metrics.serviceMonitor.namespace while still selecting the release namespace', async () => {
    const objects = await render({
      set: [
        ...REQUIRED_SETS,
        'metrics.serviceMonitor.enabled=true',
        'metrics.serviceMonitor.namespace=monitoring',
        'metrics.serviceMonitor.labels.app\\.kubernetes\\.io/name=other',
      ],
    });
    for (const sm of byKind(objects, 'ServiceMonitor')) {
      expect((sm.metadata as { namespace?: string }).namespace).toBe('monitoring');
      expect(sm.spec).toMatchObject({ namespaceSelector: { matchNames: ['relay'] } });
      expect((sm.spec as { endpoints: Record<string, unknown>[] }).endpoints[0]).toEqual({
        port: 'metrics',
        path: '/metrics',
        scheme: 'http',
        interval: '30s',
      });
      // Extra labels cannot replace the chart's own.
      expect(sm.metadata.labels?.['app.kubernetes.io/name']).toBe('relayplane');
    }
    expect(byKind(objects, 'ServiceMonitor')).toHaveLength(4);
  });

  it('production-ha scrapes through ServiceMonitors labelled for Prometheus', async () => {
    const objects = await renderExample('production-ha.yaml');
    const monitors = byKind(objects, 'ServiceMonitor');
    expect(monitors).toHaveLength(4);
    for (const sm of monitors) {
      expect(sm.metadata.labels?.release).toBe('prometheus');
      await validateK8s(sm);
    }
  });

  it('the ServiceMonitor model rejects a malformed object (the check has teeth)', async () => {
    const objects = await render({ set: [...REQUIRED_SETS, 'metrics.serviceMonitor.enabled=true'] });
    const [sm] = byKind(objects, 'ServiceMonitor');
    const broken = structuredClone(sm) as K8sObject;
    (broken.spec as { endpoints: { interval: string }[] }).endpoints[0] = { interval: '30 seconds' };
    await expect(validateK8s(broken)).rejects.toThrow();
    const noEndpoints = structuredClone(sm) as K8sObject;
    (noEndpoints.spec as Record<string, unknown>).endpoints = 'metrics';
    await expect(validateK8s(noEndpoints)).rejects.toThrow();
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

  it('redis.clusterNodes: every app gets its <APP>_REDIS_CLUSTER_NODES from the chart Secret and no URL; with a URL too, or malformed, it fails', async () => {
    // Node URLs carry the cluster's password: it must live in the Secret, not in the pod spec.
    const nodes = 'redis://:cl-pw-0123@redis-0.redis:6379,redis://:cl-pw-0123@[fd00::3]:6379';
    const objects = await render({
      set: [
        'database.existingSecret=rp-db',
        'kek.existingSecret=rp-kek',
        `redis.clusterNodes=${nodes.replaceAll(',', '\\,')}`,
      ],
    });
    for (const component of ['gateway', 'issuer', 'admin', 'billing']) {
      const c = podSpec(named(objects, 'Deployment', `rp-relayplane-${component}`)).containers[0];
      if (!c) throw new Error(`no ${component} container`);
      const env = envOf(c);
      const app = component.toUpperCase();
      expect(env.get(`${app}_REDIS_CLUSTER_NODES`)?.valueFrom?.secretKeyRef, component).toEqual({
        name: 'rp-relayplane',
        key: 'redis-cluster-nodes',
      });
      expect(env.has(`${app}_REDIS_URL`), component).toBe(false);
    }
    const [secret] = byKind(objects, 'Secret');
    expect(Buffer.from(dataOf(secret)['redis-cluster-nodes'] ?? '', 'base64').toString()).toBe(nodes);
    for (const o of objects.filter((o) => o.kind !== 'Secret')) {
      expect(JSON.stringify(o).includes('cl-pw-0123'), `${o.kind}/${o.metadata.name}`).toBe(false);
    }
    const both = await template({ set: [...REQUIRED_SETS, 'redis.clusterNodes=redis-0.redis:6379'] });
    expect(both.code).not.toBe(0);
    expect(both.stderr).toContain('redis: set either redis.clusterNodes');
    const malformed = await template({
      set: ['database.existingSecret=rp-db', 'kek.existingSecret=rp-kek', 'redis.clusterNodes=redis-0.redis'],
    });
    expect(malformed.code).not.toBe(0);
    expect(malformed.stderr).toContain('clusterNodes');
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

  it('fails a metrics port that a Service already uses, naming both values', async () => {
    const r = await template({ set: [...REQUIRED_SETS, 'gateway.service.port=9464'] });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('metrics.port: 9464 is also gateway.service.port');
    // No clash once metrics are off.
    expect(
      (await template({ set: [...REQUIRED_SETS, 'gateway.service.port=9464', 'metrics.enabled=false'] }))
        .code,
    ).toBe(0);
  });

  it('compares scrapeTimeout with interval as durations', async () => {
    const sm = (interval: string, scrapeTimeout: string) =>
      template({
        set: [
          ...REQUIRED_SETS,
          'metrics.serviceMonitor.enabled=true',
          `metrics.serviceMonitor.interval=${interval}`,
          `metrics.serviceMonitor.scrapeTimeout=${scrapeTimeout}`,
        ],
      });
    for (const [interval, timeout] of [
      ['1m', '60s'],
      ['1m30s', '90s'],
      ['2h', '1h59m59s999ms'],
      ['30s', '29500ms'],
      // Decimal even with a leading zero (not octal).
      ['10s', '010s'],
    ] as const)
      expect((await sm(interval, timeout)).code, `${interval} ≥ ${timeout}`).toBe(0);
    for (const [interval, timeout] of [
      ['1m30s', '91s'],
      ['30s', '30001ms'],
      ['1d', '1w'],
      ['10s', '011s'],
    ] as const) {
      const r = await sm(interval, timeout);
      expect(r.code, `${interval} < ${timeout}`).not.toBe(0);
      expect(r.stderr).toContain(`scrapeTimeout (${timeout}) is longer than interval (${interval})`);
    }
  });

  it('fails a ServiceMonitor without metrics', async () => {
    const r = await template({
      set: [...REQUIRED_SETS, 'metrics.enabled=false', 'metrics.serviceMonitor.enabled=true'],
    });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('metrics.serviceMonitor: enabled while metrics.enabled is false');
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

describe('billing: Redis, issuer and payment provider', () => {
  type Egress = { ports: { port: number; protocol: string }[]; to?: Record<string, unknown>[] };
  const STRIPE_SECRETS = ['STRIPE_SECRET_KEY', 'STRIPE_WEBHOOK_SECRET'] as const;
  /** Stripe by reference: an existing Secret and a priced plan. */
  const STRIPE_SETS = [
    ...REQUIRED_SETS,
    'billing.provider=stripe',
    'billing.stripe.existingSecret=rp-stripe',
    'plans.pro.stripe_price_id=price_123',
  ];
  const billingEnv = (objects: K8sObject[]) => {
    const c = podSpec(named(objects, 'Deployment', 'rp-relayplane-billing')).containers[0];
    if (!c) throw new Error('no billing container');
    return envOf(c);
  };
  const egressOf = (objects: K8sObject[], component: string): Egress[] =>
    (named(objects, 'NetworkPolicy', `rp-relayplane-${component}`).spec as { egress: Egress[] }).egress;
  const https = (objects: K8sObject[], component: string): Egress[] =>
    egressOf(objects, component).filter((r) => r.ports.some((p) => p.port === 443));

  it('defaults to the built-in provider: no Stripe variable, no Stripe secret and no HTTPS egress', async () => {
    // Inline Stripe keys are ignored (and not stored) while the provider is builtin.
    const objects = await render({
      set: [
        ...REQUIRED_SETS,
        'billing.stripe.secretKey=sk_test_unused',
        'billing.stripe.webhookSecret=whsec_unused',
      ],
    });
    const env = billingEnv(objects);
    expect(env.get('BILLING_PROVIDER')?.value).toBe('builtin');
    expect([...env.keys()].filter((name) => name.startsWith('STRIPE_'))).toEqual([]);
    expect(byKind(objects, 'Secret')).toEqual([]);
    expect(JSON.stringify(objects)).not.toContain('_unused');
    for (const component of [...COMPONENTS, 'migrate'])
      expect(https(objects, component), component).toEqual([]);
  });

  it('renders the Redis, issuer and checkout tuning variables, the optional ones only when set', async () => {
    const defaults = billingEnv(await render({ set: REQUIRED_SETS }));
    expect(defaults.get('BILLING_REDIS_URL')?.valueFrom?.secretKeyRef).toEqual({
      name: 'rp-redis',
      key: 'redis-url',
    });
    expect(defaults.get('BILLING_REDIS_URL')?.value).toBeUndefined();
    expect(defaults.get('BILLING_ISSUER_ADDRESS')?.value).toBe(
      'dns:///rp-relayplane-issuer-headless.relay.svc.cluster.local:50051',
    );
    for (const name of [
      'BILLING_REDIS_COMMAND_TIMEOUT_MS',
      'BILLING_CHECKOUT_MAX_PER_WINDOW',
      'BILLING_CHECKOUT_WINDOW_SECONDS',
      'BILLING_CHECKOUT_SESSION_TTL_SECONDS',
      'STRIPE_WEBHOOK_TOLERANCE_SECONDS',
    ])
      expect(defaults.has(name), name).toBe(false);

    const tuned = billingEnv(
      await render({
        set: [
          ...STRIPE_SETS,
          'redis.prefix=relay:',
          'redis.existingSecretKey=url',
          'issuer.port=50061',
          'billing.redisCommandTimeoutMs=500',
          'billing.checkout.maxPerWindow=20',
          'billing.checkout.windowSeconds=300',
          'billing.checkout.sessionTtlSeconds=3600',
          'billing.stripe.webhookToleranceSeconds=600',
        ],
      }),
    );
    expect(tuned.get('BILLING_REDIS_URL')?.valueFrom?.secretKeyRef).toEqual({ name: 'rp-redis', key: 'url' });
    expect(tuned.get('BILLING_REDIS_PREFIX')?.value).toBe('relay:');
    expect(tuned.get('BILLING_ISSUER_ADDRESS')?.value).toBe(
      'dns:///rp-relayplane-issuer-headless.relay.svc.cluster.local:50061',
    );
    expect(tuned.get('BILLING_REDIS_COMMAND_TIMEOUT_MS')?.value).toBe('500');
    expect(tuned.get('BILLING_CHECKOUT_MAX_PER_WINDOW')?.value).toBe('20');
    expect(tuned.get('BILLING_CHECKOUT_WINDOW_SECONDS')?.value).toBe('300');
    expect(tuned.get('BILLING_CHECKOUT_SESSION_TTL_SECONDS')?.value).toBe('3600');
    expect(tuned.get('STRIPE_WEBHOOK_TOLERANCE_SECONDS')?.value).toBe('600');
  });

  it('passes the Stripe secrets to billing only by reference to billing.stripe.existingSecret', async () => {
    const objects = await render({
      set: [
        ...STRIPE_SETS,
        'billing.stripe.existingSecretKeys.secretKey=sk',
        'billing.stripe.existingSecretKeys.webhookSecret=whsec',
      ],
    });
    const env = billingEnv(objects);
    expect(env.get('BILLING_PROVIDER')?.value).toBe('stripe');
    expect(env.get('STRIPE_SECRET_KEY')).toEqual({
      name: 'STRIPE_SECRET_KEY',
      valueFrom: { secretKeyRef: { name: 'rp-stripe', key: 'sk' } },
    });
    expect(env.get('STRIPE_WEBHOOK_SECRET')).toEqual({
      name: 'STRIPE_WEBHOOK_SECRET',
      valueFrom: { secretKeyRef: { name: 'rp-stripe', key: 'whsec' } },
    });
    // STRIPE_API_BASE points the SDK at a mock in the app's tests; the chart never sets it.
    expect(env.has('STRIPE_API_BASE')).toBe(false);
    // No other component sees the Stripe secrets, and the chart stores none of its own.
    for (const component of ['gateway', 'issuer', 'admin']) {
      const c = podSpec(named(objects, 'Deployment', `rp-relayplane-${component}`)).containers[0];
      expect([...envOf(c ?? { name: '', image: '' }).keys()].filter((n) => n.startsWith('STRIPE_'))).toEqual(
        [],
      );
    }
    expect(byKind(objects, 'Secret')).toEqual([]);
    for (const o of objects) await validateK8s(o);
  });

  it('keeps inline Stripe secrets in the chart Secret only: never in env, a ConfigMap or any other object', async () => {
    const secretKey = 'sk_live_51HiddenChartSecretKey0123456789';
    const webhookSecret = 'whsec_HiddenWebhookSigningSecret0123456789';
    const objects = await render({
      set: [
        ...REQUIRED_SETS,
        'billing.provider=stripe',
        `billing.stripe.secretKey=${secretKey}`,
        `billing.stripe.webhookSecret=${webhookSecret}`,
        'plans.pro.stripe_price_id=price_123',
      ],
    });
    const env = billingEnv(objects);
    expect(env.get('STRIPE_SECRET_KEY')?.valueFrom?.secretKeyRef).toEqual({
      name: 'rp-relayplane',
      key: 'stripe-secret-key',
    });
    expect(env.get('STRIPE_WEBHOOK_SECRET')?.valueFrom?.secretKeyRef).toEqual({
      name: 'rp-relayplane',
      key: 'stripe-webhook-secret',
    });
    for (const name of STRIPE_SECRETS) expect(env.get(name)?.value, name).toBeUndefined();
    const chartSecret = named(objects, 'Secret', 'rp-relayplane');
    const stored = Object.fromEntries(
      Object.entries(dataOf(chartSecret)).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]),
    );
    expect(stored).toEqual({ 'stripe-secret-key': secretKey, 'stripe-webhook-secret': webhookSecret });
    for (const o of objects) {
      if (o.kind === 'Secret') continue;
      const text = JSON.stringify(o);
      for (const secret of [secretKey, webhookSecret]) {
        const where = `${o.kind}/${o.metadata.name}`;
        expect(text.includes(secret), `${where} contains a Stripe secret`).toBe(false);
        expect(text.includes(Buffer.from(secret).toString('base64')), `${where} contains it in base64`).toBe(
          false,
        );
      }
    }
    // The pods roll when the keys change (checksum of the chart Secret's data).
    const checksum = (objs: K8sObject[]) =>
      (
        named(objs, 'Deployment', 'rp-relayplane-billing').spec as {
          template: { metadata: { annotations: Record<string, string> } };
        }
      ).template.metadata.annotations['checksum/secret'];
    const rotated = await render({
      set: [
        ...REQUIRED_SETS,
        'billing.provider=stripe',
        'billing.stripe.secretKey=sk_live_rotated',
        `billing.stripe.webhookSecret=${webhookSecret}`,
        'plans.pro.stripe_price_id=price_123',
      ],
    });
    expect(checksum(rotated)).not.toBe(checksum(objects));
  });

  it('opens HTTPS (TCP 443) from billing only, only with Stripe, to billing.stripe.egressTo (default anywhere)', async () => {
    const objects = await render({ set: STRIPE_SETS });
    expect(https(objects, 'billing')).toEqual([
      { ports: [{ port: 443, protocol: 'TCP' }], to: [{ ipBlock: { cidr: '0.0.0.0/0' } }] },
    ]);
    for (const component of ['gateway', 'issuer', 'admin', 'migrate'])
      expect(https(objects, component), component).toEqual([]);
    // billing → issuer gRPC and Redis stay, and the issuer admits billing.
    const ports = egressOf(objects, 'billing').flatMap((r) => r.ports.map((p) => p.port));
    expect(ports).toEqual(expect.arrayContaining([50051, 6379, 5432, 443]));
    const issuerIngress = (
      named(objects, 'NetworkPolicy', 'rp-relayplane-issuer').spec as {
        ingress: {
          ports: { port: number }[];
          from?: { podSelector?: { matchLabels: Record<string, string> } }[];
        }[];
      }
    ).ingress.find((r) => r.ports.some((p) => p.port === 50051));
    expect(
      issuerIngress?.from?.map((f) => f.podSelector?.matchLabels['app.kubernetes.io/component']),
    ).toEqual(['gateway', 'billing']);

    const narrowed = await render({
      set: [
        ...STRIPE_SETS,
        'billing.stripe.egressTo[0].ipBlock.cidr=10.9.0.0/24',
        'billing.stripe.egressTo[1].namespaceSelector.matchLabels.egress=proxy',
      ],
    });
    expect(https(narrowed, 'billing')).toEqual([
      {
        ports: [{ port: 443, protocol: 'TCP' }],
        to: [
          { ipBlock: { cidr: '10.9.0.0/24' } },
          { namespaceSelector: { matchLabels: { egress: 'proxy' } } },
        ],
      },
    ]);
    for (const o of byKind(narrowed, 'NetworkPolicy')) await validateK8s(o);
  });

  it('production-ha configures Stripe through an existing Secret, with HTTPS egress for billing alone', async () => {
    const objects = await renderExample('production-ha.yaml');
    const env = billingEnv(objects);
    expect(env.get('BILLING_PROVIDER')?.value).toBe('stripe');
    expect(env.get('STRIPE_SECRET_KEY')?.valueFrom?.secretKeyRef).toEqual({
      name: 'relayplane-stripe',
      key: 'secret-key',
    });
    expect(env.get('STRIPE_WEBHOOK_SECRET')?.valueFrom?.secretKeyRef).toEqual({
      name: 'relayplane-stripe',
      key: 'webhook-secret',
    });
    expect(dataOf(byKind(objects, 'ConfigMap')[0])['plans.yaml']).toMatch(/stripe_price_id: price_\w+/);
    expect(https(objects, 'billing')).toHaveLength(1);
    expect(https(objects, 'billing')[0]?.to).toEqual([
      { ipBlock: { cidr: '0.0.0.0/0', except: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'] } },
    ]);
    for (const component of ['gateway', 'issuer', 'admin', 'migrate'])
      expect(https(objects, component), component).toEqual([]);
  });

  it('validate.yaml: Stripe needs both secrets (or an existingSecret) and a priced plan, and says what to set', async () => {
    const stripe = (...set: string[]) =>
      template({
        set: [...REQUIRED_SETS, 'billing.provider=stripe', 'plans.pro.stripe_price_id=price_1', ...set],
      });
    const none = await stripe();
    expect(none.code).not.toBe(0);
    expect(none.stderr).toContain(
      'billing.stripe: billing.provider is stripe but no Stripe secrets are given',
    );
    expect(none.stderr).toContain('set billing.stripe.existingSecret');
    expect(none.stderr).toContain('billing.stripe.secretKey and billing.stripe.webhookSecret');
    const keyOnly = await stripe('billing.stripe.secretKey=sk_test_abc');
    expect(keyOnly.code).not.toBe(0);
    expect(keyOnly.stderr).toContain('billing.provider is stripe but billing.stripe.webhookSecret is empty');
    const webhookOnly = await stripe('billing.stripe.webhookSecret=whsec_abc');
    expect(webhookOnly.code).not.toBe(0);
    expect(webhookOnly.stderr).toContain('billing.provider is stripe but billing.stripe.secretKey is empty');
    expect(
      (await stripe('billing.stripe.secretKey=sk_test_abc', 'billing.stripe.webhookSecret=whsec_abc')).code,
    ).toBe(0);
    expect((await stripe('billing.stripe.existingSecret=rp-stripe')).code).toBe(0);
    const unpriced = await template({
      set: [...REQUIRED_SETS, 'billing.provider=stripe', 'billing.stripe.existingSecret=rp-stripe'],
    });
    expect(unpriced.code).not.toBe(0);
    expect(unpriced.stderr).toContain('plans: billing.provider is stripe but no plan sets stripe_price_id');
    expect(unpriced.stderr).not.toContain('billing.stripe:');
  });
});

describe('V8 heap sized from the container, not the node', () => {
  const nodeOptions = (objects: K8sObject[], component: string) => {
    const d = byKind(objects, 'Deployment').find((o) => o.metadata.name.endsWith(`-${component}`));
    const c = d && podSpec(d).containers[0];
    return c?.env?.find((e) => e.name === 'NODE_OPTIONS')?.value;
  };

  it('gives every app half its memory limit as old space and 8 MiB semi-spaces', async () => {
    const objects = await render({ set: REQUIRED_SETS });
    for (const component of COMPONENTS) {
      expect(nodeOptions(objects, component), component).toBe(
        '--max-old-space-size=256 --max-semi-space-size=8',
      );
    }
  });

  it.each([
    ['1Gi', 512],
    ['768Mi', 384],
    ['1G', 476],
    ['2097152Ki', 1024],
    ['536870912', 256],
  ])('reads a limit of %s as old space %i MiB', async (limit, oldSpace) => {
    const objects = await render({ set: [...REQUIRED_SETS, `admin.resources.limits.memory=${limit}`] });
    expect(nodeOptions(objects, 'admin')).toBe(`--max-old-space-size=${oldSpace} --max-semi-space-size=8`);
    expect(nodeOptions(objects, 'gateway')).toBe('--max-old-space-size=256 --max-semi-space-size=8');
  });

  it("fixes admin's malloc mmap threshold (argon2's blocks go back to the OS), and only admin's", async () => {
    const objects = await render({ set: REQUIRED_SETS });
    const threshold = (component: string) => {
      const d = byKind(objects, 'Deployment').find((o) => o.metadata.name.endsWith(`-${component}`));
      return d && podSpec(d).containers[0]?.env?.find((e) => e.name === 'MALLOC_MMAP_THRESHOLD_')?.value;
    };
    expect(threshold('admin')).toBe('131072');
    for (const component of COMPONENTS.filter((c) => c !== 'admin')) {
      expect(threshold(component), component).toBeUndefined();
    }
  });

  it('refuses a limit it cannot read, naming it', async () => {
    const r = await template({ set: [...REQUIRED_SETS, 'admin.resources.limits.memory=1.5Gi'] });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('cannot read the memory limit "1.5Gi"');
  });
});

describe('behind an ingress, and the abuse settings (issue 18)', () => {
  const ingressSets = [
    'gateway.ingress.enabled=true',
    'gateway.ingress.hosts[0].host=api.example.com',
    'gateway.ingress.hosts[0].paths[0].path=/',
  ];
  const appEnv = (objects: K8sObject[], component = 'gateway') => {
    const d = byKind(objects, 'Deployment').find((o) => o.metadata.name.endsWith(`-${component}`));
    const c = d && podSpec(d).containers[0];
    if (!c) throw new Error(`no ${component} container`);
    return envOf(c);
  };

  it('refuses gateway.ingress.enabled without gateway.trustedProxies, saying why', async () => {
    const r = await template({ set: [...REQUIRED_SETS, ...ingressSets] });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('gateway.ingress: enabled without gateway.trustedProxies');
    expect(r.stderr).toContain('per-IP login and sign-up throttles would become one global limit');
    expect(r.stderr).toContain('IP allowlists would see the ingress');
    expect(r.stderr).toContain('session cookies would lose Secure');
  });

  it('renders the Ingress once gateway.trustedProxies names the ingress controller', async () => {
    const objects = await render({
      set: [...REQUIRED_SETS, ...ingressSets, 'gateway.trustedProxies[0]=10.42.0.0/16'],
    });
    const [ingress] = byKind(objects, 'Ingress');
    expect(JSON.stringify(ingress?.spec)).toContain('"host":"api.example.com"');
    expect(appEnv(objects).get('GATEWAY_TRUSTED_PROXIES')?.value).toBe('10.42.0.0/16');
  });

  it('renders no Ingress by default', async () => {
    expect(byKind(await render({ set: REQUIRED_SETS }), 'Ingress')).toEqual([]);
  });

  it('keeps paid built-in checkout off unless billing.builtinPaidCheckout is set', async () => {
    const off = appEnv(await render({ set: REQUIRED_SETS }), 'billing');
    expect(off.get('BILLING_BUILTIN_PAID_CHECKOUT')?.value).toBe('false');
    const on = appEnv(
      await render({ set: [...REQUIRED_SETS, 'billing.builtinPaidCheckout=true'] }),
      'billing',
    );
    expect(on.get('BILLING_BUILTIN_PAID_CHECKOUT')?.value).toBe('true');
  });

  it('has the gateway serve on for 5 s after SIGTERM while endpoints drop the pod (gateway.shutdownDelayMs; 0: not set)', async () => {
    const objects = await render({ set: REQUIRED_SETS });
    expect(appEnv(objects).get('GATEWAY_SHUTDOWN_DELAY_MS')?.value).toBe('5000');
    for (const other of ['issuer', 'admin', 'billing']) {
      expect(appEnv(objects, other).has('GATEWAY_SHUTDOWN_DELAY_MS'), other).toBe(false);
    }
    const off = appEnv(await render({ set: [...REQUIRED_SETS, 'gateway.shutdownDelayMs=0'] }));
    expect(off.has('GATEWAY_SHUTDOWN_DELAY_MS')).toBe(false);
    const refused = await template({ set: [...REQUIRED_SETS, 'gateway.shutdownDelayMs=20000'] });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/shutdownDelayMs/);
  });

  it("renders the gateway's slow-client settings only when set", async () => {
    const defaults = appEnv(await render({ set: REQUIRED_SETS }));
    for (const name of [
      'GATEWAY_HEADERS_TIMEOUT_MS',
      'GATEWAY_REQUEST_TIMEOUT_MS',
      'GATEWAY_KEEP_ALIVE_TIMEOUT_MS',
      'GATEWAY_MAX_CONNECTIONS',
      'GATEWAY_MAX_CONNECTIONS_PER_IP',
    ]) {
      expect(defaults.has(name), name).toBe(false);
    }
    const set = appEnv(
      await render({
        set: [
          ...REQUIRED_SETS,
          'gateway.headersTimeoutMs=5000',
          'gateway.requestTimeoutMs=20000',
          'gateway.keepAliveTimeoutMs=65000',
          'gateway.maxConnections=2000',
          'gateway.maxConnectionsPerIp=64',
        ],
      }),
    );
    expect(set.get('GATEWAY_HEADERS_TIMEOUT_MS')?.value).toBe('5000');
    expect(set.get('GATEWAY_REQUEST_TIMEOUT_MS')?.value).toBe('20000');
    expect(set.get('GATEWAY_KEEP_ALIVE_TIMEOUT_MS')?.value).toBe('65000');
    expect(set.get('GATEWAY_MAX_CONNECTIONS')?.value).toBe('2000');
    expect(set.get('GATEWAY_MAX_CONNECTIONS_PER_IP')?.value).toBe('64');
  });
});

describe('gRPC mutual TLS (tls.grpc)', () => {
  const TLS_SETS = [
    ...REQUIRED_SETS,
    'tls.grpc.enabled=true',
    'tls.grpc.certManager.issuerRef.name=internal-ca',
  ];
  const TLS_ENV = [
    'RELAYPLANE_GRPC_TLS_CERT_FILE',
    'RELAYPLANE_GRPC_TLS_KEY_FILE',
    'RELAYPLANE_GRPC_TLS_CA_FILE',
  ];
  const deployment = (objects: K8sObject[], component: string) => {
    const d = byKind(objects, 'Deployment').find((o) => o.metadata.name.endsWith(`-${component}`));
    if (!d) throw new Error(`no ${component} Deployment`);
    return podSpec(d);
  };
  const tlsSecretOf = (objects: K8sObject[], component: string) =>
    (
      deployment(objects, component).volumes?.find((v) => v.name === 'grpc-tls') as
        | { secret?: { secretName: string } }
        | undefined
    )?.secret?.secretName;

  it('is off by default: no Certificate, no TLS variables, no certificate volume', async () => {
    const objects = await render({ set: REQUIRED_SETS });
    expect(byKind(objects, 'Certificate')).toEqual([]);
    for (const component of COMPONENTS) {
      const env = envOf(deployment(objects, component).containers[0] as Container);
      for (const name of [...TLS_ENV, 'RELAYPLANE_TRUST_DOMAIN']) expect(env.has(name), name).toBe(false);
      expect(tlsSecretOf(objects, component)).toBeUndefined();
    }
  });

  it('renders one valid cert-manager Certificate per app with its SPIFFE ID, mounted where the app reads it', async () => {
    const objects = await render({ set: [...TLS_SETS, 'tls.grpc.trustDomain=prod.example.com'] });
    const certificates = byKind(objects, 'Certificate');
    expect(certificates).toHaveLength(4);
    for (const component of COMPONENTS) {
      const cert = named(certificates, 'Certificate', `rp-relayplane-${component}-grpc-tls`);
      await validateK8s(cert);
      const spec = cert.spec as { secretName: string; uris: string[]; usages: string[]; issuerRef: unknown };
      expect(spec.uris).toEqual([`spiffe://prod.example.com/${component}`]);
      expect(spec.usages).toEqual(expect.arrayContaining(['server auth', 'client auth']));
      expect(spec.issuerRef).toEqual({ name: 'internal-ca', kind: 'Issuer', group: 'cert-manager.io' });
      expect(tlsSecretOf(objects, component)).toBe(spec.secretName);
      const container = deployment(objects, component).containers[0] as Container;
      expect(container.volumeMounts).toContainEqual({
        name: 'grpc-tls',
        mountPath: '/etc/relayplane/grpc-tls',
        readOnly: true,
      });
      const env = envOf(container);
      expect(env.get('RELAYPLANE_GRPC_TLS_CERT_FILE')?.value).toBe('/etc/relayplane/grpc-tls/tls.crt');
      expect(env.get('RELAYPLANE_GRPC_TLS_KEY_FILE')?.value).toBe('/etc/relayplane/grpc-tls/tls.key');
      expect(env.get('RELAYPLANE_GRPC_TLS_CA_FILE')?.value).toBe('/etc/relayplane/grpc-tls/ca.crt');
      expect(env.get('RELAYPLANE_TRUST_DOMAIN')?.value).toBe('prod.example.com');
    }
    // The migration Jobs make no gRPC call: no certificate.
    for (const job of byKind(objects, 'Job')) {
      expect(JSON.stringify(job)).not.toContain('grpc-tls');
    }
  });

  it('points the kubelet gRPC probes at the plaintext health-only listener, which the apps open on tls.grpc.healthPort', async () => {
    const objects = await render({ set: TLS_SETS });
    for (const component of COMPONENTS.filter((c) => c !== 'gateway')) {
      const container = deployment(objects, component).containers[0] as Container & Record<string, unknown>;
      const env = envOf(container);
      expect(env.get(`${component.toUpperCase()}_HEALTH_LISTEN_ADDRESS`)?.value).toBe('0.0.0.0:9090');
      expect(container.ports).toContainEqual({ name: 'grpc-health', containerPort: 9090, protocol: 'TCP' });
      for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe']) {
        expect((container[probe] as { grpc: { port: number } }).grpc.port, `${component} ${probe}`).toBe(
          9090,
        );
      }
    }
    const gateway = envOf(deployment(objects, 'gateway').containers[0] as Container);
    expect([...gateway.keys()].filter((name) => name.includes('HEALTH_LISTEN'))).toEqual([]);
    // Without TLS the probes ask the app's own port, and there is no second listener.
    const plain = await render({ set: REQUIRED_SETS });
    const issuer = deployment(plain, 'issuer').containers[0] as Container & Record<string, unknown>;
    expect((issuer.readinessProbe as { grpc: { port: number } }).grpc.port).toBe(50051);
    expect(envOf(issuer).has('ISSUER_HEALTH_LISTEN_ADDRESS')).toBe(false);
  });

  it('refuses a health port that is also an app port', async () => {
    const r = await template({ set: [...TLS_SETS, 'tls.grpc.healthPort=50052'] });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('tls.grpc.healthPort: 50052 is also admin.port');
  });

  it('keeps the NetworkPolicies exactly as without TLS', async () => {
    const policies = async (set: readonly string[]) => byKind(await render({ set }), 'NetworkPolicy');
    expect(await policies(TLS_SETS)).toEqual(await policies(REQUIRED_SETS));
  });

  it('mounts existing Secrets instead when cert-manager is off', async () => {
    const objects = await render({
      set: [
        ...REQUIRED_SETS,
        'tls.grpc.enabled=true',
        'tls.grpc.certManager.enabled=false',
        ...COMPONENTS.map((c) => `tls.grpc.existingSecrets.${c}=spire-${c}`),
      ],
    });
    expect(byKind(objects, 'Certificate')).toEqual([]);
    for (const component of COMPONENTS) expect(tlsSecretOf(objects, component)).toBe(`spire-${component}`);
  });

  it('refuses cert-manager without an issuer, and existing Secrets with one missing, saying what to set', async () => {
    const noIssuer = await template({ set: [...REQUIRED_SETS, 'tls.grpc.enabled=true'] });
    expect(noIssuer.code).not.toBe(0);
    expect(noIssuer.stderr).toContain(
      'tls.grpc: cert-manager is on without an issuer. Set tls.grpc.certManager.issuerRef.name',
    );
    const missing = await template({
      set: [
        ...REQUIRED_SETS,
        'tls.grpc.enabled=true',
        'tls.grpc.certManager.enabled=false',
        'tls.grpc.existingSecrets.gateway=gw',
        'tls.grpc.existingSecrets.issuer=iss',
        'tls.grpc.existingSecrets.admin=adm',
      ],
    });
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toContain(
      "tls.grpc.existingSecrets.billing: no Secret for the billing's gRPC certificate",
    );
    expect(missing.stderr).not.toContain('tls.grpc.existingSecrets.gateway:');
  });

  it('refuses a ClusterIssuer until clusterIssuerDedicated confirms it signs only these identities (issue 31)', async () => {
    const clusterIssuer = [...TLS_SETS, 'tls.grpc.certManager.issuerRef.kind=ClusterIssuer'];
    const shared = await template({ set: clusterIssuer });
    expect(shared.code).not.toBe(0);
    expect(shared.stderr).toContain(
      'tls.grpc.certManager: the ClusterIssuer "internal-ca" may sign for any namespace, and whoever gets a certificate for spiffe://relayplane.local/gateway from it can call admin as the gateway.',
    );
    expect(shared.stderr).toContain('set tls.grpc.certManager.clusterIssuerDedicated=true');
    const objects = await render({
      set: [...clusterIssuer, 'tls.grpc.certManager.clusterIssuerDedicated=true'],
    });
    const certificates = byKind(objects, 'Certificate');
    expect(certificates).toHaveLength(COMPONENTS.length);
    for (const cert of certificates) {
      expect((cert.spec as { issuerRef: unknown }).issuerRef).toEqual({
        name: 'internal-ca',
        kind: 'ClusterIssuer',
        group: 'cert-manager.io',
      });
    }
    // A namespaced Issuer (the default kind) needs no confirmation.
    expect((await template({ set: TLS_SETS })).code).toBe(0);
  });
});

describe('KEK rotation (RELAYPLANE_KEK_PREVIOUS)', () => {
  const issuerEnv = (objects: K8sObject[]) => {
    const d = byKind(objects, 'Deployment').find((o) => o.metadata.name.endsWith('-issuer'));
    if (!d) throw new Error('no issuer Deployment');
    return envOf(podSpec(d).containers[0] as Container);
  };
  const KEK = Buffer.alloc(32, 1).toString('base64');
  const OLD = Buffer.alloc(32, 2).toString('base64');

  it('reads the previous KEKs from the existing Secret as an optional key', async () => {
    const env = issuerEnv(await render({ set: REQUIRED_SETS }));
    expect(env.get('RELAYPLANE_KEK_PREVIOUS')?.valueFrom).toEqual({
      secretKeyRef: { name: 'rp-kek', key: 'previous', optional: true },
    });
  });

  it('stores kek.previous in the chart Secret beside the KEK, and renders nothing without it', async () => {
    const managed = ['database.existingSecret=rp-db', 'redis.existingSecret=rp-redis', `kek.value=${KEK}`];
    const objects = await render({ set: [...managed, `kek.previous=${OLD}`] });
    const env = issuerEnv(objects);
    const ref = env.get('RELAYPLANE_KEK_PREVIOUS')?.valueFrom?.secretKeyRef as
      | { name: string; key: string }
      | undefined;
    expect(ref?.key).toBe('kek-previous');
    const secret = byKind(objects, 'Secret').find((s) => s.metadata.name === ref?.name);
    expect(Buffer.from(dataOf(secret)['kek-previous'] ?? '', 'base64').toString()).toBe(OLD);
    expect(issuerEnv(await render({ set: managed })).has('RELAYPLANE_KEK_PREVIOUS')).toBe(false);
  });

  it('refuses a previous KEK that is not base64 of 32 bytes', async () => {
    const r = await template({ set: [...REQUIRED_SETS, 'kek.previous=not-a-key'] });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('/kek/previous');
  });
});
