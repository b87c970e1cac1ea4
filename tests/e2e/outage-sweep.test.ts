/**
 * The outage sweep (issue 16 item 2): while PostgreSQL or Redis is away, every documented
 * operation answers either what it answers normally or 503 with `Retry-After` — never another
 * 5xx — with 4xx bodies exactly `{"error": "..."}`, within the gateway's RPC deadline plus a
 * margin, and a request that answered an error committed nothing.
 *
 * The four apps run as processes (tests/support/distributed.ts) and reach PostgreSQL and Redis
 * through TCP proxies this file breaks (tests/support/tcp-proxy.ts). Four outages, one after
 * the other:
 * - PostgreSQL down: live connections reset, new ones refused (a crash, a stopped server);
 * - PostgreSQL blackholed: live connections stall, new ones are never answered (a partition).
 *   It ends as a failover does: new connections reach a server again, the stalled ones never
 *   answer (no one resets connections to a dead primary);
 * - Redis down, Redis blackholed: the same for Redis (ending with the stalled connections closed).
 *
 * First a control run without an outage, then each outage. For each, while everything is up, a
 * fresh tenant and everything the operations name is made (`World`). Then the outage starts and
 * every operation of the served OpenAPI document is called once with a valid request
 * (`EXAMPLES`, one per operationId: an operation the document lists and the table lacks fails
 * the test). Then the outage ends, the system must serve again (readiness, a burst of reads
 * over every pooled connection, an issuance), and every operation with an effect is probed: the
 * effect exists exactly when its request answered 2xx.
 *
 * What keeps answering is asserted against the control run: during a PostgreSQL outage what
 * needs no storage (liveness, the JWKS from the gateway's memory, the gateway's documents,
 * billing's plans and prices) answers as without it, everything else as without it or 503; an
 * issuance with an API key the gateway verified less than a second ago gets past
 * authentication (the gateway's 1 s cache) and is refused only where the credential must be
 * recorded. During a Redis outage everything answers as without it, but issuance (the cap is
 * decided in Redis and fails closed), a tenant's connections (its slots are counted there) and
 * readiness.
 *
 * Timeouts are shrunk so a blackholed dependency costs seconds: the gateway's RPC deadline is
 * RPC_TIMEOUT_MS; the services' own PostgreSQL bounds are shared/db.ts's defaults (2 s to
 * connect, 4.5 s per query), longer than that deadline, so the gateway's deadline is what
 * answers a blackholed PostgreSQL here.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEPENDENCY_UNAVAILABLE_MESSAGE } from '@relayplane/contract/errors';
import {
  createTestDatabase,
  createTestRedis,
  type TestDatabase,
  type TestRedis,
} from '@relayplane/testing/storage';
import { Receiver } from '@relayplane/testing/webhook-receiver';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api, type ApiResponse } from '../support/api.ts';
import { type Distributed, startDistributed } from '../support/distributed.ts';
import { waitFor } from '../support/ports.ts';
import { TcpProxy } from '../support/tcp-proxy.ts';

const OWNER = { email: 'outage-ops@example.test', password: 'outage sweep password' };
const PASSWORD = 'tenant password 123';
const CLIENT_ID = 'relayplane-cli';

/** The gateway's deadline per call to a service (GATEWAY_RPC_TIMEOUT_MS). */
const RPC_TIMEOUT_MS = 2_000;
/**
 * The longest an answer may take during an outage: a route may make two calls in a row, each
 * with its own deadline (authentication, then the operation), plus the gateway's own work on a
 * machine the other suites share.
 */
const ANSWER_BOUND_MS = 2 * RPC_TIMEOUT_MS + 1_500;
/** Operations sent at once during an outage (the sweep's own load stays small). */
const CONCURRENCY = 6;
/** How long after an outage ends the system must serve again. */
const RECOVERY_MS = 15_000;

/** Answered without any service's storage: the gateway's memory, billing's plans. */
const ANSWERING_ALWAYS = [
  'getOpenApiDocument',
  'getLiveness',
  'getJwks',
  'getAuthorizationServerMetadata',
  'listPlans',
  'getPricing',
];
/**
 * What cannot be answered without Redis: issuance (the concurrent-connection cap is decided in
 * Redis and fails closed), a tenant's connections (the slots held are counted in Redis) and
 * readiness (the issuer's issuance status follows Redis).
 */
const NEEDS_REDIS = ['issueCredential', 'getTenantConnections', 'getReadiness'];
/** The examples answered with a refusal even without an outage, and why. */
const NORMALLY_REFUSED: Record<string, number> = {
  // The built-in provider takes no webhooks.
  billingWebhook: 404,
  // The device flow's client polls before the user decided.
  token: 400,
  // No second step pending: an mfa_token that was never issued.
  loginMfa: 401,
  // The owner has no pending enrolment to confirm, and no factor to remove or renew codes of.
  confirmTotpEnrollment: 409,
  disableTotp: 404,
  renewRecoveryCodes: 404,
  // The revalidation, and the end from the control plane, of a relay session never admitted.
  relayAuth: 403,
  endRelaySession: 404,
};

type Headers = Record<string, string>;
const bearer = (token: string): Headers => ({ authorization: `Bearer ${token}` });

