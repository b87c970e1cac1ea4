import { createHash } from 'node:crypto';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import type { RoleName } from '@relayplane/contract/contract';
import { INVALID_TOKEN_MESSAGE } from '@relayplane/contract/errors';
import { parseToken } from '@relayplane/contract/tokens';
import {
  type AdminService as AdminRpc,
  type Principal,
  PrincipalKind,
  TenantRole,
} from '@relayplane/proto/admin';
import type { BillingService as BillingRpc } from '@relayplane/proto/billing';
import { ManualClock } from '@relayplane/shared/clock';
import type { ServiceClient } from '@relayplane/shared/rpc';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AdminService } from '../src/service.ts';
import {
  type AdminRig,
  captureLogs,
  expectAppError,
  principalFor,
  startAdminRig,
} from './support/harness.ts';

const PASSWORD = 'a long enough password';
const HOUR = 3_600_000;
const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');

describe('identity tokens over gRPC (real PostgreSQL, real billing)', () => {
  let rig: AdminRig | undefined;
  let billingClient: ServiceClient<typeof BillingRpc>;
  let admin: AdminService;
  let client: ServiceClient<typeof AdminRpc>;
  const logs = captureLogs();
  const clock = new ManualClock(Date.parse('2026-11-26T09:00:00Z'));
  let seq = 0;

  beforeAll(async () => {
    rig = await startAdminRig('adminidentity', {}, { clock, logger: logs.logger });
    ({ billingClient, admin, client } = rig);
  });

  afterAll(async () => {
    await rig?.close();
  });

  const principalOf = (email: string) => principalFor(client, email, PASSWORD);

  /** A fresh pro tenant, its owner, one project with a developer bot and a viewer bot. */
  async function newTenant(label: string) {
    const email = `${label}-${++seq}@example.com`;
    const signedUp = await client.signup({ email, password: PASSWORD, tenantName: `${label} inc` });
    const tenantId = signedUp.tenant?.id ?? '';
    await billingClient.setPlan({ tenantId, planId: 'pro' });
    const owner = await principalOf(email);
    const { project } = await client.createProject({ principal: owner, name: 'main', environment: '' });
    if (!project) throw new Error('no project');
    const dev = (await client.createBot({ principal: owner, projectId: project.id, name: 'dev', role: 0 }))
      .bot;
    const viewer = (
      await client.createBot({ principal: owner, projectId: project.id, name: 'ro', role: TenantRole.VIEWER })
    ).bot;
    if (!dev || !viewer) throw new Error('no bots');
    return { tenantId, owner, projectId: project.id, devBot: dev.id, viewerBot: viewer.id };
  }

  /** A member of `tenantId` with `role` (the oldest membership: their sessions act in that tenant). */
  async function member(tenantId: string, role: RoleName): Promise<Principal> {
    const email = `m${role}-${++seq}@example.com`;
    await client.signup({ email, password: PASSWORD, tenantName: `m${seq}` });
    const own = await principalOf(email);
    await admin.accounts.addMembership(tenantId, own.userId, role, new Date(0));
    const principal = await principalOf(email);
    expect(principal.tenantId).toBe(tenantId);
    return principal;
  }

  it('creates a token acting as the bot with exactly its scopes; the value is answered once and stored hashed', async () => {
    const t = await newTenant('create');
    const res = await client.createIdentityToken({
      principal: t.owner,
      projectId: t.projectId,
      identityId: t.devBot,
      scopes: ['projects:read', 'api_keys:read', 'api_keys:read'],
    });
    expect(parseToken(res.value)).toBe('identity');
    expect(res.identityToken).toMatchObject({
      identityId: t.devBot,
      projectId: t.projectId,
      scopes: ['projects:read', 'api_keys:read'],
      displayPrefix: res.value.slice(0, 8),
      lastFour: res.value.slice(-4),
    });
    // Default lifetime: one hour.
    expect(Number(res.identityToken?.expiresAt?.seconds) * 1000 - clock.now().getTime()).toBe(HOUR);

    const rows = await sql<Record<string, unknown>>`
      select * from admin.identity_tokens where id = ${res.identityToken?.id ?? ''}
    `.execute(admin.database.db);
    expect(rows.rows).toHaveLength(1);
    expect(rows.rows[0]?.token_hash).toBe(sha256(res.value));
    expect(JSON.stringify(rows.rows[0])).not.toContain(res.value.slice(4, 68));
    expect(rows.rows[0]?.created_by_user_id).toBe(t.owner.userId);
    expect(logs.lines.join('\n')).not.toContain(res.value);

    const auth = await client.authenticate({ token: res.value });
    expect(auth.principal).toMatchObject({
      kind: PrincipalKind.IDENTITY,
      tenantId: t.tenantId,
      projectId: t.projectId,
      botId: t.devBot,
      role: TenantRole.DEVELOPER,
      identityTokenId: res.identityToken?.id,
      scopes: ['projects:read', 'api_keys:read'],
    });
    expect(auth.bot?.id).toBe(t.devBot);
    const principal = auth.principal as Principal;
    expect((await client.listApiKeys({ principal, projectId: t.projectId })).apiKeys).toEqual([]);
    await expectAppError(
      client.createApiKey({ principal, projectId: t.projectId, name: 'x', mode: 'live', scopes: [] }),
      'forbidden',
      "the identity token's scopes do not grant permission api_keys:write",
    );
    const { projects } = await client.listProjects({ principal });
    expect(projects.map((p) => p.id)).toEqual([t.projectId]);
  });

  it('refuses scopes the caller does not hold or the identity cannot hold (403), unknown ones (400)', async () => {
    const t = await newTenant('scopes');
    const developer = await member(t.tenantId, 'developer');
    const create = (principal: Principal, identityId: string, scopes: string[]) =>
      client.createIdentityToken({ principal, projectId: t.projectId, identityId, scopes });
    await expectAppError(
      create(developer, t.devBot, ['bots:read', 'bots:write']),
      'forbidden',
      'the caller does not hold scope bots:write',
    );
    await expectAppError(
      create(t.owner, t.viewerBot, ['api_keys:write']),
      'forbidden',
      "the identity's role (viewer) does not grant scope api_keys:write",
    );
    await expectAppError(
      create(t.owner, t.devBot, ['members:read']),
      'forbidden',
      'scope members:read is not available to identities (it needs a user session)',
    );
    await expectAppError(
      create(t.owner, t.devBot, ['relay:session']),
      'invalid_request',
      /unknown scope "relay:session"/,
    );
    await expectAppError(
      create(t.owner, t.devBot, []),
      'invalid_request',
      'scopes must name at least one permission',
    );
    const viewer = await member(t.tenantId, 'viewer');
    await expectAppError(
      create(viewer, t.devBot, ['projects:read']),
      'forbidden',
      'your role (viewer) does not grant permission identity_tokens:write',
    );
    // A developer may lend what both hold.
    const ok = await create(developer, t.devBot, ['api_keys:write']);
    expect(ok.identityToken?.scopes).toEqual(['api_keys:write']);
  });

  it('bounds expires_at to [60 s, 30 days] ahead', async () => {
    const t = await newTenant('expiry');
    const at = (ms: number) =>
      client.createIdentityToken({
        principal: t.owner,
        projectId: t.projectId,
        identityId: t.devBot,
        scopes: ['projects:read'],
        expiresAt: timestampFromMs(clock.now().getTime() + ms),
      });
    await expectAppError(
      at(59_000),
      'invalid_request',
      'expires_at must be at least 60 seconds in the future',
    );
    await expectAppError(
      at(-HOUR),
      'invalid_request',
      'expires_at must be at least 60 seconds in the future',
    );
    await expectAppError(
      at(30 * 24 * HOUR + 1000),
      'invalid_request',
      'expires_at must be at most 30 days in the future',
    );
    const max = await at(30 * 24 * HOUR);
    expect(Number(max.identityToken?.expiresAt?.seconds) * 1000).toBe(clock.now().getTime() + 30 * 24 * HOUR);
    const min = await at(60_000);
    expect((await client.authenticate({ token: min.value })).principal?.kind).toBe(PrincipalKind.IDENTITY);
    clock.advance(60_000);
    await expectAppError(client.authenticate({ token: min.value }), 'unauthenticated', INVALID_TOKEN_MESSAGE);
  });

  it('lets an identity token create a narrower token, and refuses bot tokens as callers', async () => {
    const t = await newTenant('chain');
    const parent = await client.createIdentityToken({
      principal: t.owner,
      projectId: t.projectId,
      identityId: t.devBot,
      scopes: ['identity_tokens:write', 'api_keys:read'],
    });
    const asParent = (await client.authenticate({ token: parent.value })).principal as Principal;
    const child = await client.createIdentityToken({
      principal: asParent,
      projectId: t.projectId,
      identityId: t.viewerBot,
      scopes: ['api_keys:read'],
    });
    expect(child.identityToken?.scopes).toEqual(['api_keys:read']);
    const rows = await sql<{ created_by_token_id: string | null; created_by_user_id: string | null }>`
      select created_by_token_id, created_by_user_id from admin.identity_tokens where id = ${child.identityToken?.id ?? ''}
    `.execute(admin.database.db);
    expect(rows.rows[0]).toEqual({ created_by_token_id: parent.identityToken?.id, created_by_user_id: null });
    await expectAppError(
      client.createIdentityToken({
        principal: asParent,
        projectId: t.projectId,
        identityId: t.devBot,
        scopes: ['projects:read'],
      }),
      'forbidden',
      'the caller does not hold scope projects:read',
    );

    const { token: botToken } = await client.createBotKey({
      principal: t.owner,
      projectId: t.projectId,
      botId: t.devBot,
    });
    const asBot = (await client.authenticate({ token: botToken })).principal as Principal;
    await expectAppError(
      client.createIdentityToken({
        principal: asBot,
        projectId: t.projectId,
        identityId: t.devBot,
        scopes: ['projects:read'],
      }),
      'forbidden',
      /bot tokens are not accepted/,
    );
  });

  it('never outlives what made it: the calling token (expiry, revocation, down the chain) and its root user', async () => {
    const t = await newTenant('lifetime');
    const create = (principal: Principal, scopes: string[], expiresInMs?: number, identityId = t.devBot) =>
      client.createIdentityToken({
        principal,
        projectId: t.projectId,
        identityId,
        scopes,
        expiresAt:
          expiresInMs === undefined ? undefined : timestampFromMs(clock.now().getTime() + expiresInMs),
      });
    const asToken = async (value: string) =>
      (await client.authenticate({ token: value })).principal as Principal;
    const parent = await create(
      t.owner,
      ['identity_tokens:write', 'api_keys:write', 'api_keys:read'],
      2 * 60_000,
    );
    const asParent = await asToken(parent.value);

    // Expiry: at most the parent's; without one, the parent's when that comes before an hour.
    await expectAppError(
      create(asParent, ['api_keys:read'], 29 * 24 * HOUR),
      'invalid_request',
      /must not be later than the calling identity token's expiry/,
    );
    const child = await create(asParent, ['identity_tokens:write', 'api_keys:write'], undefined, t.devBot);
    expect(child.identityToken?.expiresAt).toEqual(parent.identityToken?.expiresAt);
    const grandchild = await create(await asToken(child.value), ['api_keys:write'], 60_000);
    const rows = await sql<{ root_user_id: string }>`
      select root_user_id from admin.identity_tokens where id = ${grandchild.identityToken?.id ?? ''}
    `.execute(admin.database.db);
    expect(rows.rows[0]?.root_user_id).toBe(t.owner.userId);

    // Revoking the parent ends its whole line at once.
    expect((await client.authenticate({ token: grandchild.value })).principal?.kind).toBe(
      PrincipalKind.IDENTITY,
    );
    await client.revokeIdentityToken({
      principal: t.owner,
      projectId: t.projectId,
      identityId: t.devBot,
      tokenId: parent.identityToken?.id ?? '',
    });
    for (const token of [parent.value, child.value, grandchild.value]) {
      await expectAppError(client.authenticate({ token }), 'unauthenticated', INVALID_TOKEN_MESSAGE);
    }
    // And the principal of a dead child is refused by every call, not only by Authenticate.
    await expectAppError(
      client.listApiKeys({ principal: asParent, projectId: t.projectId }),
      'unauthenticated',
    );
  });

  it('follows its root user: a demotion shrinks what the token holds, a removal ends it', async () => {
    const t = await newTenant('rootuser');
    const developer = await member(t.tenantId, 'developer');
    const made = await client.createIdentityToken({
      principal: developer,
      projectId: t.projectId,
      identityId: t.devBot,
      scopes: ['api_keys:read', 'api_keys:write'],
    });
    const before = (await client.authenticate({ token: made.value })).principal as Principal;
    expect(before.scopes).toEqual(['api_keys:read', 'api_keys:write']);
    await client.createApiKey({
      principal: before,
      projectId: t.projectId,
      name: 'k',
      mode: 'live',
      scopes: [],
    });

    await client.changeMemberRole({ principal: t.owner, userId: developer.userId, role: TenantRole.VIEWER });
    const demoted = (await client.authenticate({ token: made.value })).principal as Principal;
    expect(demoted.scopes).toEqual(['api_keys:read']);
    // A principal obtained before the demotion is re-read by admin: the write is refused.
    await expectAppError(
      client.createApiKey({
        principal: before,
        projectId: t.projectId,
        name: 'k2',
        mode: 'live',
        scopes: [],
      }),
      'forbidden',
      "the identity token's scopes do not grant permission api_keys:write",
    );

    await client.removeMember({ principal: t.owner, userId: developer.userId });
    await expectAppError(
      client.authenticate({ token: made.value }),
      'unauthenticated',
      INVALID_TOKEN_MESSAGE,
    );
    await expectAppError(
      client.listApiKeys({ principal: demoted, projectId: t.projectId }),
      'unauthenticated',
    );
  });

  it('lists without values and revokes idempotently; a revoked token stops authenticating', async () => {
    const t = await newTenant('revoke');
    const a = await client.createIdentityToken({
      principal: t.owner,
      projectId: t.projectId,
      identityId: t.devBot,
      scopes: ['projects:read'],
    });
    clock.advance(1000);
    const b = await client.createIdentityToken({
      principal: t.owner,
      projectId: t.projectId,
      identityId: t.devBot,
      scopes: ['bots:read'],
    });
    const listed = await client.listIdentityTokens({
      principal: t.owner,
      projectId: t.projectId,
      identityId: t.devBot,
    });
    expect(listed.identityTokens.map((x) => x.id)).toEqual([b.identityToken?.id, a.identityToken?.id]);
    expect(
      JSON.stringify(listed.identityTokens, (_k, v) => (typeof v === 'bigint' ? String(v) : v)),
    ).not.toContain(a.value.slice(8, 40));

    const first = await client.revokeIdentityToken({
      principal: t.owner,
      projectId: t.projectId,
      identityId: t.devBot,
      tokenId: a.identityToken?.id ?? '',
    });
    clock.advance(5000);
    const again = await client.revokeIdentityToken({
      principal: t.owner,
      projectId: t.projectId,
      identityId: t.devBot,
      tokenId: a.identityToken?.id ?? '',
    });
    expect(again.identityToken?.revokedAt?.seconds).toBe(first.identityToken?.revokedAt?.seconds);
    await expectAppError(client.authenticate({ token: a.value }), 'unauthenticated', INVALID_TOKEN_MESSAGE);
    expect((await client.authenticate({ token: b.value })).principal?.identityTokenId).toBe(
      b.identityToken?.id,
    );
    await expectAppError(
      client.revokeIdentityToken({
        principal: t.owner,
        projectId: t.projectId,
        identityId: t.devBot,
        tokenId: 'idt_00000000000000000000',
      }),
      'not_found',
      'identity token not found',
    );
  });

  it("answers another tenant's or another project's ids exactly like missing ones", async () => {
    const a = await newTenant('ta');
    const b = await newTenant('tb');
    // Each call starts only when awaited: a rejection never waits unobserved.
    const calls = (principal: Principal, projectId: string, identityId: string) => [
      () => client.createIdentityToken({ principal, projectId, identityId, scopes: ['projects:read'] }),
      () => client.listIdentityTokens({ principal, projectId, identityId }),
    ];
    for (const call of calls(a.owner, b.projectId, b.devBot))
      await expectAppError(call(), 'not_found', 'project not found');
    for (const call of calls(a.owner, a.projectId, b.devBot))
      await expectAppError(call(), 'not_found', 'identity not found');
    // A machine of project 1 cannot reach project 2 of its own tenant.
    const { project: other } = await client.createProject({
      principal: a.owner,
      name: 'second',
      environment: '',
    });
    const token = await client.createIdentityToken({
      principal: a.owner,
      projectId: a.projectId,
      identityId: a.devBot,
      scopes: ['identity_tokens:read', 'api_keys:read'],
    });
    const machine = (await client.authenticate({ token: token.value })).principal as Principal;
    await expectAppError(
      client.listApiKeys({ principal: machine, projectId: other?.id ?? '' }),
      'not_found',
      'project not found',
    );
  });
});
