import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PrincipalKind } from '@relayplane/proto/admin';
import { deniedMessage } from '@relayplane/shared/iam';
import { Receiver } from '@relayplane/testing/webhook-receiver';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from './support/stack.ts';
import { type Tenant, tenant } from './support/tenant.ts';

const ENDPOINT_FIELDS = [
  'id',
  'project_id',
  'url',
  'events',
  'description',
  'enabled',
  'created_at',
  'updated_at',
  'failing_since',
  'disabled_at',
  'disabled_reason',
  'previous_secret_expires_at',
].sort();
const DELIVERY_FIELDS = [
  'id',
  'endpoint_id',
  'message_id',
  'event_type',
  'status',
  'attempts',
  'created_at',
  'last_attempt_at',
  'next_attempt_at',
  'response_status',
  'latency_ms',
  'response_body',
  'error',
  'completed_at',
].sort();
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const UNKNOWN_WEBHOOK = 'whk_00000000000000000000';
const UNKNOWN_DELIVERY = 'dlv_00000000000000000000';

type Json = Record<string, unknown>;
type Endpoint = Json & { id: string; events: string[]; updated_at: string };
type Delivery = Json & { id: string; message_id: string; status: string };

/**
 * Webhook endpoints through HTTP (issue 34, docs/webhooks.md): the eight routes on the real
 * stack, a local receiver (http to loopback allowed, as in development), a short retry schedule
 * and disable period so that failing endpoints finish within the test.
 */