/** What one outage's requests name: made while everything is up, unique to the outage. */
interface World {
  tag: string;
  /** Owner of the outage's tenant T. */
  owner: { token: string; csrf: string; tenantId: string };
  /** A second session of T's owner, for logout. */
  logoutToken: string;
  /** Project p (keys, bots, credentials) and project q (allowlist). */
  p: string;
  q: string;
  /** API key of p used just before the outage (in the gateway's cache), and one never used. */
  hotKey: string;
  coldKey: string;
  keyToRevoke: string;
  entryToDelete: string;
  bot: string;
  botKeyToRevoke: string;
  identityTokenToRevoke: string;
  /** A live relay credential (a JWT) of p. */
  credential: string;
  credentialToRevoke: string;
  /** A relay's node token, and the relay's id. */
  relayToken: string;
  relayId: string;
  relayToDelete: string;
  /** u1: a viewer of T whose role changes; its own session switches into T. */
  u1: { id: string; token: string };
  /** u2: a viewer of T to remove; its own tenant's plan is set by the platform admin. */
  u2: { id: string; token: string; tenantId: string };
  /** u3: not a member of T; added to it. */
  u3: { email: string };
  /**
   * Owner of a tenant of its own that buys a plan (createCheckoutSession): not T, whose plan the
   * confirmed checkout changes while the sweep runs, so the order of the two does not matter.
   */
  buyer: { token: string; tenantId: string };
  checkoutSession: string;
  /** Device authorizations: approved through the API, through the page, and polled. */
  deviceApi: { userCode: string; deviceCode: string };
  devicePage: { userCode: string; deviceCode: string };
  /** Device authorization only polled and shown, never decided. */
  devicePolled: { userCode: string; deviceCode: string };
  /** Signing key ids before the outage. */
  kids: string[];
  /** The published, not yet signing (`next`) key: revoking it leaves every credential of the world valid. */
  signingKeyToRevoke: string;
  /** Credential rows of T before the outage. */
  credentialRows: number;
  /** Sessions a user controls: one of T's owner's sessions to end. */
  sessionToRevoke: { id: string; token: string };
  /** A user (u4) whose other session ends; a user (u5) whose password changes. */
  u4: { token: string; otherToken: string };
  u5: { email: string; token: string; otherToken: string };
  /** A webhook endpoint of p (api_key.created: the world's keys gave it deliveries), and one to delete. */
  webhook: string;
  webhookToDelete: string;
  /** A delivery of `webhook` to redeliver, and its message. */
  delivery: { id: string; messageId: string };
}

/** One documented operation's request during an outage, and how to see afterwards whether it took effect. */
interface Example {
  params?: (w: World) => Record<string, string>;
  query?: (w: World) => Record<string, string>;
  headers?: (w: World) => Headers;
  body?: (w: World) => unknown;
  /** An `application/x-www-form-urlencoded` body instead of JSON. */
  form?: (w: World) => Record<string, string>;
  /**
   * After the outage, with everything up: whether the request's effect exists. It must exactly
   * when the request answered 2xx (an error committed nothing; a success did commit).
   */
  effect?: (w: World) => Promise<boolean>;
}

