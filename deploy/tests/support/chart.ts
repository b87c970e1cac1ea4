import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { chartDir, helm } from './helm.ts';

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: Record<string, unknown>;
  [key: string]: unknown;
}

export const examplesDir = join(chartDir, 'examples');
export const invalidDir = join(chartDir, 'tests/invalid');

export const exampleFiles = (): string[] =>
  readdirSync(examplesDir)
    .filter((f) => f.endsWith('.yaml'))
    .sort();

export const invalidFiles = (): string[] =>
  readdirSync(invalidDir)
    .filter((f) => f.endsWith('.yaml'))
    .sort();

export type InvalidFixture =
  /** Rejected by values.schema.json: helm reports `at '<instancePath>': …`. */
  | { by: 'schema'; instancePath: string; message: string }
  /** Valid for the schema, rejected by templates/validate.yaml with `message`. */
  | { by: 'template'; message: string };

/**
 * Every file in tests/invalid/, why it must be rejected, and the text helm must print, which
 * names the offending value (so a file cannot pass for another reason).
 */
export const INVALID_FIXTURES: Record<string, InvalidFixture> = {
  'bad-database-url.yaml': { by: 'schema', instancePath: '/database/url', message: "at '/database/url'" },
  'bad-digest.yaml': {
    by: 'schema',
    instancePath: '/image/digests/issuer',
    message: "at '/image/digests/issuer'",
  },
  'bad-kek.yaml': { by: 'schema', instancePath: '/kek/value', message: "at '/kek/value'" },
  'bad-log-level.yaml': {
    by: 'schema',
    instancePath: '/logLevel',
    message: "at '/logLevel': value must be one of",
  },
  'bad-scrape-interval.yaml': {
    by: 'schema',
    instancePath: '/metrics/serviceMonitor/interval',
    message: "at '/metrics/serviceMonitor/interval': '30 seconds' does not match pattern",
  },
  'bad-service-type.yaml': {
    by: 'schema',
    instancePath: '/gateway/service/type',
    message: "at '/gateway/service/type': value must be one of",
  },
  'checkout-session-ttl-out-of-range.yaml': {
    by: 'schema',
    instancePath: '/billing/checkout/sessionTtlSeconds',
    message: "at '/billing/checkout/sessionTtlSeconds': minimum",
  },
  'hpa-min-above-max.yaml': {
    by: 'template',
    message: 'issuer.autoscaling: maxReplicas (3) is below minReplicas (6)',
  },
  'ingress-at-top-level.yaml': {
    by: 'template',
    message: 'ingress: moved to gateway.ingress. Move the ingress block under gateway',
  },
  'ingress-without-trusted-proxies.yaml': {
    by: 'template',
    message:
      'gateway.ingress: enabled without gateway.trustedProxies. Behind an ingress every client reaches the gateway from the ingress controller',
  },
  'issuance-streams-out-of-range.yaml': {
    by: 'schema',
    instancePath: '/gateway/issuanceStreams',
    message: "at '/gateway/issuanceStreams': maximum",
  },
  'latest-tag.yaml': { by: 'schema', instancePath: '/image/tag', message: "at '/image/tag'" },
  'max-connection-age-out-of-range.yaml': {
    by: 'schema',
    instancePath: '/issuer/maxConnectionAgeMs',
    message: "at '/issuer/maxConnectionAgeMs'",
  },
  'metrics-port-clash.yaml': {
    by: 'template',
    message: 'metrics.port: 50052 is also admin.port',
  },
  'metrics-port-out-of-range.yaml': {
    by: 'schema',
    instancePath: '/metrics/port',
    message: "at '/metrics/port': minimum",
  },
  'negative-replicas.yaml': {
    by: 'schema',
    instancePath: '/gateway/replicaCount',
    message: "at '/gateway/replicaCount': minimum",
  },
  'port-out-of-range.yaml': {
    by: 'schema',
    instancePath: '/billing/port',
    message: "at '/billing/port': maximum",
  },
  'resources-wrong-type.yaml': {
    by: 'schema',
    instancePath: '/billing/resources',
    message: "at '/billing/resources': got string, want object",
  },
  'scrape-timeout-above-interval.yaml': {
    by: 'template',
    message: 'metrics.serviceMonitor: scrapeTimeout (1m) is longer than interval (15s)',
  },
  'stripe-api-base.yaml': {
    by: 'schema',
    instancePath: '/billing/stripe',
    message: "at '/billing/stripe': additional properties 'apiBase' not allowed",
  },
  'stripe-without-price.yaml': {
    by: 'template',
    message: 'plans: billing.provider is stripe but no plan sets stripe_price_id',
  },
  'stripe-without-secret.yaml': {
    by: 'template',
    message:
      'billing.stripe: billing.provider is stripe but no Stripe secrets are given. Create a Secret with the secret key',
  },
  'trusted-proxies-not-list.yaml': {
    by: 'schema',
    instancePath: '/gateway/trustedProxies',
    message: "at '/gateway/trustedProxies': got string, want array",
  },
  'unknown-billing-provider.yaml': {
    by: 'schema',
    instancePath: '/billing/provider',
    message: "at '/billing/provider': value must be one of 'builtin', 'stripe'",
  },
  'unknown-key.yaml': {
    by: 'schema',
    instancePath: '/gateway',
    message: "at '/gateway': additional properties 'replicas' not allowed",
  },
  'unknown-nested-key.yaml': {
    by: 'schema',
    instancePath: '/admin/autoscaling',
    message: "at '/admin/autoscaling': additional properties 'targetCPU' not allowed",
  },
  'unknown-plan.yaml': {
    by: 'schema',
    instancePath: '/plans',
    message: "at '/plans': additional properties 'gold' not allowed",
  },
  'unknown-service-monitor-key.yaml': {
    by: 'schema',
    instancePath: '/metrics/serviceMonitor',
    message: "at '/metrics/serviceMonitor': additional properties 'scrapeInterval' not allowed",
  },
  'wrong-type.yaml': {
    by: 'schema',
    instancePath: '/issuer/replicaCount',
    message: "at '/issuer/replicaCount': got string, want integer",
  },
};

