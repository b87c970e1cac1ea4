import { newId } from '@relayplane/contract/ids';
import { ManualClock } from '@relayplane/shared/clock';
import { ConfigError } from '@relayplane/shared/config';
import { hasMetric, sampleValue, scrape } from '@relayplane/testing/metrics';
import { createTestDatabase, type TestDatabase } from '@relayplane/testing/storage';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readIssuerConfig } from '../src/config.ts';
import { type IssueInit, issueRequest, newKek, type RunningIssuer, startIssuer } from './support/harness.ts';

const KEK = newKek().toString('base64');
const SERVICE = 'relayplane.issuer.v1.IssuerService';
const ISSUED = 'relayplane_credentials_issued_total';
const FAILURES = 'relayplane_credential_issuance_failures_total';
const REVOKED = 'relayplane_credentials_revoked_total';
const STREAMS = 'relayplane_issuance_streams';
const HANDLED = 'relayplane_grpc_server_handled_total';

describe('readIssuerConfig: ISSUER_METRICS_ADDRESS', () => {
  const base = {
    DATABASE_URL: 'postgres://db.internal/relayplane',
    RELAYPLANE_KEK: KEK,
    REDIS_URL: 'redis://r:6379',
  };

  it('is unset by default and read as host:port when set', () => {
    expect(readIssuerConfig(base).metricsAddress).toBeUndefined();
    expect(readIssuerConfig({ ...base, ISSUER_METRICS_ADDRESS: '0.0.0.0:9464' }).metricsAddress).toBe(
      '0.0.0.0:9464',
    );
  });

  it.each(['9464', 'metrics', '0.0.0.0:', 'http://0.0.0.0:9464'])(
    'refuses %s, naming the variable',
    (value) => {
      const read = () => readIssuerConfig({ ...base, ISSUER_METRICS_ADDRESS: value });
      expect(read).toThrow(ConfigError);
      expect(read).toThrow(/ISSUER_METRICS_ADDRESS must be host:port/);
    },
  );
});