describe('outage sweep: every documented operation while PostgreSQL or Redis is down or blackholed', () => {
  let database: TestDatabase;
  let redis: TestRedis;
  let pgProxy: TcpProxy;
  let redisProxy: TcpProxy;
  let system: Distributed;
  let api: Api;
  let platform: Headers;
  let doc: { paths: Record<string, Record<string, OperationDoc>> };
  /** Where the worlds' webhook endpoints deliver (http to loopback, allowed here). */
  const receiver = new Receiver();

  const send = (method: string, path: string, options: Parameters<Api['request']>[2] = {}) =>
    api.request(method, path, options);

  async function ok(res: Promise<ApiResponse>, status: number, what: string): Promise<ApiResponse> {
    const r = await res;
    expect(r.status, `${what}: ${r.text}`).toBe(status);
    return r;
  }

  async function signup(label: string): Promise<{ email: string; userId: string; tenantId: string }> {
    const email = `${label}@example.test`;
    const res = await ok(
      send('POST', '/admin/v1/auth/signup', { body: { email, password: PASSWORD, tenant_name: label } }),
      201,
      `signup ${label}`,
    );
    return { email, userId: res.body.user.id, tenantId: res.body.tenant.id };
  }

  async function login(email: string, password = PASSWORD): Promise<{ token: string; csrf: string }> {
    const res = await ok(
      send('POST', '/admin/v1/auth/login', { body: { email, password } }),
      200,
      `login ${email}`,
    );
    return { token: res.body.token, csrf: res.body.csrf_token };
  }

  const issue = (key: string) =>
    send('POST', '/api/v1/credentials', { headers: { 'x-api-key': key }, body: {} });

  async function startDevice(): Promise<{ userCode: string; deviceCode: string }> {
    const res = await ok(
      send('POST', '/admin/v1/auth/device/code', { body: { client_id: CLIENT_ID } }),
      200,
      'device code',
    );
    return { userCode: res.body.user_code, deviceCode: res.body.device_code };
  }

  /** One count from the services' database, read directly (bypassing the proxies). */
  async function count(query: string, values: unknown[]): Promise<number> {
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      return (await client.query(`select count(*)::int as n from ${query}`, values)).rows[0].n;
    } finally {
      await client.end();
    }
  }
  const credentialRows = (tenantId: string) => count('issuer.credentials where tenant_id = $1', [tenantId]);

  async function kids(): Promise<string[]> {
    const res = await ok(send('GET', '/admin/v1/signing-keys', { headers: platform }), 200, 'signing keys');
    return res.body.keys.map((k: { kid: string }) => k.kid).sort();
  }

  /** The `next` key; the previous world's revocation of it is replaced by a maintenance tick. */
  async function nextKid(): Promise<string> {
    let kid: string | undefined;
    await waitFor(
      async () => {
        const res = await ok(
          send('GET', '/admin/v1/signing-keys', { headers: platform }),
          200,
          'signing keys',
        );
        kid = res.body.keys.find((k: { state: string }) => k.state === 'next')?.kid;
        return kid !== undefined;
      },
      15_000,
      'a next signing key',
    );
    return kid ?? '';
  }

  async function publishedKids(): Promise<string[]> {
    const res = await ok(send('GET', '/v1/credentials/jwks'), 200, 'JWKS');
    return res.body.keys.map((k: { kid: string }) => k.kid);
  }

  /** Everything one outage's requests name, made while PostgreSQL and Redis are up. */
  async function buildWorld(tag: string): Promise<World> {
    const t = await signup(`${tag}-owner`);
    const ownerLogin = await login(t.email);
    const auth = bearer(ownerLogin.token);
    const create = async (path: string, body: unknown, headers = auth) =>
      (await ok(send('POST', path, { headers, body }), 201, `POST ${path}`)).body;
    const logoutToken = (await login(t.email)).token;
    const p = (await create('/admin/v1/projects', { name: `p-${tag}` })).id;
    const q = (await create('/admin/v1/projects', { name: `q-${tag}` })).id;
    // Before the API keys: their api_key.created events give the endpoint deliveries.
    const webhook = (
      await create(`/admin/v1/projects/${p}/webhooks`, {
        url: receiver.url(`/${tag}`),
        events: ['api_key.created'],
        description: `hook-${tag}`,
      })
    ).webhook.id;
    const webhookToDelete = (
      await create(`/admin/v1/projects/${p}/webhooks`, {
        url: receiver.url(`/${tag}-gone`),
        events: ['plan.changed'],
      })
    ).webhook.id;
    const apiKey = (name: string) =>
      create(`/admin/v1/projects/${p}/api-keys`, { name, scopes: ['relay:session'] });
    const hot = await apiKey('hot');
    const cold = await apiKey('cold');
    const toRevoke = await apiKey('to-revoke');
    const delivery = (
      await ok(
        send('GET', `/admin/v1/projects/${p}/webhooks/${webhook}/deliveries`, { headers: auth }),
        200,
        'webhook deliveries',
      )
    ).body.deliveries[0];
    const entry = await create(`/admin/v1/projects/${q}/allowlist`, { cidr: '10.0.0.0/8' });
    const bot = (await create(`/admin/v1/projects/${p}/bots`, { name: `bot-${tag}`, role: 'viewer' })).id;
    const botKey = await create(`/admin/v1/projects/${p}/bots/${bot}/keys`, undefined);
    const identityToken = await create(`/v1/projects/${p}/identities/${bot}/tokens`, {
      scopes: ['projects:read'],
    });
    const relay = await create(
      '/admin/v1/relays',
      { region: 'eu-west', host: `relay-${tag}.example`, port: 4433 },
      platform,
    );
    const relayToDelete = await create(
      '/admin/v1/relays',
      { region: 'eu-west', host: `relay-${tag}-gone.example`, port: 4433 },
      platform,
    );
    const member = async (label: string) => {
      const u = await signup(`${tag}-${label}`);
      await create('/admin/v1/members', { email: u.email, role: 'viewer' });
      return { id: u.userId, token: (await login(u.email)).token, tenantId: u.tenantId };
    };
    const u1 = await member('u1');
    const u2 = await member('u2');
    const u3 = await signup(`${tag}-u3`);
    const buyerSignup = await signup(`${tag}-buyer`);
    const buyer = { token: (await login(buyerSignup.email)).token, tenantId: buyerSignup.tenantId };
    const checkoutSession = await create('/admin/v1/billing/checkout-sessions', { plan: 'pro' });
    const deviceApi = await startDevice();
    const devicePage = await startDevice();
    const devicePolled = await startDevice();
    const signingKeyToRevoke = await nextKid();
    const keysBefore = await kids();
    // Logins (argon2) before the hot key's last use, which must stay within the gateway's 1 s cache.
    const sessionsOf = {
      toRevoke: await sessionToRevoke(t.email),
      u4: await twoSessions(`${tag}-u4`),
      u5: await twoSessions(`${tag}-u5`),
    };
    const credentialToRevoke = (await ok(issue(hot.key), 201, 'credential to revoke')).body.jti;
    // The last use of the hot key: the outage starts less than the gateway's 1 s cache later.
    const credential = (await ok(issue(hot.key), 201, 'credential')).body;
    return {
      tag,
      owner: { token: ownerLogin.token, csrf: ownerLogin.csrf, tenantId: t.tenantId },
      logoutToken,
      p,
      q,
      hotKey: hot.key,
      coldKey: cold.key,
      keyToRevoke: toRevoke.api_key.id,
      entryToDelete: entry.id,
      bot,
      botKeyToRevoke: botKey.bot_key.id,
      identityTokenToRevoke: identityToken.id,
      credential: credential.token,
      credentialToRevoke,
      relayToken: relay.token,
      relayId: relay.relay.id,
      relayToDelete: relayToDelete.relay.id,
      u1: { id: u1.id, token: u1.token },
      u2,
      u3: { email: u3.email },
      buyer,
      checkoutSession: checkoutSession.id,
      deviceApi,
      devicePage,
      devicePolled,
      kids: keysBefore,
      signingKeyToRevoke,
      credentialRows: await credentialRows(t.tenantId),
      sessionToRevoke: sessionsOf.toRevoke,
      u4: sessionsOf.u4,
      u5: sessionsOf.u5,
      webhook,
      webhookToDelete,
      delivery: { id: delivery.id, messageId: delivery.message_id },
    };
  }

  /** A fresh session of `email`, with its id. */
  async function sessionToRevoke(email: string): Promise<{ id: string; token: string }> {
    const { token } = await login(email);
    const res = await ok(send('GET', '/admin/v1/auth/session', { headers: bearer(token) }), 200, 'session');
    return { id: res.body.id, token };
  }

  /** A new user with two sessions. */
  async function twoSessions(label: string): Promise<{ email: string; token: string; otherToken: string }> {
    const { email } = await signup(label);
    return { email, token: (await login(email)).token, otherToken: (await login(email)).token };
  }

  /** Whether `token` is refused (401) now. */
  const refused = async (token: string) =>
    (await send('GET', '/admin/v1/auth/session', { headers: bearer(token) })).status === 401;

  /** Lists through T's owner, for the effect probes. */
  const list = async (path: string, key: string, w: World) =>
    (await ok(send('GET', path, { headers: bearer(w.owner.token) }), 200, `GET ${path}`)).body[key] as Record<
      string,
      unknown
    >[];
  const revoked = async (path: string, key: string, id: string, w: World) =>
    (await list(path, key, w)).find((x) => x.id === id)?.revoked_at != null;
  /** The device flow's token endpoint: 200 once the code was approved (pending otherwise). */
  const approved = async (deviceCode: string) =>
    (
      await send('POST', '/admin/v1/auth/token', {
        body: {
          grant_type: 'urn:ietf:params:oauth:grant-type:device_code',
          device_code: deviceCode,
          client_id: CLIENT_ID,
        },
      })
    ).status === 200;
  const own = (w: World) => bearer(w.owner.token);
  /** The world's webhook endpoint, as T's owner reads it. */
  const webhookOf = async (w: World) =>
    (
      await ok(
        send('GET', `/admin/v1/projects/${w.p}/webhooks/${w.webhook}`, { headers: own(w) }),
        200,
        'webhook',
      )
    ).body;

  const EXAMPLES: Record<string, Example> = {
    getOpenApiDocument: {},
    getLiveness: {},
    getReadiness: {},
    getJwks: {},
    // The key that signed the world's credential: listed all along (rotations keep a previous key
    // until its credentials expire; the sweep revokes only a next key).
    getJwk: {
      params: (w) => ({
        file: `${JSON.parse(Buffer.from(w.credential.split('.')[0] as string, 'base64url').toString()).kid}.jwk`,
      }),
    },
    listPlans: {},
    getPricing: {},
    getAuthorizationServerMetadata: {},
    signup: {
      body: (w) => ({ email: `${w.tag}-new@example.test`, password: PASSWORD, tenant_name: `${w.tag}-new` }),
      effect: async (w) =>
        (
          await send('POST', '/admin/v1/auth/login', {
            body: { email: `${w.tag}-new@example.test`, password: PASSWORD },
          })
        ).status === 200,
    },
    login: { body: () => OWNER },
    getSession: { headers: own },
    logout: {
      headers: (w) => bearer(w.logoutToken),
      effect: async (w) =>
        (await send('GET', '/admin/v1/auth/session', { headers: bearer(w.logoutToken) })).status === 401,
    },
    // The audit trail's reads (owner: audit:read).
    listAuditEvents: { headers: own },
    verifyAuditEvents: { headers: own },
    listAuditCheckpoints: { headers: own },
    createAuditCheckpoint: { headers: own },
    getAuditKeys: {},
    // The second factor: a login step never started, the status and settings of T's owner, an
    // enrolment started by the buyer (its own tenant), and what the owner cannot confirm or remove.
    loginMfa: { body: () => ({ mfa_token: `rpm_${'0'.repeat(72)}`, code: '123456' }) },
    getMfaStatus: { headers: own },
    startTotpEnrollment: { headers: (w) => bearer(w.buyer.token) },
    confirmTotpEnrollment: { headers: own, body: () => ({ code: '123456' }) },
    disableTotp: { headers: own, body: () => ({ code: '123456' }) },
    renewRecoveryCodes: { headers: own, body: () => ({ code: '123456' }) },
    getTenantSettings: { headers: own },
    updateTenantSettings: { headers: own, body: () => ({ require_mfa: false }) },
    listSessions: { headers: own },
    revokeSession: {
      headers: own,
      params: (w) => ({ id: w.sessionToRevoke.id }),
      effect: (w) => refused(w.sessionToRevoke.token),
    },
    revokeOtherSessions: {
      headers: (w) => bearer(w.u4.token),
      effect: (w) => refused(w.u4.otherToken),
    },
    changePassword: {
      headers: (w) => bearer(w.u5.token),
      body: () => ({ current_password: PASSWORD, new_password: `${PASSWORD} changed` }),
      effect: (w) => refused(w.u5.otherToken),
    },
    listMyTenants: { headers: own },
    switchTenant: {
      headers: (w) => bearer(w.u1.token),
      body: (w) => ({ tenant_id: w.owner.tenantId }),
      effect: async (w) =>
        (await ok(send('GET', '/admin/v1/auth/session', { headers: bearer(w.u1.token) }), 200, 'u1 session'))
          .body.tenant.id === w.owner.tenantId,
    },
    createProject: {
      headers: own,
      body: (w) => ({ name: `new-${w.tag}` }),
      effect: async (w) =>
        (await list('/admin/v1/projects', 'projects', w)).some((x) => x.name === `new-${w.tag}`),
    },
    listProjects: { headers: own },
    getProject: { headers: own, params: (w) => ({ project_id: w.p }) },
    listApiKeys: { headers: own, params: (w) => ({ project_id: w.p }) },
    createApiKey: {
      headers: own,
      params: (w) => ({ project_id: w.p }),
      body: () => ({ name: 'new' }),
      effect: async (w) =>
        (await list(`/admin/v1/projects/${w.p}/api-keys`, 'api_keys', w)).some((x) => x.name === 'new'),
    },
    revokeApiKey: {
      headers: own,
      params: (w) => ({ project_id: w.p, key_id: w.keyToRevoke }),
      effect: (w) => revoked(`/admin/v1/projects/${w.p}/api-keys`, 'api_keys', w.keyToRevoke, w),
    },
    listAllowlistEntries: { headers: own, params: (w) => ({ project_id: w.q }) },
    createAllowlistEntry: {
      headers: own,
      params: (w) => ({ project_id: w.q }),
      body: () => ({ cidr: '192.168.0.0/16' }),
      effect: async (w) =>
        (await list(`/admin/v1/projects/${w.q}/allowlist`, 'entries', w)).some(
          (x) => x.cidr === '192.168.0.0/16',
        ),
    },
    deleteAllowlistEntry: {
      headers: own,
      params: (w) => ({ project_id: w.q, entry_id: w.entryToDelete }),
      effect: async (w) =>
        !(await list(`/admin/v1/projects/${w.q}/allowlist`, 'entries', w)).some(
          (x) => x.id === w.entryToDelete,
        ),
    },
    listWebhookEndpoints: { headers: own, params: (w) => ({ project_id: w.p }) },
    createWebhookEndpoint: {
      headers: own,
      params: (w) => ({ project_id: w.p }),
      body: (w) => ({
        url: receiver.url(`/${w.tag}-new`),
        events: ['plan.changed'],
        description: `new-${w.tag}`,
      }),
      effect: async (w) =>
        (await list(`/admin/v1/projects/${w.p}/webhooks`, 'webhooks', w)).some(
          (x) => x.description === `new-${w.tag}`,
        ),
    },
    getWebhookEndpoint: { headers: own, params: (w) => ({ project_id: w.p, webhook_id: w.webhook }) },
    updateWebhookEndpoint: {
      headers: own,
      params: (w) => ({ project_id: w.p, webhook_id: w.webhook }),
      body: (w) => ({ description: `patched-${w.tag}` }),
      effect: async (w) => (await webhookOf(w)).description === `patched-${w.tag}`,
    },
    deleteWebhookEndpoint: {
      headers: own,
      params: (w) => ({ project_id: w.p, webhook_id: w.webhookToDelete }),
      effect: async (w) =>
        !(await list(`/admin/v1/projects/${w.p}/webhooks`, 'webhooks', w)).some(
          (x) => x.id === w.webhookToDelete,
        ),
    },
    rotateWebhookSecret: {
      headers: own,
      params: (w) => ({ project_id: w.p, webhook_id: w.webhook }),
      body: () => ({ grace_seconds: 60 }),
      effect: async (w) => (await webhookOf(w)).previous_secret_expires_at !== null,
    },
    listWebhookDeliveries: { headers: own, params: (w) => ({ project_id: w.p, webhook_id: w.webhook }) },
    redeliverWebhook: {
      headers: own,
      params: (w) => ({ project_id: w.p, webhook_id: w.webhook, delivery_id: w.delivery.id }),
      // A second delivery of the message.
      effect: async (w) =>
        (await list(`/admin/v1/projects/${w.p}/webhooks/${w.webhook}/deliveries`, 'deliveries', w)).filter(
          (d) => d.message_id === w.delivery.messageId,
        ).length > 1,
    },
    listBots: { headers: own, params: (w) => ({ project_id: w.p }) },
    createBot: {
      headers: own,
      params: (w) => ({ project_id: w.p }),
      body: (w) => ({ name: `new-${w.tag}` }),
      effect: async (w) =>
        (await list(`/admin/v1/projects/${w.p}/bots`, 'bots', w)).some((x) => x.name === `new-${w.tag}`),
    },
    createBotKey: {
      headers: own,
      params: (w) => ({ project_id: w.p, bot_id: w.bot }),
      effect: async (w) =>
        (await list(`/admin/v1/projects/${w.p}/bots/${w.bot}/keys`, 'bot_keys', w)).length > 1,
    },
    listBotKeys: { headers: own, params: (w) => ({ project_id: w.p, bot_id: w.bot }) },
    revokeBotKey: {
      headers: own,
      params: (w) => ({ project_id: w.p, bot_id: w.bot, key_id: w.botKeyToRevoke }),
      effect: (w) => revoked(`/admin/v1/projects/${w.p}/bots/${w.bot}/keys`, 'bot_keys', w.botKeyToRevoke, w),
    },
    createIdentityToken: {
      headers: own,
      params: (w) => ({ project_id: w.p, identity_id: w.bot }),
      body: () => ({ scopes: ['projects:read'] }),
      effect: async (w) =>
        (await list(`/v1/projects/${w.p}/identities/${w.bot}/tokens`, 'identity_tokens', w)).length > 1,
    },
    listIdentityTokens: { headers: own, params: (w) => ({ project_id: w.p, identity_id: w.bot }) },
    revokeIdentityToken: {
      headers: own,
      params: (w) => ({ project_id: w.p, identity_id: w.bot, token_id: w.identityTokenToRevoke }),
      effect: (w) =>
        revoked(
          `/v1/projects/${w.p}/identities/${w.bot}/tokens`,
          'identity_tokens',
          w.identityTokenToRevoke,
          w,
        ),
    },
    issueCredential: {
      headers: (w) => ({ 'x-api-key': w.hotKey }),
      body: () => ({}),
      effect: async (w) => (await credentialRows(w.owner.tenantId)) > w.credentialRows,
    },
    revokeCredential: {
      headers: own,
      params: (w) => ({ jti: w.credentialToRevoke }),
      effect: async (w) => {
        const feed = await ok(
          send('GET', '/v1/credentials/revocations?cursor=0', { headers: bearer(w.relayToken) }),
          200,
          'revocation feed',
        );
        return feed.body.revocations.some((r: { jti: string }) => r.jti === w.credentialToRevoke);
      },
    },
    listRevocations: { headers: (w) => bearer(w.relayToken), query: () => ({ cursor: '0' }) },
    listProjectCredentials: { headers: own, params: (w) => ({ project_id: w.p }) },
    revokeProjectCredentials: {
      headers: own,
      params: (w) => ({ project_id: w.p }),
      // Before any credential of this world (so none is revoked), in force (raises a watermark).
      body: () => ({ issued_before: new Date(Date.now() - 20 * 60_000).toISOString() }),
      effect: async (w) => {
        const feed = await ok(
          send('GET', '/v1/credentials/revocations?cursor=0', { headers: bearer(w.relayToken) }),
          200,
          'revocation feed',
        );
        return feed.body.watermarks.some((m: { project_id: string }) => m.project_id === w.p);
      },
    },
    introspectCredential: {
      headers: (w) => bearer(w.relayToken),
      body: (w) => ({ token: w.credential }),
    },
    listRelays: { headers: () => platform },
    registerRelay: {
      headers: () => platform,
      body: (w) => ({ region: 'eu-west', host: `relay-${w.tag}-new.example`, port: 4433 }),
      effect: async (w) =>
        (await ok(send('GET', '/admin/v1/relays', { headers: platform }), 200, 'relays')).body.relays.some(
          (r: { host: string }) => r.host === `relay-${w.tag}-new.example`,
        ),
    },
    deleteRelay: {
      headers: () => platform,
      params: (w) => ({ relay_id: w.relayToDelete }),
      effect: async (w) =>
        !(await ok(send('GET', '/admin/v1/relays', { headers: platform }), 200, 'relays')).body.relays.some(
          (r: { id: string }) => r.id === w.relayToDelete,
        ),
    },
    relayHeartbeat: { headers: (w) => bearer(w.relayToken), body: () => ({ load: 0.5 }) },
    getRelayAssignment: { headers: (w) => bearer(w.credential) },
    // A revalidation of a session never admitted (403 with everything up): sessions admitted
    // here would take slots of T, whose issuance must still succeed after each outage.
    relayAuth: {
      headers: (w) => bearer(w.relayToken),
      body: (w) => ({
        id: 'ffff',
        event: 'revalidate',
        node: w.relayId,
        transport: 'quic',
        path: '/sweep',
        query: `jwt=${w.credential}`,
      }),
    },
    endRelaySession: { headers: own, params: () => ({ session_id: 'ffff' }) },
    listRelaySessions: { headers: own, params: (w) => ({ project_id: w.p }) },
    listSigningKeys: { headers: () => platform },
    revokeSigningKey: {
      headers: () => platform,
      params: (w) => ({ kid: w.signingKeyToRevoke }),
      effect: async (w) => !(await publishedKids()).includes(w.signingKeyToRevoke),
    },
    rotateSigningKeys: {
      headers: () => platform,
      // Only an error must leave the keys as they were: a rotation already pending answers 2xx and adds none.
      effect: async (w) => JSON.stringify(await kids()) !== JSON.stringify(w.kids),
    },
    getSubscription: { headers: own },
    getTenantConnections: { headers: own },
    listTenants: { headers: () => platform },
    getUsage: {
      headers: own,
      query: () => {
        const today = new Date().toISOString().slice(0, 10);
        return { from: today, to: today };
      },
    },
    createCheckoutSession: {
      headers: (w) => ({ ...bearer(w.buyer.token), 'idempotency-key': `sweep-${w.tag}` }),
      body: () => ({ plan: 'pro' }),
      effect: async (w) =>
        (await count('billing.checkout_sessions where tenant_id = $1 and idempotency_key = $2', [
          w.buyer.tenantId,
          `sweep-${w.tag}`,
        ])) > 0,
    },
    setTenantPlan: {
      headers: () => platform,
      params: (w) => ({ tenant_id: w.u2.tenantId }),
      body: () => ({ plan: 'pro' }),
      effect: async (w) =>
        (
          await ok(
            send('GET', '/admin/v1/billing/subscription', { headers: bearer(w.u2.token) }),
            200,
            'u2 plan',
          )
        ).body.plan.id === 'pro',
    },
    showCheckout: { params: (w) => ({ id: w.checkoutSession }) },
    confirmCheckout: {
      params: (w) => ({ id: w.checkoutSession }),
      form: () => ({}),
      effect: async (w) =>
        (await ok(send('GET', '/admin/v1/billing/subscription', { headers: own(w) }), 200, 'T plan')).body
          .plan.id === 'pro',
    },
    listMembers: { headers: own },
    addMember: {
      headers: own,
      body: (w) => ({ email: w.u3.email, role: 'viewer' }),
      effect: async (w) =>
        (await list('/admin/v1/members', 'members', w)).some(
          (m) => (m.user as { email: string }).email === w.u3.email,
        ),
    },
    changeMemberRole: {
      headers: own,
      params: (w) => ({ user_id: w.u1.id }),
      body: () => ({ role: 'developer' }),
      effect: async (w) =>
        (await list('/admin/v1/members', 'members', w)).find((m) => (m.user as { id: string }).id === w.u1.id)
          ?.role === 'developer',
    },
    removeMember: {
      headers: own,
      params: (w) => ({ user_id: w.u2.id }),
      effect: async (w) =>
        !(await list('/admin/v1/members', 'members', w)).some(
          (m) => (m.user as { id: string }).id === w.u2.id,
        ),
    },
    startDeviceAuthorization: { form: () => ({ client_id: CLIENT_ID }) },
    token: {
      form: (w) => ({
        grant_type: 'urn:ietf:params:oauth:grant-type:device_code',
        device_code: w.devicePolled.deviceCode,
        client_id: CLIENT_ID,
      }),
    },
    decideDeviceAuthorization: {
      headers: own,
      body: (w) => ({ user_code: w.deviceApi.userCode, action: 'approve' }),
      effect: (w) => approved(w.deviceApi.deviceCode),
    },
    showDeviceVerification: {
      headers: (w) => ({ cookie: `rp_session=${w.owner.token}` }),
      query: (w) => ({ user_code: w.devicePolled.userCode }),
    },
    decideDeviceVerification: {
      headers: (w) => ({ cookie: `rp_session=${w.owner.token}` }),
      form: (w) => ({ user_code: w.devicePage.userCode, action: 'approve', csrf_token: w.owner.csrf }),
      effect: (w) => approved(w.devicePage.deviceCode),
    },
    billingWebhook: { params: () => ({ provider: 'builtin' }), body: () => ({}) },
  };

  beforeAll(async () => {
    await receiver.listen();
    database = await createTestDatabase('e2e_outage_sweep');
    redis = createTestRedis('e2e_outage_sweep');
    const pgTarget = new URL(database.url);
    pgProxy = await TcpProxy.start({ host: pgTarget.hostname, port: Number(pgTarget.port || 5432) });
    const redisTarget = new URL(redis.url);
    redisProxy = await TcpProxy.start({ host: redisTarget.hostname, port: Number(redisTarget.port || 6379) });
    const viaProxy = new URL(database.url);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(pgProxy.port);
    const plans = join(mkdtempSync(join(tmpdir(), 'rp-plans-')), 'plans.yaml');
    // Room for what each outage creates, so no answer is a plan limit.
    writeFileSync(
      plans,
      'plans:\n  free:\n    limits: { max_concurrent_connections: 50, max_api_keys: 10, max_projects: 10, max_bots: 10, max_allowlist_entries: 10, max_webhook_endpoints: 10 }\n',
    );
    system = await startDistributed({
      label: 'outage',
      databaseUrl: viaProxy.toString(),
      migrateDatabaseUrl: database.url,
      redisUrl: `redis://127.0.0.1:${redisProxy.port}`,
      redisPrefix: redis.prefix,
      kek: Buffer.alloc(32, 16).toString('base64'),
      bootstrap: OWNER,
      extraEnv: {
        RELAYPLANE_PLANS_FILE: plans,
        GATEWAY_RPC_TIMEOUT_MS: String(RPC_TIMEOUT_MS),
        // Every request of this file comes from 127.0.0.1.
        ADMIN_LOGIN_MAX_PER_IP: '10000',
        ADMIN_SIGNUP_MAX_PER_IP: '10000',
        ADMIN_DEVICE_MAX_CODES_PER_IP: '10000',
        // The buyer checks out pro through the built-in provider.
        BILLING_BUILTIN_PAID_CHECKOUT: 'true',
        // The worlds' webhook endpoints deliver to this file's receiver.
        RELAYPLANE_WEBHOOKS_ALLOW_HTTP_LOOPBACK: 'true',
      },
    });
    api = await Api.connect(system.baseUrl);
    doc = (await (await fetch(`${system.baseUrl}/openapi.json`)).json()) as typeof doc;
    platform = bearer((await login(OWNER.email, OWNER.password)).token);
  }, 120_000);

  afterAll(async () => {
    const codes = (await system?.stop()) ?? [];
    await pgProxy?.close();
    await redisProxy?.close();
    await redis?.clean();
    await database?.drop();
    await receiver.close();
    expect(Object.fromEntries(system.procs.map((p, i) => [p.name, codes[i]]))).toEqual(
      Object.fromEntries(system.procs.map((p) => [p.name, 0])),
    );
  });

  it('the table has a request for every operation the OpenAPI document lists, and nothing else', () => {
    const documented = operations(doc).map((o) => o.operationId);
    expect(documented.length).toBeGreaterThan(50);
    expect(documented.filter((id) => !(id in EXAMPLES))).toEqual([]);
    expect(Object.keys(EXAMPLES).filter((id) => !documented.includes(id))).toEqual([]);
  });

  /** Whether the operation answers HTML (the browser pages): those are sent without the JSON client. */
  const isHtml = (op: Operation) =>
    Object.values(op.responses).some((r) => r.content !== undefined && 'text/html' in r.content);

  /** Sends the operation's example request and checks the answer against the rules of an outage. */
  async function call(op: Operation, w: World): Promise<Answer> {
    const example = EXAMPLES[op.operationId];
    if (!example) throw new Error(`no example request for ${op.operationId}`);
    const params = example.params?.(w) ?? {};
    let path = op.path.replace(/\{([^}]+)\}/g, (_, name: string) => {
      const value = params[name];
      if (value === undefined) throw new Error(`${op.operationId}: no value for path parameter ${name}`);
      return encodeURIComponent(value);
    });
    const query = example.query?.(w);
    if (query) path += `?${new URLSearchParams(query)}`;
    const headers: Headers = { ...example.headers?.(w) };
    const form = example.form?.(w);
    let raw: string | undefined;
    if (form) {
      headers['content-type'] = 'application/x-www-form-urlencoded';
      raw = new URLSearchParams(form).toString();
    }
    const body = example.body?.(w);
    const answer: Answer = { operationId: op.operationId, status: 0, ms: 0, problems: [] };
    const started = performance.now();
    try {
      if (isHtml(op)) {
        if (body !== undefined) {
          headers['content-type'] = 'application/json';
          raw = JSON.stringify(body);
        }
        const res = await fetch(system.baseUrl + path, { method: op.method, headers, body: raw });
        const text = await res.text();
        answer.status = res.status;
        answer.retryAfter = res.headers.get('retry-after');
        const type = res.headers.get('content-type') ?? '';
        const documented = op.responses[String(res.status)];
        if (!documented) answer.problems.push(`answered ${res.status}, which is not documented`);
        else if (documented.content && !Object.keys(documented.content).some((t) => type.startsWith(t)))
          answer.problems.push(
            `answered ${res.status} as ${type}, documented as ${Object.keys(documented.content)}`,
          );
        if (type.startsWith('application/json')) answer.error = errorOf(JSON.parse(text), answer);
      } else {
        const res = await api.request(op.method, path, { headers, body, raw });
        answer.status = res.status;
        answer.retryAfter = res.headers.get('retry-after');
        if (res.status >= 400) answer.error = errorOf(res.body, answer);
      }
    } catch (err) {
      // The JSON client refuses a status or body the document does not describe.
      answer.problems.push((err as Error).message.slice(0, 300));
    }
    answer.ms = Math.round(performance.now() - started);
    if (answer.status >= 500 && answer.status !== 503) answer.problems.push(`answered ${answer.status}`);
    if (answer.status === 503 && !/^[1-9]\d*$/.test(answer.retryAfter ?? ''))
      answer.problems.push(`503 without a usable Retry-After (${answer.retryAfter})`);
    if (answer.ms > ANSWER_BOUND_MS) answer.problems.push(`answered after ${answer.ms} ms`);
    return answer;
  }

  /** Every documented operation once, CONCURRENCY at a time. */
  async function sweep(w: World): Promise<Answer[]> {
    const queue = operations(doc);
    const answers: Answer[] = [];
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        for (let op = queue.shift(); op; op = queue.shift()) answers.push(await call(op, w));
      }),
    );
    return answers;
  }

  /** The system serves again: every service ready, and an issuance goes through. */
  async function recovered(w: World): Promise<number> {
    const started = performance.now();
    await waitFor(
      async () => (await fetch(`${system.baseUrl}/readyz`)).status === 200,
      RECOVERY_MS,
      'readyz 200',
    );
    // Every pooled PostgreSQL connection of every service answers: one request per connection and more.
    const burst = await Promise.all(
      Array.from({ length: 20 }, () => send('GET', '/admin/v1/projects', { headers: bearer(w.owner.token) })),
    );
    expect(burst.map((r) => r.status)).toEqual(burst.map(() => 200));
    return Math.round(performance.now() - started);
  }

  /** What every operation answers while nothing is down (the control run), by operationId. */
  const normally = new Map<string, number>();
  const summary: string[] = [];

  /** The answers, by status and slowest, and each answer on its own line. */
  function report(tag: string, answers: Answer[], recoveryMs?: number): void {
    const byStatus: Record<number, number> = {};
    for (const a of answers) byStatus[a.status] = (byStatus[a.status] ?? 0) + 1;
    const slowest = answers.reduce((m, a) => Math.max(m, a.ms), 0);
    summary.push(
      `${tag}: ${answers.length} operations, statuses ${JSON.stringify(byStatus)}, slowest ${slowest} ms` +
        (recoveryMs === undefined ? '' : `, serving again ${recoveryMs} ms after the outage ended`),
    );
    console.log(
      [
        summary.at(-1),
        ...answers.map(
          (a) => `  ${a.operationId.padEnd(34)} ${a.status} ${String(a.ms).padStart(5)} ms ${a.error ?? ''}`,
        ),
      ].join('\n'),
    );
  }

  const succeeded = (a: Answer) => a.status >= 200 && a.status < 300;

  /** Probes every effect: it must exist exactly when its request answered 2xx. */
  async function effectsOf(w: World, answers: Answer[]): Promise<string[]> {
    const wrong: string[] = [];
    for (const a of answers) {
      const probe = EXAMPLES[a.operationId]?.effect;
      if (!probe) continue;
      const took = await probe(w);
      // A rotation already pending answers 2xx and adds no key: only an error must change nothing.
      const holds = a.operationId === 'rotateSigningKeys' && succeeded(a) ? true : took === succeeded(a);
      if (!holds)
        wrong.push(
          `${a.operationId} answered ${a.status} and its effect ${took ? 'exists' : 'does not exist'}`,
        );
    }
    return wrong;
  }

  const problemsOf = (answers: Answer[]) =>
    answers.filter((a) => a.problems.length).map((a) => `${a.operationId}: ${a.problems.join('; ')}`);

  it('without an outage (the control): every example answers as documented, 2xx but the expected refusals, and every probe sees its effect', async () => {
    const w = await buildWorld('control');
    const answers = await sweep(w);
    report('control', answers);
    for (const a of answers) normally.set(a.operationId, a.status);
    expect(problemsOf(answers)).toEqual([]);
    expect(
      answers
        .filter((a) => !succeeded(a))
        .map((a) => `${a.operationId} ${a.status}`)
        .sort(),
    ).toEqual(
      Object.entries(NORMALLY_REFUSED)
        .map(([id, status]) => `${id} ${status}`)
        .sort(),
    );
    expect(await effectsOf(w, answers)).toEqual([]);
  }, 60_000);

  interface Outage {
    name: string;
    tag: string;
    start(): Promise<void> | void;
    end(): Promise<void> | void;
    /** Operations that must answer as they do without the outage; every other one may answer 503 instead. */
    unaffected(operationId: string): boolean;
    /** PostgreSQL is away: issuance with a cached API key gets past authentication. */
    postgres: boolean;
  }

  const withoutPostgres = (id: string) => ANSWERING_ALWAYS.includes(id);
  const withoutRedis = (id: string) => !NEEDS_REDIS.includes(id);
  const outages: Outage[] = [
    {
      name: 'PostgreSQL down (connections reset, port refused)',
      tag: 'pgdown',
      start: () => pgProxy.refuse(),
      end: () => pgProxy.restore(),
      unaffected: withoutPostgres,
      postgres: true,
    },
    {
      name: 'PostgreSQL blackholed (connections stall), ended by a failover',
      tag: 'pghole',
      start: () => pgProxy.blackhole(),
      end: () => pgProxy.failover(),
      unaffected: withoutPostgres,
      postgres: true,
    },
    {
      name: 'Redis down (connections reset, port refused)',
      tag: 'rdown',
      start: () => redisProxy.refuse(),
      end: () => redisProxy.restore(),
      unaffected: withoutRedis,
      postgres: false,
    },
    {
      name: 'Redis blackholed (connections stall)',
      tag: 'rhole',
      start: () => redisProxy.blackhole(),
      end: () => redisProxy.restore(),
      unaffected: withoutRedis,
      postgres: false,
    },
  ];

  it.each(outages)(
    '$name: no 5xx but 503 + Retry-After, 4xx exactly {error}, bounded answers, nothing committed by an error, then serving again',
    async (outage) => {
      expect(normally.size, 'the control run').toBe(operations(doc).length);
      const w = await buildWorld(outage.tag);
      let answers: Answer[];
      let cached: { hot: Answer; cold: Answer } | undefined;
      await outage.start();
      try {
        if (outage.postgres) {
          // The hot key was verified by the world's last request, well within the gateway's 1 s cache.
          const issuance = operations(doc).find((o) => o.operationId === 'issueCredential') as Operation;
          cached = { hot: await call(issuance, w), cold: await call(issuance, { ...w, hotKey: w.coldKey }) };
        }
        answers = await sweep(w);
      } finally {
        await outage.end();
      }
      const recoveryMs = await recovered(w);
      report(outage.tag, answers, recoveryMs);

      expect(problemsOf(answers)).toEqual([]);
      expect(
        answers
          .filter((a) => a.status !== normally.get(a.operationId))
          .filter((a) => outage.unaffected(a.operationId) || a.status !== 503)
          .map(
            (a) => `${a.operationId} answered ${a.status}, ${normally.get(a.operationId)} without the outage`,
          ),
      ).toEqual([]);
      if (cached) {
        for (const a of [cached.hot, cached.cold]) expect(a.problems).toEqual([]);
        // Past authentication: refused where the credential is recorded (or at that call's deadline)…
        expect(cached.hot.status).toBe(503);
        expect([
          'credentials cannot be recorded right now; retry shortly',
          'the issuer did not answer in time',
        ]).toContain(cached.hot.error);
        // …while a key the gateway has not seen is refused at its lookup.
        expect(cached.cold.status).toBe(503);
        expect([DEPENDENCY_UNAVAILABLE_MESSAGE, 'AdminService is unavailable']).toContain(cached.cold.error);
      }
      expect(await effectsOf(w, answers)).toEqual([]);
      await waitFor(async () => (await issue(w.hotKey)).status === 201, RECOVERY_MS, 'an issuance 201');
      for (const p of system.procs) expect(p.child.exitCode, `${p.name} still running`).toBeNull();
    },
    120_000,
  );

  it('summary', () => {
    console.log(summary.join('\n'));
    expect(summary).toHaveLength(1 + outages.length);
  });
});

