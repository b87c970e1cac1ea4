import { randomBytes } from 'node:crypto';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { AdminService as AdminRpc, Principal } from '@relayplane/proto/admin';
import type { ServiceClient } from '@relayplane/shared/rpc';
import { testLogger } from '@relayplane/testing/logger';
import { Receiver } from '@relayplane/testing/webhook-receiver';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretSealer, WEBHOOK_SECRET_HKDF_INFO } from '../src/mfa/sealing.ts';
import type { AdminService } from '../src/service.ts';
import { resealWebhookSecrets } from '../src/webhooks/reseal.ts';
import { type AdminRig, expectAppError, startAdminRig, TEST_KEK } from './support/harness.ts';

const PASSWORD = 'a long enough password';

describe('webhooks over gRPC (real PostgreSQL, real billing, a local receiver)', () => {
  let rig: AdminRig | undefined;
  let client: ServiceClient<typeof AdminRpc>;
  let admin: AdminService;
  const receiver = new Receiver();
  let seq = 0;

  beforeAll(async () => {
    await receiver.listen();
    rig = await startAdminRig('adminhooks', {
      RELAYPLANE_WEBHOOKS_ALLOW_HTTP_LOOPBACK: 'true',
      RELAYPLANE_WEBHOOKS_RETRY_SCHEDULE: '0.2,0.2,0.2',
      RELAYPLANE_WEBHOOKS_DISABLE_AFTER_SECONDS: '3',
    });
    ({ client, admin } = rig);
  });

  afterAll(async () => {
    await rig?.close();
    await receiver.close();
  });

  async function newTenant(label: string) {
    const email = `${label}-${++seq}@example.com`;
    const signedUp = await client.signup({ email, password: PASSWORD, tenantName: `${label} inc` });
    const tenantId = signedUp.tenant?.id ?? '';
    const session = await client.login({ email, password: PASSWORD, clientIp: '' });
    const { principal } = await client.authenticate({ token: session.token });
    if (!principal) throw new Error('no principal');
    const { project } = await client.createProject({ principal, name: 'main', environment: '' });
    if (!project) throw new Error('no project');
    return { tenantId, principal, projectId: project.id };
  }

  async function endpoint(principal: Principal, projectId: string, path: string, events: string[]) {
    const created = await client.createWebhookEndpoint({
      principal,
      projectId,
      url: receiver.url(path),
      events,
    });
    if (!created.endpoint) throw new Error('no endpoint');
    return { ...created.endpoint, secret: created.secret };
  }

  function parsed(body: string) {
    return JSON.parse(body) as { id: string; type: string; timestamp: string; data: Record<string, unknown> };
  }

  it('creates an endpoint with a whsec_ secret shown once, lists it and refuses bad input', async () => {
    const { principal, projectId } = await newTenant('create');
    const created = await endpoint(principal, projectId, '/create', ['api_key.created']);
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(created.id).toMatch(/^whk_/);
    expect(created).toMatchObject({
      projectId,
      url: receiver.url('/create'),
      events: ['api_key.created'],
      enabled: true,
    });
    const listed = await client.listWebhookEndpoints({ principal, projectId });
    expect(listed.endpoints.map((e) => e.id)).toEqual([created.id]);
    expect(JSON.stringify(listed, (_k, v) => (typeof v === 'bigint' ? String(v) : v))).not.toContain(
      created.secret.slice(6),
    );
    const stored = await admin.database.db
      .selectFrom('webhook_endpoints')
      .select('secret_sealed')
      .where('id', '=', created.id)
      .executeTakeFirstOrThrow();
    expect(stored.secret_sealed).toMatch(/^v1\./);
    expect(stored.secret_sealed).not.toContain(created.secret.slice(6, 20));

    const refuse = (url: string, events: string[], message: string | RegExp) =>
      expectAppError(
        client.createWebhookEndpoint({ principal, projectId, url, events }),
        'invalid_request',
        message,
      );
    await refuse('ftp://example.com/hook', ['api_key.created'], /url: .*https/);
    await refuse('http://10.1.2.3/hook', ['api_key.created'], /url: /);
    await refuse('https://169.254.169.254/latest', ['api_key.created'], /url: /);
    await refuse('https://[fd00::1]/hook', ['api_key.created'], /url: /);
    await refuse(receiver.url('/x'), [], /events must name at least one/);
    await refuse(receiver.url('/x'), ['session.exploded'], /unknown event type "session.exploded"/);
  });

  it('re-seals signing secrets under a new KEK; the secret still signs after the old KEK is gone', async () => {
    const { principal, projectId } = await newTenant('reseal');
    const created = await endpoint(principal, projectId, '/reseal', ['api_key.created']);
    const newKek = randomBytes(32);
    const rotated = new SecretSealer(newKek, [Buffer.from(TEST_KEK, 'base64')], WEBHOOK_SECRET_HKDF_INFO);
    const outcome = await resealWebhookSecrets(admin.database.db, rotated, testLogger('reseal'));
    expect(outcome.resealed).toBeGreaterThanOrEqual(1);
    expect(outcome.unopened).toBe(0);
    const row = await admin.database.db
      .selectFrom('webhook_endpoints')
      .select('secret_sealed')
      .where('id', '=', created.id)
      .executeTakeFirstOrThrow();
    const onlyNew = new SecretSealer(newKek, [], WEBHOOK_SECRET_HKDF_INFO);
    expect(onlyNew.open(row.secret_sealed, created.id)?.toString()).toBe(created.secret);
    // Sealed for this endpoint only, and not under the TOTP label.
    expect(onlyNew.open(row.secret_sealed, 'whk_00000000000000000000')).toBeUndefined();
    expect(new SecretSealer(newKek).open(row.secret_sealed, created.id)).toBeUndefined();
    // Put back under the rig's KEK for the tests that follow.
    const back = new SecretSealer(Buffer.from(TEST_KEK, 'base64'), [newKek], WEBHOOK_SECRET_HKDF_INFO);
    expect((await resealWebhookSecrets(admin.database.db, back, testLogger('reseal'))).unopened).toBe(0);
  });

  it('enforces the plan limit on endpoints per project (free: 2)', async () => {
    const { principal, projectId } = await newTenant('limit');
    await endpoint(principal, projectId, '/l1', ['api_key.created']);
    await endpoint(principal, projectId, '/l2', ['api_key.created']);
    await expectAppError(
      client.createWebhookEndpoint({
        principal,
        projectId,
        url: receiver.url('/l3'),
        events: ['api_key.created'],
      }),
      'unprocessable',
      'the free plan allows at most 2 webhook endpoints per project (max_webhook_endpoints); upgrade the plan to add more',
    );
  });

  it('delivers api_key.created and api_key.revoked signed (standardwebhooks verifies), in order, retrying with the same webhook-id', async () => {
    const { principal, projectId, tenantId } = await newTenant('deliver');
    const hook = await endpoint(principal, projectId, '/deliver', ['api_key.created', 'api_key.revoked']);
    // The first event fails three times: the second (same key: same subject) waits for it.
    receiver.answer('/deliver', 500, 503, 500);
    const { apiKey } = await client.createApiKey({ principal, projectId, name: 'k', mode: '', scopes: [] });
    await client.revokeApiKey({ principal, projectId, keyId: apiKey?.id ?? '' });
    await receiver.until(() => receiver.at('/deliver').length >= 5);
    const got = receiver.at('/deliver');
    expect(got).toHaveLength(5);
    const verifier = new Webhook(hook.secret);
    const bodies = got.map(
      (r) => verifier.verify(r.body, r.headers as Record<string, string>) as ReturnType<typeof parsed>,
    );
    expect(bodies.map((b) => b.type)).toEqual([
      'api_key.created',
      'api_key.created',
      'api_key.created',
      'api_key.created',
      'api_key.revoked',
    ]);
    const ids = got.map((r) => r.headers['webhook-id']);
    expect(new Set(ids.slice(0, 4)).size).toBe(1);
    expect(ids[4]).not.toBe(ids[0]);
    expect(bodies[0]?.id).toBe(ids[0]);
    expect(bodies[0]?.data).toMatchObject({
      tenant_id: tenantId,
      project_id: projectId,
      api_key_id: apiKey?.id,
      name: 'k',
      last_four: apiKey?.lastFour,
    });
    expect(JSON.stringify(bodies)).not.toMatch(/rp_(live|test)_/);

    // The log: the receiver has answered, the sender records the attempt just after.
    const logged = () => client.listWebhookDeliveries({ principal, projectId, endpointId: hook.id });
    await expect
      .poll(async () =>
        (await logged()).deliveries.map((d) => [d.eventType, d.status, d.attempts, d.responseStatus]),
      )
      .toEqual([
        ['api_key.revoked', 'succeeded', 1, 200],
        ['api_key.created', 'succeeded', 4, 200],
      ]);
    const log = await logged();
    expect(log.deliveries[1]?.responseBody).toBe('ok');

    // Redelivery: the same message (webhook-id) again.
    const again = await client.redeliverWebhook({
      principal,
      projectId,
      endpointId: hook.id,
      deliveryId: log.deliveries[1]?.id ?? '',
    });
    expect(again.delivery?.messageId).toBe(ids[0]);
    await receiver.until(() => receiver.at('/deliver').length >= 6);
    expect(receiver.at('/deliver')[5]?.headers['webhook-id']).toBe(ids[0]);
  });

  it('gives up after the schedule, then disables an endpoint failing for the disable period and says so on the next list', async () => {
    const { principal, projectId } = await newTenant('dead');
    const hook = await endpoint(principal, projectId, '/dead', ['api_key.created']);
    receiver.answer('/dead', ...Array(20).fill(500));
    await client.createApiKey({ principal, projectId, name: 'a', mode: '', scopes: [] });
    await receiver.until(() => receiver.at('/dead').length >= 4);
    await expect
      .poll(async () => {
        const log = await client.listWebhookDeliveries({ principal, projectId, endpointId: hook.id });
        return log.deliveries.map((d) => [d.status, d.attempts, d.responseStatus]);
      })
      .toEqual([['failed', 4, 500]]);
    await new Promise((r) => setTimeout(r, 3_100));
    await client.createApiKey({ principal, projectId, name: 'b', mode: '', scopes: [] });
    await expect
      .poll(
        async () =>
          (await client.getWebhookEndpoint({ principal, projectId, endpointId: hook.id })).endpoint?.enabled,
        {
          timeout: 5_000,
        },
      )
      .toBe(false);
    // Nothing waits on a disabled endpoint: its unfinished delivery ended as failed.
    const log = await client.listWebhookDeliveries({ principal, projectId, endpointId: hook.id });
    expect(log.deliveries.map((d) => [d.status, d.error])).toEqual([
      ['failed', 'the endpoint was disabled: failing too long'],
      ['failed', 'HTTP 500'],
    ]);
    const listed = await client.listWebhookEndpoints({ principal, projectId });
    expect(listed.notices).toEqual([
      expect.objectContaining({ type: 'webhook_endpoint.disabled', endpointId: hook.id }),
    ]);
    const audit = await client.listAuditEvents({ principal, action: 'webhook_endpoint.disable' });
    expect(audit.events.map((e) => e.target?.id)).toEqual([hook.id]);
    // Re-enabling clears it.
    const enabled = await client.updateWebhookEndpoint({
      principal,
      projectId,
      endpointId: hook.id,
      enabled: true,
    });
    expect(enabled.endpoint).toMatchObject({ enabled: true, disabledReason: '' });
    expect((await client.listWebhookEndpoints({ principal, projectId })).notices).toEqual([]);
  });

  it('delivers one event to every subscribed endpoint of the project, the same message to each', async () => {
    const { principal, projectId } = await newTenant('fanout');
    const one = await endpoint(principal, projectId, '/fan-1', ['api_key.created']);
    const two = await endpoint(principal, projectId, '/fan-2', ['api_key.created', 'api_key.revoked']);
    await client.createApiKey({ principal, projectId, name: 'fan', mode: '', scopes: [] });
    await receiver.until(() => receiver.at('/fan-1').length >= 1 && receiver.at('/fan-2').length >= 1);
    const [a] = receiver.at('/fan-1');
    const [b] = receiver.at('/fan-2');
    expect(new Webhook(one.secret).verify(a?.body ?? '', a?.headers as Record<string, string>)).toMatchObject(
      {
        type: 'api_key.created',
      },
    );
    expect(new Webhook(two.secret).verify(b?.body ?? '', b?.headers as Record<string, string>)).toMatchObject(
      {
        type: 'api_key.created',
      },
    );
    expect(a?.headers['webhook-id']).toBe(b?.headers['webhook-id']);
  });

  it('signs with both secrets during a rotation grace period', async () => {
    const { principal, projectId } = await newTenant('rotate');
    const hook = await endpoint(principal, projectId, '/rotate', ['api_key.created']);
    const rotated = await client.rotateWebhookSecret({
      principal,
      projectId,
      endpointId: hook.id,
      graceSeconds: 3600,
    });
    expect(rotated.secret).toMatch(/^whsec_/);
    expect(rotated.secret).not.toBe(hook.secret);
    expect(Number(rotated.endpoint?.previousSecretExpiresAt?.seconds)).toBeGreaterThan(
      Date.now() / 1000 + 3500,
    );
    await client.createApiKey({ principal, projectId, name: 'r', mode: '', scopes: [] });
    await receiver.until(() => receiver.at('/rotate').length >= 1);
    const [got] = receiver.at('/rotate');
    if (!got) throw new Error('nothing received');
    expect(String(got.headers['webhook-signature']).split(' ')).toHaveLength(2);
    const headers = got.headers as Record<string, string>;
    expect(new Webhook(hook.secret).verify(got.body, headers)).toMatchObject({ type: 'api_key.created' });
    expect(new Webhook(rotated.secret).verify(got.body, headers)).toMatchObject({ type: 'api_key.created' });
    await expectAppError(
      client.rotateWebhookSecret({ principal, projectId, endpointId: hook.id, graceSeconds: 8 * 86_400 }),
      'invalid_request',
      /grace_seconds must be at most 604800/,
    );
  });

  it('turns an issuer notice into one delivery however often the outbox repeats it', async () => {
    const { principal, projectId, tenantId } = await newTenant('notice');
    await endpoint(principal, projectId, '/notice', ['session.started']);
    const event = {
      id: '01937a4e-0000-7000-8000-000000000001',
      occurredAt: timestampFromDate(new Date()),
      tenantId,
      actor: { type: 'system', id: 'relay-sessions' },
      action: 'session.started',
      target: { type: 'session', id: 'ses-1' },
      outcome: 'success',
      detailsJson: JSON.stringify({ project_id: projectId, session_id: 'ses-1', relay_id: 'rly_x' }),
    };
    await client.recordAuditEvents({ source: 'issuer', events: [event] });
    await client.recordAuditEvents({ source: 'issuer', events: [event] });
    await receiver.until(() => receiver.at('/notice').length >= 1);
    await new Promise((r) => setTimeout(r, 500));
    expect(receiver.at('/notice')).toHaveLength(1);
    expect(parsed(receiver.at('/notice')[0]?.body ?? '{}')).toMatchObject({
      type: 'session.started',
      data: { tenant_id: tenantId, project_id: projectId, session_id: 'ses-1', relay_id: 'rly_x' },
    });
    // Not in the trail.
    const audit = await client.listAuditEvents({ principal, action: 'session.started' });
    expect(audit.events).toEqual([]);
  });

  it('updates and deletes an endpoint (audited); other tenants cannot see it', async () => {
    const a = await newTenant('crud');
    const b = await newTenant('crud');
    const hook = await endpoint(a.principal, a.projectId, '/crud', ['api_key.created']);
    const updated = await client.updateWebhookEndpoint({
      principal: a.principal,
      projectId: a.projectId,
      endpointId: hook.id,
      events: { events: ['api_key.revoked', 'plan.changed'] },
      description: 'billing hooks',
    });
    expect(updated.endpoint).toMatchObject({
      events: ['api_key.revoked', 'plan.changed'],
      description: 'billing hooks',
    });
    await expectAppError(
      client.getWebhookEndpoint({ principal: b.principal, projectId: a.projectId, endpointId: hook.id }),
      'not_found',
    );
    await client.deleteWebhookEndpoint({
      principal: a.principal,
      projectId: a.projectId,
      endpointId: hook.id,
    });
    await expectAppError(
      client.getWebhookEndpoint({ principal: a.principal, projectId: a.projectId, endpointId: hook.id }),
      'not_found',
      'no webhook endpoint has this id in the project',
    );
    const audit = await client.listAuditEvents({ principal: a.principal });
    const actions = audit.events.map((e) => e.action);
    expect(actions).toEqual(
      expect.arrayContaining([
        'webhook_endpoint.create',
        'webhook_endpoint.update',
        'webhook_endpoint.delete',
      ]),
    );
    expect(JSON.stringify(audit.events, (_k, v) => (typeof v === 'bigint' ? String(v) : v))).not.toContain(
      'whsec_',
    );
  });
});