describe('issuer metrics over real gRPC and HTTP', () => {
  let database: TestDatabase;
  let issuer: RunningIssuer;
  let url: string;
  let stopped = false;
  const clock = new ManualClock(Date.now());
  const projectId = newId('project');
  const apiKeyId = newId('apiKey');
  const seen: string[] = [];

  const request = (tenantId: string, over: IssueInit = {}) => {
    seen.push(tenantId);
    return issueRequest({ tenantId, projectId, apiKeyId }, over);
  };

  beforeAll(async () => {
    database = await createTestDatabase('issuer_metrics');
    issuer = await startIssuer({
      databaseUrl: database.url,
      clock,
      kek: newKek(),
      env: { ISSUER_METRICS_ADDRESS: '127.0.0.1:0' },
      config: {
        relays: { staticRelays: [{ id: 'rly_static_eu_1', region: 'eu', host: 'r.example', port: 443 }] },
      },
    });
    expect(issuer.service.metricsPort).toBeGreaterThan(0);
    url = `http://127.0.0.1:${issuer.service.metricsPort}/metrics`;
  });

  afterAll(async () => {
    if (!stopped) await issuer?.stop();
    await database?.drop();
  });

  it('serves the issuer metrics and the process metrics', async () => {
    const text = await scrape(url);
    for (const [name, type] of [
      [ISSUED, 'counter'],
      [FAILURES, 'counter'],
      [REVOKED, 'counter'],
      [STREAMS, 'gauge'],
      [HANDLED, 'counter'],
      ['relayplane_grpc_server_handling_seconds', 'histogram'],
      ['process_resident_memory_bytes', 'gauge'],
    ] as const) {
      expect(hasMetric(text, name, type), name).toBe(true);
    }
  });

  it('counts unary issuance: credentials issued, failures by error code, calls by gRPC status', async () => {
    const before = await scrape(url);
    const tenant = newId('tenant');
    await issuer.client.issueCredential(request(tenant));
    await issuer.client.issueCredential(request(tenant));
    const capped = newId('tenant');
    await issuer.client.issueCredential(request(capped, { maxConcurrentConnections: 1 }));
    await expect(
      issuer.client.issueCredential(request(capped, { maxConcurrentConnections: 1 })),
    ).rejects.toMatchObject({ code: 'payment_required' });
    await expect(
      issuer.client.issueCredential(request(tenant, { scopes: ['relay:admin'] })),
    ).rejects.toMatchObject({ code: 'invalid_request' });
    const after = await scrape(url);
    const moved = (name: string, labels: Record<string, string> = {}) =>
      sampleValue(after, name, labels) - sampleValue(before, name, labels);
    expect(moved(ISSUED)).toBe(3);
    expect(moved(FAILURES, { code: 'payment_required' })).toBe(1);
    expect(moved(FAILURES, { code: 'invalid_request' })).toBe(1);
    expect(moved(FAILURES, { code: 'unavailable' })).toBe(0);
    const method = 'IssueCredential';
    expect(moved(HANDLED, { service: SERVICE, method, code: 'OK' })).toBe(3);
    expect(moved(HANDLED, { service: SERVICE, method, code: 'FAILED_PRECONDITION' })).toBe(1);
    expect(moved(HANDLED, { service: SERVICE, method, code: 'INVALID_ARGUMENT' })).toBe(1);
    expect(moved('relayplane_grpc_server_handling_seconds_count', { service: SERVICE, method })).toBe(5);
  });

  it('an IssueCredentials stream is in the gauge while open and counted as one call when it ends', async () => {
    const before = await scrape(url);
    const streamCalls = (text: string) =>
      sampleValue(text, HANDLED, { service: SERVICE, method: 'IssueCredentials', code: 'OK' });
    expect(sampleValue(before, STREAMS)).toBe(0);
    const stream = issuer.client.issueCredentials();
    const responses = stream.responses[Symbol.asyncIterator]();
    const tenant = newId('tenant');
    for (let i = 1n; i <= 3n; i++) stream.send({ requestId: i, request: request(tenant) });
    stream.send({ requestId: 4n, request: request(tenant, { ttlSeconds: 1 }) });
    const results = [];
    for (let i = 0; i < 4; i++) {
      const { value, done } = await responses.next();
      if (done) throw new Error('stream ended early');
      results.push(value.result.case);
    }
    expect(results.filter((c) => c === 'credential')).toHaveLength(3);
    expect(results.filter((c) => c === 'error')).toHaveLength(1);
    const open = await scrape(url);
    expect(sampleValue(open, STREAMS)).toBe(1);
    expect(sampleValue(open, ISSUED) - sampleValue(before, ISSUED)).toBe(3);
    expect(
      sampleValue(open, FAILURES, { code: 'invalid_request' }) -
        sampleValue(before, FAILURES, { code: 'invalid_request' }),
    ).toBe(1);
    expect(streamCalls(open)).toBe(streamCalls(before));
    stream.end();
    expect((await responses.next()).done).toBe(true);
    let closed = await scrape(url);
    for (let i = 0; i < 100 && streamCalls(closed) === streamCalls(before); i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      closed = await scrape(url);
    }
    expect(streamCalls(closed) - streamCalls(before)).toBe(1);
    expect(sampleValue(closed, STREAMS)).toBe(0);
    expect(
      sampleValue(closed, 'relayplane_grpc_server_handling_seconds_count', {
        service: SERVICE,
        method: 'IssueCredentials',
      }),
    ).toBe(1);
  });

  it('counts a revocation once, however often it is repeated', async () => {
    const tenant = newId('tenant');
    const { jti } = await issuer.client.issueCredential(request(tenant));
    const before = await scrape(url);
    await issuer.client.revokeCredential({ tenantId: tenant, jti });
    await issuer.client.revokeCredential({ tenantId: tenant, jti });
    await expect(
      issuer.client.revokeCredential({ tenantId: tenant, jti: 'crd_00000000000000000000' }),
    ).rejects.toMatchObject({ code: 'not_found' });
    const after = await scrape(url);
    expect(sampleValue(after, REVOKED) - sampleValue(before, REVOKED)).toBe(1);
    // Never a tenant id, jti or token in a label, except the bounded per-tenant slot gauges.
    const elsewhere = after
      .split('\n')
      .filter((line) => !/^relayplane_tenant_slo(ts_in_use|t_cap)\{/.test(line))
      .join('\n');
    for (const value of [...seen, jti, projectId, apiKeyId]) expect(elsewhere).not.toContain(value);
  });

  it('exposes the key states and when the active key is due for rotation, as the last reload saw them', async () => {
    const text = await scrape(url);
    expect(sampleValue(text, 'relayplane_issuer_signing_keys', { state: 'active' })).toBe(1);
    expect(sampleValue(text, 'relayplane_issuer_signing_keys', { state: 'next' })).toBe(1);
    const { keys } = await issuer.service.keys.list();
    const active = keys.find((k) => k.activatedAt && !k.deactivatedAt && !k.removedAt);
    if (!active?.activatedAt) throw new Error('no active key listed');
    const interval = issuer.service.config.keys.rotationIntervalSeconds;
    expect(sampleValue(text, 'relayplane_issuer_signing_key_rotation_due_timestamp_seconds')).toBe(
      active.activatedAt.getTime() / 1000 + interval,
    );
    // A rotation moves both: the next key becomes active, and a new next key is published.
    await issuer.service.keys.rotate('metrics test');
    clock.advance(301_000);
    await issuer.service.keys.tick();
    const rotated = await scrape(url);
    expect(
      sampleValue(rotated, 'relayplane_issuer_signing_keys', { state: 'previous' }),
    ).toBeGreaterThanOrEqual(1);
    expect(
      sampleValue(rotated, 'relayplane_issuer_signing_key_rotation_due_timestamp_seconds'),
    ).toBeGreaterThan(active.activatedAt.getTime() / 1000 + interval);
  });

  it('exposes slot use against the cap only for tenants holding at least half of it', async () => {
    const near = newId('tenant');
    const far = newId('tenant');
    for (let i = 0; i < 3; i++)
      await issuer.client.issueCredential(request(near, { maxConcurrentConnections: 4 }));
    await issuer.client.issueCredential(request(far, { maxConcurrentConnections: 10 }));
    const text = await scrape(url);
    expect(sampleValue(text, 'relayplane_tenant_slots_in_use', { tenant: near })).toBe(3);
    expect(sampleValue(text, 'relayplane_tenant_slot_cap', { tenant: near })).toBe(4);
    expect(text).not.toContain(far);
    expect(
      text.split('\n').filter((l) => l.startsWith('relayplane_tenant_slots_in_use{')).length,
    ).toBeLessThanOrEqual(10);
  });

  it('observes the revocation feed delay of a revocation delivered to a waiting long-poll', async () => {
    const tenant = newId('tenant');
    const { jti } = await issuer.client.issueCredential(request(tenant));
    const head = await issuer.client.listRevocations({ cursor: 0n, limit: 1000 });
    let cursor = head.nextCursor;
    for (let page = head; page.revocations.length === 1000; cursor = page.nextCursor) {
      page = await issuer.client.listRevocations({ cursor, limit: 1000 });
    }
    const before = await scrape(url);
    // Opened before the revocation (the test clock stands still, so it counts as delivered
    // to a reader that was up to date whichever the issuer handles first).
    const poll = issuer.client.listRevocations({ cursor, waitMs: 10_000 });
    await issuer.client.revokeCredential({ tenantId: tenant, jti });
    const answered = await poll;
    expect(answered.revocations.map((r) => r.jti)).toContain(jti);
    const after = await scrape(url);
    const count = 'relayplane_revocation_feed_delay_seconds_count';
    expect(sampleValue(after, count) - sampleValue(before, count)).toBe(1);
    // A reader catching up (the revocation predates its call) is not observed.
    clock.advance(1_000);
    await issuer.client.listRevocations({ cursor, waitMs: 1_000 });
    expect(sampleValue(await scrape(url), count) - sampleValue(after, count)).toBe(0);
  });

  it('exposes readiness, its changes and the reachability of PostgreSQL', async () => {
    const text = await scrape(url);
    expect(sampleValue(text, 'relayplane_ready', { service: SERVICE })).toBe(1);
    expect(sampleValue(text, 'relayplane_ready', { service: `${SERVICE}/issuance` })).toBe(1);
    // Start-up: not serving → serving, once.
    expect(sampleValue(text, 'relayplane_readiness_changes_total', { service: SERVICE })).toBe(1);
    expect(sampleValue(text, 'relayplane_dependency_up', { dependency: 'postgresql' })).toBe(1);
    // No Redis in this test (in-memory slots): no redis series.
    expect(text).not.toContain('dependency="redis"');
  });

  it('destroy() closes the metrics listener', async () => {
    await issuer.stop();
    stopped = true;
    await expect(fetch(url)).rejects.toThrow();
  });
});
