import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv, type ErrorObject } from 'ajv';
import { describe, expect, it } from 'vitest';
import {
  exampleFiles,
  examplesDir,
  INVALID_FIXTURES,
  invalidDir,
  invalidFiles,
  mergeValues,
  readYaml,
} from './support/chart.ts';
import { chartDir } from './support/helm.ts';

const schema = JSON.parse(readFileSync(join(chartDir, 'values.schema.json'), 'utf8')) as Record<
  string,
  unknown
>;
const ajv = new Ajv({ allErrors: true, strict: false });
const validate = ajv.compile(schema);

const defaults = readYaml(join(chartDir, 'values.yaml'));

function errorsOf(values: unknown): ErrorObject[] {
  return validate(values) ? [] : [...(validate.errors ?? [])];
}

/** What Helm validates: the user's file coalesced over values.yaml. */
const errorsOfOverride = (file: string): ErrorObject[] => errorsOf(mergeValues(defaults, readYaml(file)));

describe('values.schema.json', () => {
  it('is a draft-07 schema that rejects unknown top-level keys', () => {
    expect(schema.$schema).toBe('http://json-schema.org/draft-07/schema#');
    expect(schema.additionalProperties).toBe(false);
    expect(errorsOf({ replicaCount: 2 }).map((e) => e.keyword)).toContain('additionalProperties');
  });

  it('accepts the default values.yaml', () => {
    expect(errorsOf(defaults)).toEqual([]);
  });

  it('has at least the minimal and production examples', () => {
    expect(exampleFiles()).toEqual(expect.arrayContaining(['minimal.yaml', 'production-ha.yaml']));
  });

  it.each(exampleFiles())('accepts examples/%s', (file) => {
    expect(errorsOfOverride(join(examplesDir, file))).toEqual([]);
  });

  it('has at least 10 negative fixtures, each listed with its reason, and nothing unlisted', () => {
    expect(invalidFiles()).toEqual(Object.keys(INVALID_FIXTURES).sort());
    expect(invalidFiles().length).toBeGreaterThanOrEqual(10);
    // Distinct reasons: no two fixtures are rejected at the same place for the same thing.
    const reasons = Object.values(INVALID_FIXTURES).map((f) => f.message);
    expect(new Set(reasons).size).toBe(reasons.length);
  });

  it.each(invalidFiles())(
    'tests/invalid/%s is rejected by the schema at the offending value, or only by validate.yaml',
    (file) => {
      const fixture = INVALID_FIXTURES[file];
      const errors = errorsOfOverride(join(invalidDir, file));
      if (fixture?.by === 'schema') {
        expect(errors.length).toBeGreaterThan(0);
        expect(errors.map((e) => e.instancePath)).toContain(fixture.instancePath);
      } else {
        // Cross-field rule: the schema accepts it, so templates/validate.yaml alone rejects it.
        expect(errors).toEqual([]);
      }
    },
  );

  it('accepts max connection age 0 (never) and 1000–86400000 ms, nothing in between or beyond', () => {
    const withAge = (maxConnectionAgeMs: unknown) =>
      errorsOf(mergeValues(defaults, { billing: { maxConnectionAgeMs } })).map((e) => e.instancePath);
    for (const ok of [0, 1000, 60_000, 86_400_000, null]) expect(withAge(ok), String(ok)).toEqual([]);
    for (const bad of [1, 999, 86_400_001, -1, '60000'])
      expect(withAge(bad), String(bad)).toContain('/billing/maxConnectionAgeMs');
  });

  it('checks the gateway tuning ranges and the trusted proxies format', () => {
    const gw = (gateway: Record<string, unknown>) =>
      errorsOf(mergeValues(defaults, { gateway })).map((e) => e.instancePath);
    expect(gw({ issuanceStreams: 1, issuanceStreamMaxAgeMs: 1000, grpcDnsMinIntervalMs: 100 })).toEqual([]);
    expect(
      gw({ issuanceStreams: 64, issuanceStreamMaxAgeMs: 3_600_000, grpcDnsMinIntervalMs: 300_000 }),
    ).toEqual([]);
    expect(gw({ issuanceStreams: 0 })).toContain('/gateway/issuanceStreams');
    expect(gw({ issuanceStreamMaxAgeMs: 999 })).toContain('/gateway/issuanceStreamMaxAgeMs');
    expect(gw({ grpcDnsMinIntervalMs: 300_001 })).toContain('/gateway/grpcDnsMinIntervalMs');
    expect(gw({ trustedProxies: ['10.0.0.0/8', '192.168.1.7', 'fd00::/8'] })).toEqual([]);
    expect(gw({ trustedProxies: ['proxy.example.com'] })).toContain('/gateway/trustedProxies/0');
  });

  it('accepts a digest per app and rejects the old single image.digest', () => {
    const digest = `sha256:${'a'.repeat(64)}`;
    const withImage = (image: Record<string, unknown>) =>
      errorsOf(mergeValues(defaults, { image })).map((e) => e.instancePath);
    expect(
      withImage({ digests: { gateway: digest, issuer: digest, admin: digest, billing: digest } }),
    ).toEqual([]);
    expect(withImage({ digests: { gateway: `sha256:${'A'.repeat(64)}` } })).toContain(
      '/image/digests/gateway',
    );
    expect(withImage({ digests: { worker: digest } })).toContain('/image/digests');
    expect(withImage({ digest })).toContain('/image');
  });

  it('rejects `latest` but accepts an empty tag (appVersion) and a version tag', () => {
    const withTag = (tag: string) => errorsOf(mergeValues(defaults, { image: { tag } }));
    expect(withTag('latest').map((e) => e.instancePath)).toEqual(['/image/tag']);
    expect(withTag('')).toEqual([]);
    expect(withTag('1.2.3')).toEqual([]);
  });

  it('checks the metrics port range, Prometheus durations and the ServiceMonitor fields', () => {
    const withMetrics = (metrics: Record<string, unknown>) =>
      errorsOf(mergeValues(defaults, { metrics })).map((e) => e.instancePath);
    for (const port of [1024, 9464, 65535]) expect(withMetrics({ port }), String(port)).toEqual([]);
    for (const port of [80, 1023, 65536, '9464'])
      expect(withMetrics({ port }), String(port)).toContain('/metrics/port');
    const sm = (serviceMonitor: Record<string, unknown>) => withMetrics({ serviceMonitor });
    for (const interval of ['30s', '1m', '1m30s', '500ms', '1h', '2d'])
      expect(sm({ interval }), interval).toEqual([]);
    for (const interval of ['', '30', '30 s', '1.5m', 's', '-30s', '30S'])
      expect(sm({ interval }), interval).toContain('/metrics/serviceMonitor/interval');
    expect(sm({ scrapeTimeout: '' })).toEqual([]);
    expect(sm({ scrapeTimeout: '10s' })).toEqual([]);
    expect(sm({ scrapeTimeout: 'ten' })).toContain('/metrics/serviceMonitor/scrapeTimeout');
    expect(sm({ labels: { release: 'prometheus' } })).toEqual([]);
    expect(sm({ labels: { replicas: 2 } })).toContain('/metrics/serviceMonitor/labels/replicas');
    expect(sm({ namespace: 'monitoring' })).toEqual([]);
    expect(sm({ namespace: 'Monitoring' })).toContain('/metrics/serviceMonitor/namespace');
    expect(withMetrics({ networkPolicy: { from: [{ ipBlock: { cidr: '10.0.0.0/8' } }] } })).toEqual([]);
    expect(withMetrics({ networkPolicy: { from: { ipBlock: {} } } })).toContain(
      '/metrics/networkPolicy/from',
    );
    expect(withMetrics({ networkPolicy: { to: [] } })).toContain('/metrics/networkPolicy');
  });

  it('checks the billing provider, its Stripe settings and the checkout tuning ranges', () => {
    const bill = (billing: Record<string, unknown>) =>
      errorsOf(mergeValues(defaults, { billing })).map((e) => e.instancePath);
    expect(bill({ provider: 'builtin' })).toEqual([]);
    expect(bill({ provider: 'stripe' })).toEqual([]);
    for (const provider of ['Stripe', 'paypal', '', 1])
      expect(bill({ provider }), String(provider)).toContain('/billing/provider');
    // A user null removes the default (Helm coalescing): the provider is required.
    expect(bill({ provider: null })).toContain('/billing');
    // App ranges (apps/billing/src/config.ts); null: app default.
    const ranges: [string, number, number][] = [
      ['maxPerWindow', 1, 10_000],
      ['windowSeconds', 1, 86_400],
      ['sessionTtlSeconds', 1_800, 86_400],
    ];
    for (const [key, min, max] of ranges) {
      for (const ok of [min, max, null])
        expect(bill({ checkout: { [key]: ok } }), `${key}=${ok}`).toEqual([]);
      for (const bad of [min - 1, max + 1, '60', 1.5])
        expect(bill({ checkout: { [key]: bad } }), `${key}=${bad}`).toContain(`/billing/checkout/${key}`);
    }
    expect(bill({ checkout: { maxPerMinute: 5 } })).toContain('/billing/checkout');
    for (const ok of [50, 10_000, null]) expect(bill({ redisCommandTimeoutMs: ok }), String(ok)).toEqual([]);
    for (const bad of [49, 10_001, '250'])
      expect(bill({ redisCommandTimeoutMs: bad }), String(bad)).toContain('/billing/redisCommandTimeoutMs');
    const stripe = (s: Record<string, unknown>) => bill({ stripe: s });
    for (const ok of [1, 3600, null]) expect(stripe({ webhookToleranceSeconds: ok }), String(ok)).toEqual([]);
    for (const bad of [0, 3601])
      expect(stripe({ webhookToleranceSeconds: bad }), String(bad)).toContain(
        '/billing/stripe/webhookToleranceSeconds',
      );
    expect(stripe({ secretKey: 'sk_live_abc123', webhookSecret: 'whsec_abc+/=' })).toEqual([]);
    expect(stripe({ secretKey: 'rk_test_abc123' })).toEqual([]);
    expect(stripe({ secretKey: 'pk_live_abc123' })).toContain('/billing/stripe/secretKey');
    expect(stripe({ webhookSecret: 'abc' })).toContain('/billing/stripe/webhookSecret');
    expect(
      stripe({
        existingSecret: 'relayplane-stripe',
        existingSecretKeys: { secretKey: 'sk', webhookSecret: 'wh' },
      }),
    ).toEqual([]);
    expect(stripe({ existingSecretKeys: { secretKey: '' } })).toContain(
      '/billing/stripe/existingSecretKeys/secretKey',
    );
    expect(stripe({ existingSecretKeys: { publishableKey: 'pk' } })).toContain(
      '/billing/stripe/existingSecretKeys',
    );
    expect(stripe({ egressTo: [{ ipBlock: { cidr: '10.0.0.0/8' } }] })).toEqual([]);
    expect(stripe({ egressTo: { ipBlock: { cidr: '10.0.0.0/8' } } })).toContain('/billing/stripe/egressTo');
    // STRIPE_API_BASE is for the app's tests only: no chart value reaches it.
    expect(stripe({ apiBase: 'http://stripe-mock:12111' })).toContain('/billing/stripe');
  });

  it('accepts a Stripe price id per plan and nothing that is not one', () => {
    const price = (stripe_price_id: unknown) =>
      errorsOf(mergeValues(defaults, { plans: { pro: { stripe_price_id } } })).map((e) => e.instancePath);
    expect(price('price_1ProMonthlyEur')).toEqual([]);
    for (const bad of ['', 'price-1', 'price 1', 'x'.repeat(256), 123])
      expect(price(bad), String(bad)).toContain('/plans/pro/stripe_price_id');
  });

  it('rejects a container without resource requests', () => {
    const values = mergeValues(defaults, { billing: { resources: null } });
    expect(errorsOf(values).map((e) => e.instancePath)).toContain('/billing');
    const noRequests = mergeValues(defaults, { billing: { resources: { requests: null } } });
    expect(errorsOf(noRequests).map((e) => e.instancePath)).toContain('/billing/resources');
  });
});