/** What one request of the sweep answered. */
interface Answer {
  operationId: string;
  status: number;
  ms: number;
  retryAfter?: string | null;
  /** The `error` of an error body. */
  error?: string;
  /** Every rule of an outage the answer broke. */
  problems: string[];
}

/** The `error` of a JSON error body, noting a body that is not exactly `{"error": "..."}`. */
function errorOf(body: unknown, answer: Answer): string | undefined {
  const keys = typeof body === 'object' && body !== null ? Object.keys(body) : [];
  const error = (body as { error?: unknown } | undefined)?.error;
  if (keys.length !== 1 || typeof error !== 'string') {
    answer.problems.push(
      `error body is not exactly {"error": "..."}: ${JSON.stringify(body)?.slice(0, 200)}`,
    );
    return undefined;
  }
  return error;
}

interface OperationDoc {
  operationId: string;
  responses: Record<string, { content?: Record<string, unknown> }>;
}

interface Operation extends OperationDoc {
  method: string;
  path: string;
}

/** Every path × method of the document. */
function operations(doc: { paths: Record<string, Record<string, OperationDoc>> }): Operation[] {
  return Object.entries(doc.paths).flatMap(([path, methods]) =>
    Object.entries(methods)
      .filter(([method]) => ['get', 'post', 'put', 'patch', 'delete'].includes(method))
      .map(([method, op]) => ({ ...op, method: method.toUpperCase(), path })),
  );
}
