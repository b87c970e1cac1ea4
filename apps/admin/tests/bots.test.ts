import { createHash } from 'node:crypto';
import type { RoleName } from '@relayplane/contract/contract';
import { INVALID_TOKEN_MESSAGE } from '@relayplane/contract/errors';
import { newToken } from '@relayplane/contract/tokens';
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
const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');
const seconds = (ts: { seconds: bigint } | undefined) => (ts === undefined ? undefined : Number(ts.seconds));

describe('bots and bot keys over gRPC (real PostgreSQL, real billing)', () => {
  let rig: AdminRig | undefined;
  let billingClient: ServiceClient<typeof BillingRpc>;
  let admin: AdminService;
  let client: ServiceClient<typeof AdminRpc>;
  const logs = captureLogs();
  const clock = new ManualClock(Date.parse('2026-11-25T09:00:00Z'));
  let seq = 0;

  beforeAll(async () => {
    rig = await startAdminRig('adminbots', {}, { clock, logger: logs.logger });
    ({ billingClient, admin, client } = rig);
  });

  afterAll(async () => {
    await rig?.close();
  });

  /** A fresh tenant (free plan unless told), its owner's principal and one project. */
  async function newTenant(label: string, options: { plan?: 'pro' } = {}) {
    const email = `${label}-${++seq}@example.com`;
    const signedUp = await client.signup({ email, password: PASSWORD, tenantName: `${label} inc` });
    const tenantId = signedUp.tenant?.id ?? '';
    if (options.plan) await billingClient.setPlan({ tenantId, planId: options.plan });
    const principal = await principalOf(email);
    const { project } = await client.createProject({ principal, name: 'main', environment: '' });
    if (!project) throw new Error('no project');
    return { email, tenantId, principal, projectId: project.id };
  }

  const principalOf = (email: string) => principalFor(client, email, PASSWORD);

  /** A member of `tenantId` with `role` (their new sessions act in that tenant). */
  async function member(tenantId: string, role: RoleName): Promise<Principal> {
    const other = await newTenant(`m${role}`);
    await admin.accounts.addMembership(tenantId, other.principal.userId, role, new Date(0));
    const principal = await principalOf(other.email);
    expect(principal.tenantId).toBe(tenantId);
    return principal;
  }

  async function createBot(
    principal: Principal,
    projectId: string,
    name = 'deployer',
    role = TenantRole.UNSPECIFIED,
  ) {
    const { bot } = await client.createBot({ principal, projectId, name, role });
    if (!bot) throw new Error('no bot');
    return bot;
  }

  async function createKey(principal: Principal, projectId: string, botId: string) {
    const res = await client.createBotKey({ principal, projectId, botId });
    if (!res.botKey) throw new Error('no bot key');
    return { token: res.token, botKey: res.botKey };
  }

  it('creates a developer bot by default, a viewer bot when asked, and lists them', async () => {
    const t = await newTenant('create');
    const dev = await createBot(t.principal, t.projectId, '  deployer  ');
    expect(dev).toMatchObject({
      projectId: t.projectId,
      tenantId: t.tenantId,
      name: 'deployer',
      role: TenantRole.DEVELOPER,
    });
    expect(dev.id).toMatch(/^bot_[0-9a-z]{20}$/);
    expect(seconds(dev.createdAt)).toBe(clock.now().getTime() / 1000);
    clock.advance(1_000);
    const viewer = await createBot(t.principal, t.projectId, 'reader', TenantRole.VIEWER);
    expect(viewer.role).toBe(TenantRole.VIEWER);
    const { bots } = await client.listBots({ principal: t.principal, projectId: t.projectId });
    expect(bots.map((b) => b.id)).toEqual([dev.id, viewer.id]);
  });

  it('refuses owner and admin roles for a bot, and an empty name (invalid_request)', async () => {
    const t = await newTenant('badrole');
    for (const role of [TenantRole.OWNER, TenantRole.ADMIN]) {
      await expectAppError(
        client.createBot({ principal: t.principal, projectId: t.projectId, name: 'x', role }),
        'invalid_request',
        'role must be one of developer, viewer',
      );
    }
    await expectAppError(
      client.createBot({ principal: t.principal, projectId: t.projectId, name: '  ', role: 0 }),
      'invalid_request',
      'name is required',
    );
  });

  it('answers a bot token once and stores only its SHA-256: the token appears in no column and no log', async () => {
    const t = await newTenant('storage');
    const bot = await createBot(t.principal, t.projectId);
    const { token, botKey } = await createKey(t.principal, t.projectId, bot.id);
    expect(token).toMatch(/^rpb_[0-9a-f]{72}$/);
    expect(botKey).toMatchObject({
      botId: bot.id,
      projectId: t.projectId,
      displayPrefix: token.slice(0, 8),
      lastFour: token.slice(-4),
    });
    expect(botKey.id).toMatch(/^key_[0-9a-z]{20}$/);
    expect(botKey.lastUsedAt).toBeUndefined();
    const { rows } = await sql<
      Record<string, unknown>
    >`select * from admin.bot_keys where id = ${botKey.id}`.execute(admin.database.db);
    expect(rows).toHaveLength(1);
    const row = rows[0] ?? {};
    expect(row.token_hash).toBe(sha256(token));
    expect(JSON.stringify(row)).not.toContain(token.slice(4, -4));
    const everything = await sql<{ dump: string }>`
      select string_agg(t::text, '|') as dump from admin.bot_keys t
    `.execute(admin.database.db);
    expect(everything.rows[0]?.dump).not.toContain(token);
    expect(logs.lines.join('')).not.toContain(token.slice(4, -4));

    const { botKeys } = await client.listBotKeys({
      principal: t.principal,
      projectId: t.projectId,
      botId: bot.id,
    });
    expect(botKeys.map((k) => k.id)).toEqual([botKey.id]);
    expect(JSON.stringify(botKeys, (_k, v) => (typeof v === 'bigint' ? String(v) : v))).not.toContain(
      token.slice(8, -4),
    );
  });

  it('authenticates a bot token as the bot: tenant, project, bot id and role; records last_used_at', async () => {
    const t = await newTenant('auth');
    const bot = await createBot(t.principal, t.projectId, 'reader', TenantRole.VIEWER);
    const { token, botKey } = await createKey(t.principal, t.projectId, bot.id);
    const res = await client.authenticate({ token });
    expect(res.principal).toMatchObject({
      kind: PrincipalKind.BOT,
      tenantId: t.tenantId,
      projectId: t.projectId,
      botId: bot.id,
      role: TenantRole.VIEWER,
      platformAdmin: false,
      userId: '',
      sessionId: '',
    });
    expect(res.session).toBeUndefined();
    expect(res.bot).toMatchObject({ id: bot.id, name: 'reader' });
    const { botKeys } = await client.listBotKeys({
      principal: t.principal,
      projectId: t.projectId,
      botId: bot.id,
    });
    expect(botKeys.find((k) => k.id === botKey.id)?.lastUsedAt).toBeDefined();
    expect(seconds(botKeys[0]?.lastUsedAt)).toBe(clock.now().getTime() / 1000);
  });

  it('refuses unknown, tampered and revoked bot tokens (unauthenticated); revoking is idempotent', async () => {
    const t = await newTenant('revoke');
    const bot = await createBot(t.principal, t.projectId);
    const { token, botKey } = await createKey(t.principal, t.projectId, bot.id);
    await expectAppError(
      client.authenticate({ token: newToken('bot') }),
      'unauthenticated',
      INVALID_TOKEN_MESSAGE,
    );
    const tampered = `${token.slice(0, -1)}${token.endsWith('0') ? '1' : '0'}`;
    await expectAppError(client.authenticate({ token: tampered }), 'unauthenticated', INVALID_TOKEN_MESSAGE);

    const first = await client.revokeBotKey({
      principal: t.principal,
      projectId: t.projectId,
      botId: bot.id,
      keyId: botKey.id,
    });
    expect(seconds(first.botKey?.revokedAt)).toBe(clock.now().getTime() / 1000);
    clock.advance(5_000);
    const again = await client.revokeBotKey({
      principal: t.principal,
      projectId: t.projectId,
      botId: bot.id,
      keyId: botKey.id,
    });
    expect(seconds(again.botKey?.revokedAt)).toBe(seconds(first.botKey?.revokedAt));
    await expectAppError(client.authenticate({ token }), 'unauthenticated', INVALID_TOKEN_MESSAGE);
  });

  it('a bot principal cannot manage bots: its role never grants bots:write (docs/iam.md)', async () => {
    const t = await newTenant('botmgr');
    const bot = await createBot(t.principal, t.projectId);
    const { token } = await createKey(t.principal, t.projectId, bot.id);
    const { principal } = await client.authenticate({ token });
    if (!principal) throw new Error('no principal');
    await expectAppError(
      client.createBot({ principal, projectId: t.projectId, name: 'x', role: 0 }),
      'forbidden',
      'permission bots:write is not available to bots or identity tokens; use a user session',
    );
    await expectAppError(
      client.createBotKey({ principal, projectId: t.projectId, botId: bot.id }),
      'forbidden',
      'permission bots:write is not available to bots or identity tokens; use a user session',
    );
  });

  it('lets owners and admins manage bots; developers and viewers only list', async () => {
    const t = await newTenant('roles', { plan: 'pro' });
    const adminUser = await member(t.tenantId, 'admin');
    const bot = await createBot(adminUser, t.projectId, 'by-admin');
    const { botKey } = await createKey(adminUser, t.projectId, bot.id);
    for (const role of ['developer', 'viewer'] as const) {
      const principal = await member(t.tenantId, role);
      const forbidden = `your role (${role}) does not grant permission bots:write`;
      await expectAppError(
        client.createBot({ principal, projectId: t.projectId, name: 'x', role: 0 }),
        'forbidden',
        forbidden,
      );
      await expectAppError(
        client.createBotKey({ principal, projectId: t.projectId, botId: bot.id }),
        'forbidden',
        forbidden,
      );
      await expectAppError(
        client.revokeBotKey({ principal, projectId: t.projectId, botId: bot.id, keyId: botKey.id }),
        'forbidden',
        forbidden,
      );
      const { bots } = await client.listBots({ principal, projectId: t.projectId });
      expect(bots.map((b) => b.id)).toEqual([bot.id]);
      const { botKeys } = await client.listBotKeys({ principal, projectId: t.projectId, botId: bot.id });
      expect(botKeys.map((k) => k.id)).toEqual([botKey.id]);
    }
  });

  it("answers not_found for another tenant's project, bot and key, never forbidden", async () => {
    const a = await newTenant('tenanta');
    const b = await newTenant('tenantb');
    const bot = await createBot(a.principal, a.projectId);
    const { botKey } = await createKey(a.principal, a.projectId, bot.id);
    const other = b.principal;
    await expectAppError(
      client.listBots({ principal: other, projectId: a.projectId }),
      'not_found',
      'project not found',
    );
    await expectAppError(
      client.createBot({ principal: other, projectId: a.projectId, name: 'x', role: 0 }),
      'not_found',
      'project not found',
    );
    // B's own project, A's bot and key ids.
    await expectAppError(
      client.createBotKey({ principal: other, projectId: b.projectId, botId: bot.id }),
      'not_found',
      'bot not found',
    );
    await expectAppError(
      client.listBotKeys({ principal: other, projectId: b.projectId, botId: bot.id }),
      'not_found',
      'bot not found',
    );
    const bBot = await createBot(other, b.projectId);
    await expectAppError(
      client.revokeBotKey({ principal: other, projectId: b.projectId, botId: bBot.id, keyId: botKey.id }),
      'not_found',
      'bot key not found',
    );
    const { botKeys } = await client.listBotKeys({
      principal: a.principal,
      projectId: a.projectId,
      botId: bot.id,
    });
    expect(botKeys[0]?.revokedAt).toBeUndefined();
  });

  it("refuses a bot over the free plan's limit with billing's message, counting bots tenant-wide", async () => {
    const t = await newTenant('limit');
    const { project: second } = await client.createProject({
      principal: t.principal,
      name: 'second',
      environment: '',
    });
    if (!second) throw new Error('no project');
    await createBot(t.principal, t.projectId, 'one');
    await createBot(t.principal, second.id, 'two');
    await expectAppError(
      client.createBot({ principal: t.principal, projectId: t.projectId, name: 'three', role: 0 }),
      'unprocessable',
      /free plan .*max_bots/,
    );
    const { rows } = await sql<{ count: string }>`
      select count(*) as count from admin.bots where tenant_id = ${t.tenantId}
    `.execute(admin.database.db);
    expect(Number(rows[0]?.count)).toBe(2);
    await billingClient.setPlan({ tenantId: t.tenantId, planId: 'pro' });
    await expect(createBot(t.principal, t.projectId, 'three')).resolves.toMatchObject({ name: 'three' });
  });
});