export function readYaml(path: string): unknown {
  return parseYaml(readFileSync(path, 'utf8'));
}

/** Values that satisfy validate.yaml without any example file: secrets by reference. */
export const REQUIRED_SETS = [
  'database.existingSecret=rp-db',
  'redis.existingSecret=rp-redis',
  'kek.existingSecret=rp-kek',
] as const;

export interface RenderOptions {
  valuesFiles?: readonly string[];
  set?: readonly string[];
  extraArgs?: readonly string[];
}

function valueArgs(opts: RenderOptions): string[] {
  const args: string[] = [];
  for (const f of opts.valuesFiles ?? []) args.push('-f', f);
  for (const s of opts.set ?? []) args.push('--set', s);
  return [...args, ...(opts.extraArgs ?? [])];
}

export async function template(opts: RenderOptions = {}) {
  return helm(['template', 'rp', chartDir, '--namespace', 'relay', ...valueArgs(opts)]);
}

export async function lint(opts: RenderOptions = {}) {
  return helm(['lint', '--strict', chartDir, ...valueArgs(opts)]);
}

/** Renders and parses; throws with helm's stderr when rendering fails. */
export async function render(opts: RenderOptions = {}): Promise<K8sObject[]> {
  const result = await template(opts);
  if (result.code !== 0) throw new Error(`helm template failed:\n${result.stderr}`);
  return parseAllDocuments(result.stdout)
    .map((doc) => doc.toJS() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null);
}

/**
 * The kubernetes-models module holding the model of `apiVersion`/`kind`: built-in APIs come from
 * kubernetes-models, the prometheus-operator CRDs (ServiceMonitor) from
 * @kubernetes-models/prometheus-operator, cert-manager's (Certificate) from
 * @kubernetes-models/cert-manager. Add a package here for any other CRD the chart renders.
 */
export function modelModule(apiVersion: string, kind: string): string {
  if (apiVersion.startsWith('monitoring.coreos.com/'))
    return `@kubernetes-models/prometheus-operator/${apiVersion}/${kind}`;
  if (apiVersion.startsWith('cert-manager.io/'))
    return `@kubernetes-models/cert-manager/${apiVersion}/${kind}`;
  return `kubernetes-models/${apiVersion}/${kind}`;
}

/** Validates one object against the OpenAPI schema of its apiVersion/kind; throws when invalid. */
export async function validateK8s(o: K8sObject): Promise<void> {
  const path = modelModule(o.apiVersion, o.kind);
  let mod: Record<string, (new (data: unknown) => { validate(): void }) | undefined>;
  try {
    mod = (await import(/* @vite-ignore */ path)) as typeof mod;
  } catch (err) {
    throw new Error(`no model for ${o.apiVersion} ${o.kind} (${path}): ${String(err)}`);
  }
  const Model = mod[o.kind];
  if (!Model) throw new Error(`${path} exports no ${o.kind}`);
  new Model(o).validate();
}

export const byKind = (objects: readonly K8sObject[], kind: string): K8sObject[] =>
  objects.filter((o) => o.kind === kind);

export interface Container {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
  ports?: { name: string; containerPort: number }[];
  livenessProbe?: Record<string, unknown>;
  readinessProbe?: Record<string, unknown>;
  startupProbe?: Record<string, unknown>;
  resources?: { requests?: Record<string, unknown>; limits?: Record<string, unknown> };
  securityContext?: Record<string, unknown>;
  volumeMounts?: { name: string; mountPath: string }[];
}

export interface PodSpec {
  containers: Container[];
  initContainers?: Container[];
  securityContext?: Record<string, unknown>;
  volumes?: { name: string; emptyDir?: unknown; configMap?: unknown }[];
  automountServiceAccountToken?: boolean;
}

export function podSpec(o: K8sObject): PodSpec {
  const template = (o.spec as { template: { spec: PodSpec } }).template;
  return template.spec;
}

export const WORKLOAD_KINDS = ['Deployment', 'StatefulSet', 'DaemonSet', 'Job'];

export function envOf(c: Container): Map<string, NonNullable<Container['env']>[number]> {
  return new Map((c.env ?? []).map((e) => [e.name, e]));
}

function isMap(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Helm's value coalescing: maps merge deeply, anything else replaces, and a user `null`
 * removes the default. Helm validates the schema against this merged result.
 */
export function mergeValues(defaults: unknown, overrides: unknown): unknown {
  if (!isMap(defaults) || !isMap(overrides)) return overrides;
  const out: Record<string, unknown> = { ...defaults };
  for (const [key, value] of Object.entries(overrides)) {
    if (value === null) delete out[key];
    else out[key] = key in defaults ? mergeValues(defaults[key], value) : value;
  }
  return out;
}

/** The one object of `kind` named `name`; throws (failing the test) when it is missing. */
export function named(objects: readonly K8sObject[], kind: string, name: string): K8sObject {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) throw new Error(`no ${kind} ${name} rendered`);
  return found;
}

export const dataOf = (o: K8sObject | undefined): Record<string, string> =>
  ((o as { data?: Record<string, string> } | undefined)?.data ?? {}) as Record<string, string>;