describe('gateway routes: webhooks', () => {
  let stack: Stack;
  let owner: Tenant;
  let projectId: string;
  const receiver = new Receiver();
  let seq = 0;

  beforeAll(async () => {
    await receiver.listen();
    // Room for a project per test; the free plan's 2 webhook endpoints per project stay.
    const plans = join(mkdtempSync(join(tmpdir(), 'rp-plans-')), 'plans.yaml');
    writeFileSync(plans, 'plans:\n  free:\n    limits: { max_projects: 50, max_api_keys: 50 }\n');
    stack = await startStack('gw_hooks', {
      billingEnv: { RELAYPLANE_PLANS_FILE: plans },
      adminEnv: {
        RELAYPLANE_WEBHOOKS_ALLOW_HTTP_LOOPBACK: 'true',
        RELAYPLANE_WEBHOOKS_RETRY_SCHEDULE: '0.2',
        RELAYPLANE_WEBHOOKS_DISABLE_AFTER_SECONDS: '1',
      },
    });
    owner = await tenant(stack, { email: 'hooks@example.test', name: 'Hooks Co' });
    projectId = await owner.project('main');
  });
  afterAll(async () => {
    await stack?.close();
    await receiver.close();
  });

  const base = (project = projectId) => `/admin/v1/projects/${project}/webhooks`;
  async function call(
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
    url: string,
    payload?: unknown,
    headers: Record<string, string> = owner.auth,
  ): Promise<{ status: number; body: Json & { error?: string } }> {
    const res = await stack.app.inject({
      method,
      url,
      headers,
      ...(payload === undefined ? {} : { payload: payload as object }),
    });
    return { status: res.statusCode, body: res.body ? res.json() : {} };
  }
  /** A project of its own (the plan's limit counts per project). */
  const freshProject = () => owner.project(`p${++seq}`);
  async function create(project: string, body: Json): Promise<{ webhook: Endpoint; secret: string }> {
    const res = await call('POST', base(project), body);
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body as { webhook: Endpoint; secret: string };
  }
  async function deliveries(project: string, webhookId: string, query = '') {
    const res = await call('GET', `${base(project)}/${webhookId}/deliveries${query}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body as { deliveries: Delivery[]; next_cursor: string | null };
  }
  /** A new API key in `project`: one `api_key.created` event. */
  const apiKeyCreated = (project: string) => owner.apiKey(project);

  it('creates an endpoint: 201 with the endpoint and its secret, which no other answer shows', async () => {
    const project = await freshProject();
    const res = await call('POST', base(project), {
      url: receiver.url('/created'),
      events: ['api_key.created', 'session.ended'],
      description: 'usage metering',
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(['secret', 'webhook']);
    const { webhook, secret } = res.body as { webhook: Endpoint; secret: string };
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Object.keys(webhook).sort()).toEqual(ENDPOINT_FIELDS);
    expect(webhook).toEqual({
      id: expect.stringMatching(/^whk_[0-9a-z]{20}$/),
      project_id: project,
      url: receiver.url('/created'),
      events: ['api_key.created', 'session.ended'],
      description: 'usage metering',
      enabled: true,
      created_at: expect.stringMatching(RFC3339),
      updated_at: webhook.created_at,
      failing_since: null,
      disabled_at: null,
      disabled_reason: null,
      previous_secret_expires_at: null,
    });

    const got = await call('GET', `${base(project)}/${webhook.id}`);
    expect(got).toEqual({ status: 200, body: webhook });
    const listed = await call('GET', base(project));
    expect(listed).toEqual({ status: 200, body: { webhooks: [webhook], next_cursor: null, notices: [] } });
    for (const answer of [got, listed]) {
      expect(JSON.stringify(answer.body)).not.toContain('whsec_');
      expect(JSON.stringify(answer.body)).not.toContain(secret.slice(6, 30));
    }

    // `enabled` and `description` are optional: a disabled endpoint without a description.
    const off = await create(project, {
      url: receiver.url('/off'),
      events: ['plan.changed'],
      enabled: false,
    });
    expect(off.webhook).toMatchObject({ enabled: false, description: '', events: ['plan.changed'] });

    // The audit trail records the creation, never the secret.
    const audit = await call('GET', '/admin/v1/audit-events?action=webhook_endpoint.create');
    expect(audit.status).toBe(200);
    const events = audit.body.events as { target: { id: string } }[];
    expect(events.map((e) => e.target.id)).toEqual(expect.arrayContaining([webhook.id, off.webhook.id]));
    expect(JSON.stringify(audit.body)).not.toContain('whsec_');
  });

  it('refuses a bad url, no or unknown events, a long description and unknown fields with 400', async () => {
    const project = await freshProject();
    const good = { url: receiver.url('/bad'), events: ['api_key.created'] };
    const cases: [Json, RegExp][] = [
      [{ ...good, url: 'ftp://hooks.example.com/x' }, /^url: .*https/],
      [{ ...good, url: 'https://10.1.2.3/hook' }, /^url: /],
      [{ ...good, url: 'https://169.254.169.254/latest/meta-data' }, /^url: /],
      [{ ...good, url: 'https://[fd00::1]/hook' }, /^url: /],
      [{ ...good, url: '' }, /url/],
      [{ ...good, url: `https://hooks.example.com/${'x'.repeat(2048)}` }, /url/],
      [{ ...good, events: [] }, /events/],
      [{ ...good, events: ['session.exploded'] }, /events/],
      [{ ...good, events: 'api_key.created' }, /events/],
      [{ ...good, description: 'd'.repeat(501) }, /description/],
      [{ ...good, enabled: 'yes' }, /enabled/],
      [{ ...good, secret: 'whsec_mine' }, /unknown field "secret"/],
      [{ events: good.events }, /missing required field "url"/],
      [{ url: good.url }, /missing required field "events"/],
    ];
    for (const [body, message] of cases) {
      const res = await call('POST', base(project), body);
      expect(res.status, JSON.stringify(body).slice(0, 120)).toBe(400);
      expect(Object.keys(res.body)).toEqual(['error']);
      expect(res.body.error, JSON.stringify(body).slice(0, 120)).toMatch(message);
    }
    // Nothing was created.
    expect((await call('GET', base(project))).body.webhooks).toEqual([]);
  });

  it("answers 422 with the plan's limit past the free plan's 2 endpoints per project, and frees room on delete", async () => {
    const project = await freshProject();
    const first = await create(project, { url: receiver.url('/l1'), events: ['api_key.created'] });
    await create(project, { url: receiver.url('/l2'), events: ['api_key.created'] });
    const over = await call('POST', base(project), { url: receiver.url('/l3'), events: ['api_key.created'] });
    expect(over.status).toBe(422);
    expect(over.body).toEqual({
      error: expect.stringMatching(/free plan allows at most 2 webhook endpoints per project/),
    });
    // Per project: another project of the tenant still has room.
    await create(await freshProject(), { url: receiver.url('/l4'), events: ['api_key.created'] });
    expect((await call('DELETE', `${base(project)}/${first.webhook.id}`)).status).toBe(204);
    await create(project, { url: receiver.url('/l3'), events: ['api_key.created'] });
  });

  it('changes an endpoint with PATCH: only the fields sent; {} and unknown fields are 400', async () => {
    const project = await freshProject();
    const { webhook } = await create(project, {
      url: receiver.url('/patch'),
      events: ['api_key.created'],
      description: 'before',
    });
    const url = `${base(project)}/${webhook.id}`;
    await new Promise((r) => setTimeout(r, 5));
    const described = await call('PATCH', url, { description: 'after' });
    expect(described.status, JSON.stringify(described.body)).toBe(200);
    expect(described.body).toMatchObject({
      id: webhook.id,
      url: receiver.url('/patch'),
      events: ['api_key.created'],
      description: 'after',
      enabled: true,
    });
    expect(Object.keys(described.body).sort()).toEqual(ENDPOINT_FIELDS);
    expect(Date.parse(described.body.updated_at as string)).toBeGreaterThan(Date.parse(webhook.updated_at));

    const changed = await call('PATCH', url, {
      url: receiver.url('/patched'),
      events: ['session.started', 'session.ended'],
      enabled: false,
    });
    expect(changed.status, JSON.stringify(changed.body)).toBe(200);
    expect(changed.body).toMatchObject({
      url: receiver.url('/patched'),
      events: ['session.started', 'session.ended'],
      description: 'after',
      enabled: false,
    });
    expect((await call('PATCH', url, { enabled: true })).body).toMatchObject({ enabled: true });
    expect((await call('GET', url)).body).toMatchObject({
      url: receiver.url('/patched'),
      events: ['session.started', 'session.ended'],
      enabled: true,
    });

    for (const [body, message] of [
      [{ name: 'x' }, /unknown field "name"/],
      [{ events: [] }, /events/],
      [{ url: 'https://192.168.1.10/hook' }, /^url: /],
      [{ description: 'd'.repeat(501) }, /description/],
      [{ enabled: null }, /enabled/],
    ] as [Json, RegExp][]) {
      const res = await call('PATCH', url, body);
      expect(res.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(res.body.error).toMatch(message);
    }
    // The refusals changed nothing.
    expect((await call('GET', url)).body).toMatchObject({
      url: receiver.url('/patched'),
      description: 'after',
      enabled: true,
    });
  });

  it('deletes an endpoint (204); then it is 404 everywhere', async () => {
    const project = await freshProject();
    const { webhook } = await create(project, { url: receiver.url('/delete'), events: ['api_key.created'] });
    const url = `${base(project)}/${webhook.id}`;
    const res = await stack.app.inject({ method: 'DELETE', url, headers: owner.auth });
    expect(res.statusCode).toBe(204);
    expect(res.body).toBe('');
    expect((await call('GET', base(project))).body.webhooks).toEqual([]);
    expect((await call('GET', url)).status).toBe(404);
    expect((await call('DELETE', url)).status).toBe(404);
  });

  it('rotates the secret: a new one shown once, the previous one signing for grace_seconds (default 24 h)', async () => {
    const project = await freshProject();
    const { webhook, secret } = await create(project, {
      url: receiver.url('/rotate'),
      events: ['api_key.created'],
    });
    const url = `${base(project)}/${webhook.id}/rotate-secret`;
    // Without grace_seconds: the default grace period.
    const before = Date.now();
    const bare = await call('POST', url, {});
    expect(bare.status, JSON.stringify(bare.body)).toBe(200);
    const rotated = bare.body as { webhook: Endpoint; secret: string };
    expect(Object.keys(rotated).sort()).toEqual(['secret', 'webhook']);
    expect(rotated.secret).toMatch(/^whsec_/);
    expect(rotated.secret).not.toBe(secret);
    expect(Object.keys(rotated.webhook).sort()).toEqual(ENDPOINT_FIELDS);
    const expires = Date.parse(rotated.webhook.previous_secret_expires_at as string);
    expect(expires).toBeGreaterThanOrEqual(before + 86_400_000 - 2_000);
    expect(expires).toBeLessThanOrEqual(Date.now() + 86_400_000 + 2_000);

    const short = await call('POST', url, { grace_seconds: 60 });
    expect(short.status, JSON.stringify(short.body)).toBe(200);
    const again = short.body as { webhook: Endpoint; secret: string };
    expect(again.secret).not.toBe(rotated.secret);
    expect(Date.parse(again.webhook.previous_secret_expires_at as string)).toBeLessThanOrEqual(
      Date.now() + 62_000,
    );
    // Never shown again.
    const got = await call('GET', `${base(project)}/${webhook.id}`);
    expect(JSON.stringify(got.body)).not.toContain('whsec_');

    for (const body of [
      { grace_seconds: 0 },
      { grace_seconds: 604_801 },
      { grace_seconds: 'soon' },
      { x: 1 },
    ]) {
      const res = await call('POST', url, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(Object.keys(res.body)).toEqual(['error']);
    }
    // The deliveries after a rotation carry both signatures.
    await apiKeyCreated(project);
    await receiver.until(() => receiver.at('/rotate').length >= 1);
    const [signed] = receiver.at('/rotate');
    if (!signed) throw new Error('nothing received');
    expect(String(signed.headers['webhook-signature']).split(' ')).toHaveLength(2);
    // Signed by the newest secret and by the one before it (the first is past its grace: not at all).
    const headers = signed.headers as Record<string, string>;
    for (const current of [again.secret, rotated.secret])
      expect(new Webhook(current).verify(signed.body, headers)).toMatchObject({ type: 'api_key.created' });
    expect(() => new Webhook(secret).verify(signed.body, headers)).toThrow();
  });

  it('lists the delivery log, newest first, and redelivers a delivery (202, the same message)', async () => {
    const project = await freshProject();
    const { webhook, secret } = await create(project, {
      url: receiver.url('/log'),
      events: ['api_key.created'],
    });
    await apiKeyCreated(project);
    await apiKeyCreated(project);
    await receiver.until(() => receiver.at('/log').length >= 2);
    await expect
      .poll(async () => (await deliveries(project, webhook.id)).deliveries.map((d) => d.status))
      .toEqual(['succeeded', 'succeeded']);
    const log = await deliveries(project, webhook.id);
    expect(log.next_cursor).toBeNull();
    const [newest, oldest] = log.deliveries as [Delivery, Delivery];
    for (const d of log.deliveries) expect(Object.keys(d).sort()).toEqual(DELIVERY_FIELDS);
    expect(oldest).toEqual({
      id: expect.stringMatching(/^dlv_[0-9a-z]{20}$/),
      endpoint_id: webhook.id,
      message_id: expect.stringMatching(/^msg_[0-9a-z]{20}$/),
      event_type: 'api_key.created',
      status: 'succeeded',
      attempts: 1,
      created_at: expect.stringMatching(RFC3339),
      last_attempt_at: expect.stringMatching(RFC3339),
      next_attempt_at: null,
      response_status: 200,
      latency_ms: expect.any(Number),
      response_body: 'ok',
      error: null,
      completed_at: expect.stringMatching(RFC3339),
    });
    expect(Date.parse(newest.created_at as string)).toBeGreaterThanOrEqual(
      Date.parse(oldest.created_at as string),
    );
    // The message ids are the webhook-id headers the receiver got (two keys are two subjects:
    // their deliveries may arrive in either order, docs/webhooks.md).
    const ids = receiver.at('/log').map((r) => r.headers['webhook-id']);
    expect([...ids].sort()).toEqual([oldest.message_id, newest.message_id].sort());
    // The secret the create answered verifies them (Standard Webhooks).
    for (const r of receiver.at('/log'))
      expect(new Webhook(secret).verify(r.body, r.headers as Record<string, string>)).toMatchObject({
        id: r.headers['webhook-id'],
        type: 'api_key.created',
        data: { project_id: project },
      });

    // Paged like every list.
    const first = await deliveries(project, webhook.id, '?limit=1');
    expect(first.deliveries.map((d) => d.id)).toEqual([newest.id]);
    expect(first.next_cursor).toEqual(expect.any(String));
    const second = await deliveries(project, webhook.id, `?limit=1&cursor=${first.next_cursor}`);
    expect(second.deliveries.map((d) => d.id)).toEqual([oldest.id]);
    expect(second.next_cursor).toBeNull();
    for (const query of ['?limit=0', '?limit=201', '?limit=x', '?cursor=nonsense', '?since=1']) {
      const res = await call('GET', `${base(project)}/${webhook.id}/deliveries${query}`);
      expect(res.status, query).toBe(400);
    }

    // Redelivery: a new delivery of the same message, sent again with the same webhook-id.
    const redelivered = await call(
      'POST',
      `${base(project)}/${webhook.id}/deliveries/${oldest.id}/redeliver`,
    );
    expect(redelivered.status, JSON.stringify(redelivered.body)).toBe(202);
    expect(Object.keys(redelivered.body)).toEqual(['delivery']);
    const delivery = redelivered.body.delivery as Delivery;
    expect(Object.keys(delivery).sort()).toEqual(DELIVERY_FIELDS);
    expect(delivery).toMatchObject({
      endpoint_id: webhook.id,
      message_id: oldest.message_id,
      event_type: 'api_key.created',
      attempts: 0,
      response_status: null,
      latency_ms: null,
      response_body: null,
      error: null,
      completed_at: null,
    });
    expect(delivery.id).not.toBe(oldest.id);
    expect(['pending', 'delivering']).toContain(delivery.status);
    await receiver.until(() => receiver.at('/log').length >= 3);
    expect(receiver.at('/log')[2]?.headers['webhook-id']).toBe(oldest.message_id);
    await expect
      .poll(async () => (await deliveries(project, webhook.id)).deliveries.map((d) => [d.id, d.status]))
      .toEqual([
        [delivery.id, 'succeeded'],
        [newest.id, 'succeeded'],
        [oldest.id, 'succeeded'],
      ]);
    // A delivery of another endpoint is not this one's.
    const other = await create(project, { url: receiver.url('/other'), events: ['plan.changed'] });
    const foreign = await call(
      'POST',
      `${base(project)}/${other.webhook.id}/deliveries/${oldest.id}/redeliver`,
    );
    expect(foreign.status).toBe(404);
  });

  it('shows a failed attempt without an answer as nulls, and a disabled endpoint as a notice on the list', async () => {
    const project = await freshProject();
    // A loopback port nothing listens on: every attempt is refused (no HTTP status).
    const closed = new Receiver();
    await closed.listen();
    const deadUrl = closed.url('/dead');
    await closed.close();
    const { webhook } = await create(project, { url: deadUrl, events: ['api_key.created'] });
    await apiKeyCreated(project);
    await expect
      .poll(async () => (await deliveries(project, webhook.id)).deliveries.map((d) => d.status), {
        timeout: 10_000,
      })
      .toEqual(['failed']);
    const [failed] = (await deliveries(project, webhook.id)).deliveries as [Delivery];
    expect(failed).toMatchObject({
      status: 'failed',
      attempts: 2,
      response_status: null,
      response_body: null,
      next_attempt_at: null,
      error: expect.any(String),
      completed_at: expect.stringMatching(RFC3339),
    });
    expect(failed.error).toMatch(/ECONNREFUSED/);
    // No answer: the time to the refusal, if any, is all there is.
    expect(failed.latency_ms === null || typeof failed.latency_ms === 'number').toBe(true);
    expect((await call('GET', `${base(project)}/${webhook.id}`)).body.failing_since).toEqual(
      expect.stringMatching(RFC3339),
    );

    // Failing for longer than the disable period (1 s here): the next failure disables it.
    await new Promise((r) => setTimeout(r, 1_100));
    await apiKeyCreated(project);
    await expect
      .poll(async () => (await call('GET', `${base(project)}/${webhook.id}`)).body.enabled, {
        timeout: 10_000,
      })
      .toBe(false);
    const got = (await call('GET', `${base(project)}/${webhook.id}`)).body;
    expect(got).toMatchObject({
      enabled: false,
      disabled_at: expect.stringMatching(RFC3339),
      disabled_reason: expect.any(String),
    });
    const listed = await call('GET', base(project));
    expect(listed.status).toBe(200);
    expect(listed.body.notices).toEqual([
      {
        type: 'webhook_endpoint.disabled',
        endpoint_id: webhook.id,
        at: got.disabled_at,
        message: expect.stringContaining(deadUrl),
      },
    ]);
    // Re-enabled: the notice goes.
    const enabled = await call('PATCH', `${base(project)}/${webhook.id}`, { enabled: true });
    expect(enabled.body).toMatchObject({ enabled: true, disabled_at: null, disabled_reason: null });
    expect((await call('GET', base(project))).body.notices).toEqual([]);
  });

  it('pages the endpoint list like every list', async () => {
    const project = await freshProject();
    const a = await create(project, { url: receiver.url('/p1'), events: ['api_key.created'] });
    const b = await create(project, { url: receiver.url('/p2'), events: ['api_key.created'] });
    const first = await call('GET', `${base(project)}?limit=1`);
    expect(first.status).toBe(200);
    expect((first.body.webhooks as Endpoint[]).map((e) => e.id)).toEqual([a.webhook.id]);
    expect(first.body.notices).toEqual([]);
    const second = await call('GET', `${base(project)}?limit=1&cursor=${first.body.next_cursor}`);
    expect((second.body.webhooks as Endpoint[]).map((e) => e.id)).toEqual([b.webhook.id]);
    expect(second.body.next_cursor).toBeNull();
    for (const query of ['?limit=0', '?limit=201', '?cursor=nonsense', '?enabled=true']) {
      const res = await call('GET', `${base(project)}${query}`);
      expect(res.status, query).toBe(400);
      expect(Object.keys(res.body)).toEqual(['error']);
    }
  });

  it('answers 404 for an unknown endpoint or delivery, and for another tenant’s project or endpoint', async () => {
    const project = await freshProject();
    const { webhook } = await create(project, { url: receiver.url('/404'), events: ['api_key.created'] });
    const unknown = `${base(project)}/${UNKNOWN_WEBHOOK}`;
    const requests: [Parameters<typeof call>[0], string, unknown?][] = [
      ['GET', unknown],
      ['PATCH', unknown, { enabled: false }],
      ['DELETE', unknown],
      ['POST', `${unknown}/rotate-secret`, {}],
      ['GET', `${unknown}/deliveries`],
      ['POST', `${unknown}/deliveries/${UNKNOWN_DELIVERY}/redeliver`],
      ['POST', `${base(project)}/${webhook.id}/deliveries/${UNKNOWN_DELIVERY}/redeliver`],
    ];
    for (const [method, url, body] of requests) {
      const res = await call(method, url, body);
      expect(res, `${method} ${url}`).toEqual({ status: 404, body: { error: expect.any(String) } });
    }
    // Another tenant: its owner is told neither the project nor the endpoint exists.
    const stranger = await tenant(stack, { email: 'stranger@example.test', name: 'Stranger' });
    const theirs = await stranger.project('theirs');
    for (const [method, url, body] of [
      ['GET', base()],
      ['POST', base(), { url: receiver.url('/x'), events: ['api_key.created'] }],
      ['GET', `${base(project)}/${webhook.id}`],
      ['PATCH', `${base(project)}/${webhook.id}`, { enabled: false }],
      ['DELETE', `${base(project)}/${webhook.id}`],
      ['POST', `${base(project)}/${webhook.id}/rotate-secret`, {}],
      ['GET', `${base(project)}/${webhook.id}/deliveries`],
      // Their own project, our endpoint.
      ['GET', `${base(theirs)}/${webhook.id}`],
      ['DELETE', `${base(theirs)}/${webhook.id}`],
    ] as [Parameters<typeof call>[0], string, unknown?][]) {
      const res = await call(method, url, body, stranger.auth);
      expect(res.status, `${method} ${url}`).toBe(404);
    }
    expect((await call('GET', `${base(project)}/${webhook.id}`)).body).toMatchObject({ enabled: true });
  });

  it('is for owners and admins: 403 for a developer, a viewer, a bot token, an identity token and an API key', async () => {
    const project = await freshProject();
    const { webhook } = await create(project, { url: receiver.url('/iam'), events: ['api_key.created'] });
    const hook = `${base(project)}/${webhook.id}`;
    const routes: [Parameters<typeof call>[0], string, unknown?][] = [
      ['GET', base(project)],
      ['POST', base(project), { url: receiver.url('/iam2'), events: ['api_key.created'] }],
      ['GET', hook],
      ['PATCH', hook, { enabled: false }],
      ['DELETE', hook],
      ['POST', `${hook}/rotate-secret`],
      ['GET', `${hook}/deliveries`],
      ['POST', `${hook}/deliveries/${UNKNOWN_DELIVERY}/redeliver`],
    ];
    /** A user added to the owner's tenant with `role`, switched to it. */
    async function member(role: string) {
      const user = await tenant(stack, { email: `${role}-${++seq}@example.test`, name: role });
      const added = await call('POST', '/admin/v1/members', { email: user.email, role });
      expect(added.status, JSON.stringify(added.body)).toBe(201);
      const switched = await call(
        'POST',
        '/admin/v1/auth/session/tenant',
        { tenant_id: owner.tenantId },
        user.auth,
      );
      expect(switched.status).toBe(200);
      return user.auth;
    }
    const bot = await call('POST', `/admin/v1/projects/${project}/bots`, { name: 'deployer' });
    expect(bot.status).toBe(201);
    const botKey = await call('POST', `/admin/v1/projects/${project}/bots/${bot.body.id}/keys`);
    expect(botKey.status).toBe(201);
    const identity = await call('POST', `/v1/projects/${project}/identities/${bot.body.id}/tokens`, {
      scopes: ['projects:read'],
    });
    expect(identity.status).toBe(201);
    const apiKey = await owner.apiKey(project);
    const callers: [string, Record<string, string>, string][] = [
      [
        'developer',
        await member('developer'),
        deniedMessage({ kind: PrincipalKind.USER_SESSION, role: 'developer' }, 'webhooks:manage'),
      ],
      [
        'viewer',
        await member('viewer'),
        deniedMessage({ kind: PrincipalKind.USER_SESSION, role: 'viewer' }, 'webhooks:manage'),
      ],
      [
        'bot token',
        { authorization: `Bearer ${botKey.body.token}` },
        'permission webhooks:manage is not available to bots or identity tokens; use a user session',
      ],
      [
        'identity token',
        { authorization: `Bearer ${identity.body.value}` },
        'permission webhooks:manage is not available to bots or identity tokens; use a user session',
      ],
      [
        'API key',
        { 'x-api-key': apiKey.key },
        'API keys authenticate credential issuance only; this operation needs a bearer token',
      ],
    ];
    for (const [who, headers, error] of callers) {
      for (const [method, url, body] of routes) {
        const res = await call(method, url, body, headers);
        expect(res, `${who}: ${method} ${url}`).toEqual({ status: 403, body: { error } });
      }
    }
    // An admin may.
    const admin = await member('admin');
    const listed = await call('GET', base(project), undefined, admin);
    expect(listed.status).toBe(200);
    expect((listed.body.webhooks as Endpoint[]).map((e) => e.id)).toEqual([webhook.id]);
    // Nothing changed.
    expect((await call('GET', hook)).body).toMatchObject({ enabled: true });
  });
});
