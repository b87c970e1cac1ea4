import { auditSecretsIn } from '@relayplane/testing/audit';
import {
  createTestDatabase,
  createTestRedis,
  type TestDatabase,
  type TestRedis,
} from '@relayplane/testing/storage';
import {
  allowInsecureRequests,
  type Configuration,
  discovery,
  initiateDeviceAuthorization,
  None,
  pollDeviceAuthorizationGrant,
} from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../support/api.ts';
import { type Distributed, startDistributed } from '../support/distributed.ts';

const OWNER = { email: 'cli-owner@example.test', password: 'device flow password' };
const CLIENT_ID = 'relayplane-cli';

describe('device flow (RFC 8628) with a standard OAuth client, four processes', () => {
  let database: TestDatabase;
  let redis: TestRedis;
  let system: Distributed | undefined;
  let api: Api;
  let config: Configuration;

  beforeAll(async () => {
    database = await createTestDatabase('e2e_device');
    redis = createTestRedis('e2e_device');
    system = await startDistributed({
      label: 'device',
      databaseUrl: database.url,
      redisUrl: redis.url,
      redisPrefix: redis.prefix,
      kek: Buffer.alloc(32, 5).toString('base64'),
      bootstrap: OWNER,
      // A 1 s polling interval keeps the test short; the default is 5 s.
      extraEnv: { ADMIN_DEVICE_POLL_INTERVAL_SECONDS: '1' },
    });
    api = await Api.connect(system.baseUrl);
  }, 120_000);

  afterAll(async () => {
    await system?.stop();
    await redis?.clean();
    await database?.drop();
  });

  it('discovers the endpoints from /.well-known/oauth-authorization-server alone', async () => {
    config = await discovery(new URL(system?.baseUrl ?? ''), CLIENT_ID, undefined, None(), {
      execute: [allowInsecureRequests],
      algorithm: 'oauth2',
    });
    const metadata = config.serverMetadata();
    expect(metadata.issuer).toBe(system?.baseUrl);
    expect(metadata.device_authorization_endpoint).toBe(`${system?.baseUrl}/admin/v1/auth/device/code`);
    expect(metadata.token_endpoint).toBe(`${system?.baseUrl}/admin/v1/auth/token`);
    expect(metadata.grant_types_supported).toEqual(['urn:ietf:params:oauth:grant-type:device_code']);
  });

  it('runs the device flow: the user approves the code, the client gets a CLI token that works', async () => {
    const authorization = await initiateDeviceAuthorization(config, { scope: 'cli' });
    auditSecretsIn(authorization);
    expect(authorization.user_code).toMatch(/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
    expect(authorization.verification_uri).toBe(`${system?.baseUrl}/activate`);
    expect(authorization.interval).toBe(1);

    // The device polls (authorization_pending meanwhile) while the user approves in a browser session.
    const polling = pollDeviceAuthorizationGrant(config, authorization);
    polling.catch(() => {});

    const login = await api.request('POST', '/admin/v1/auth/login', { body: OWNER });
    expect(login.status).toBe(200);
    // The server-rendered page (no JavaScript); `verification_uri` is the console's, tested in a browser (console.test.ts).
    const page = await fetch(
      `${system?.baseUrl}/device?user_code=${encodeURIComponent(authorization.user_code)}`,
      {
        headers: { cookie: `rp_session=${login.body.token}` },
      },
    );
    expect(page.status).toBe(200);
    expect(await page.text()).toContain(authorization.user_code);
    const approved = await api.request('POST', '/admin/v1/auth/device/approve', {
      headers: { authorization: `Bearer ${login.body.token}` },
      body: { user_code: authorization.user_code, action: 'approve' },
    });
    expect(approved.status).toBe(200);
    expect(approved.body).toEqual({ status: 'approved', client_id: CLIENT_ID });

    const tokens = await polling;
    expect(tokens.token_type).toBe('bearer');
    expect(tokens.access_token).toMatch(/^rpc_[0-9a-f]{72}$/);
    expect(tokens.expires_in).toBe(2_592_000);

    const session = await api.request('GET', '/admin/v1/auth/session', {
      headers: { authorization: `Bearer ${tokens.access_token}` },
    });
    expect(session.status).toBe(200);
    expect(session.body.user.email).toBe(OWNER.email);
    expect(session.body.tenant.name).toBe('default');

    // The session behind the token is a CLI token.
    expect(session.body.kind).toBe('cli');
    expect(session.body.authenticated_by).toBe('bearer');

    // Used once: polling the same device code again is invalid_grant.
    const again = await api.request('POST', '/admin/v1/auth/token', {
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      raw: new URLSearchParams({
        grant_type: 'urn:ietf:params:oauth:grant-type:device_code',
        device_code: authorization.device_code,
        client_id: CLIENT_ID,
      }).toString(),
    });
    expect({ status: again.status, body: again.body }).toEqual({
      status: 400,
      body: { error: 'invalid_grant' },
    });
  });

  it('a denied request ends the client’s polling with access_denied', async () => {
    const authorization = await initiateDeviceAuthorization(config, {});
    auditSecretsIn(authorization);
    const polling = pollDeviceAuthorizationGrant(config, authorization);
    polling.catch(() => {});
    const login = await api.request('POST', '/admin/v1/auth/login', { body: OWNER });
    const denied = await api.request('POST', '/admin/v1/auth/device/approve', {
      headers: { authorization: `Bearer ${login.body.token}` },
      body: { user_code: authorization.user_code.toLowerCase(), action: 'deny' },
    });
    expect(denied.body).toEqual({ status: 'denied', client_id: CLIENT_ID });
    await expect(polling).rejects.toMatchObject({ error: 'access_denied' });
  });
});
