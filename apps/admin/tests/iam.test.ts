import { AppError } from '@relayplane/contract/errors';
import {
  type AdminService as AdminRpc,
  type Principal,
  PrincipalKind,
  TenantRole,
} from '@relayplane/proto/admin';
import type { BillingService as BillingRpc } from '@relayplane/proto/billing';
import { can, deniedMessage, PERMISSIONS, type Permission, type Subject } from '@relayplane/shared/iam';
import type { ServiceClient } from '@relayplane/shared/rpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AdminService } from '../src/service.ts';
import { type AdminRig, principalFor, startAdminRig } from './support/harness.ts';

const PASSWORD = 'a long enough password';
const NOWHERE = '_00000000000000000000';

/**
 * Admin decides on its own, with the role it re-reads: every permission-checked RPC, called
 * directly (no gateway in front), refuses a principal without the permission. A handler that
 * lost its check fails here even though the gateway would have refused first.
 */
describe('admin IAM: every permission-checked RPC refuses a principal without the permission', () => {
  let rig: AdminRig | undefined;
  let billingClient: ServiceClient<typeof BillingRpc>;
  let admin: AdminService;
  let client: ServiceClient<typeof AdminRpc>;
  let seq = 0;
  let ids: { projectId: string; botId: string; userId: string };
  const principals: Record<string, { principal: Principal; subject: Subject }> = {};

  const principalOf = (email: string) => principalFor(client, email, PASSWORD);

  async function signup(label: string) {
    const email = `${label}-${++seq}@example.com`;
    const res = await client.signup({ email, password: PASSWORD, tenantName: label });
    return { email, tenantId: res.tenant?.id ?? '', userId: res.user?.id ?? '' };
  }

  beforeAll(async () => {
    rig = await startAdminRig('adminiam');
    ({ billingClient, admin, client } = rig);

    const owner = await signup('owner');
    await billingClient.setPlan({ tenantId: owner.tenantId, planId: 'pro' });
    const asOwner = await principalOf(owner.email);
    const { project } = await client.createProject({ principal: asOwner, name: 'main', environment: '' });
    const { bot } = await client.createBot({
      principal: asOwner,
      projectId: project?.id ?? '',
      name: 'ro',
      role: TenantRole.VIEWER,
    });
    ids = { projectId: project?.id ?? '', botId: bot?.id ?? '', userId: owner.userId };

    const viewer = await signup('viewer');
    await admin.accounts.addMembership(owner.tenantId, viewer.userId, 'viewer', new Date(0));
    principals.viewer = {
      principal: await principalOf(viewer.email),
      subject: { kind: PrincipalKind.USER_SESSION, role: 'viewer' },
    };
    const { token } = await client.createBotKey({
      principal: asOwner,
      projectId: ids.projectId,
      botId: ids.botId,
    });
    const asBot = (await client.authenticate({ token })).principal;
    if (!asBot) throw new Error('no bot principal');
    principals.bot = { principal: asBot, subject: { kind: PrincipalKind.BOT, role: 'viewer' } };
    const identity = await client.createIdentityToken({
      principal: asOwner,
      projectId: ids.projectId,
      identityId: ids.botId,
      scopes: ['projects:read'],
    });
    const asIdentity = (await client.authenticate({ token: identity.value })).principal;
    if (!asIdentity) throw new Error('no identity principal');
    principals.identity = {
      principal: asIdentity,
      subject: { kind: PrincipalKind.IDENTITY, role: 'viewer', scopes: ['projects:read'] },
    };
  });

  afterAll(async () => {
    await rig?.close();
  });

  const P = () => ids.projectId;
  /** Every RPC that checks a permission, with a request that would otherwise be valid. */
  const rpcs: [string, Permission, (principal: Principal) => Promise<unknown>][] = [
    [
      'CreateProject',
      'projects:write',
      (principal) => client.createProject({ principal, name: 'x', environment: '' }),
    ],
    ['ListProjects', 'projects:read', (principal) => client.listProjects({ principal })],
    ['GetProject', 'projects:read', (principal) => client.getProject({ principal, projectId: P() })],
    [
      'CreateApiKey',
      'api_keys:write',
      (principal) => client.createApiKey({ principal, projectId: P(), name: '', mode: '', scopes: [] }),
    ],
    ['ListApiKeys', 'api_keys:read', (principal) => client.listApiKeys({ principal, projectId: P() })],
    [
      'RevokeApiKey',
      'api_keys:write',
      (principal) => client.revokeApiKey({ principal, projectId: P(), keyId: `key${NOWHERE}` }),
    ],
    [
      'CreateAllowlistEntry',
      'allowlist:write',
      (principal) => client.createAllowlistEntry({ principal, projectId: P(), cidr: '10.0.0.0/8' }),
    ],
    [
      'ListAllowlistEntries',
      'allowlist:read',
      (principal) => client.listAllowlistEntries({ principal, projectId: P() }),
    ],
    [
      'DeleteAllowlistEntry',
      'allowlist:write',
      (principal) => client.deleteAllowlistEntry({ principal, projectId: P(), entryId: `alw${NOWHERE}` }),
    ],
    [
      'CreateBot',
      'bots:write',
      (principal) => client.createBot({ principal, projectId: P(), name: 'x', role: 0 }),
    ],
    ['ListBots', 'bots:read', (principal) => client.listBots({ principal, projectId: P() })],
    [
      'CreateBotKey',
      'bots:write',
      (principal) => client.createBotKey({ principal, projectId: P(), botId: ids.botId }),
    ],
    [
      'ListBotKeys',
      'bots:read',
      (principal) => client.listBotKeys({ principal, projectId: P(), botId: ids.botId }),
    ],
    [
      'RevokeBotKey',
      'bots:write',
      (principal) =>
        client.revokeBotKey({ principal, projectId: P(), botId: ids.botId, keyId: `key${NOWHERE}` }),
    ],
    [
      'CreateIdentityToken',
      'identity_tokens:write',
      (principal) =>
        client.createIdentityToken({
          principal,
          projectId: P(),
          identityId: ids.botId,
          scopes: ['projects:read'],
        }),
    ],
    [
      'ListIdentityTokens',
      'identity_tokens:read',
      (principal) => client.listIdentityTokens({ principal, projectId: P(), identityId: ids.botId }),
    ],
    [
      'RevokeIdentityToken',
      'identity_tokens:write',
      (principal) =>
        client.revokeIdentityToken({
          principal,
          projectId: P(),
          identityId: ids.botId,
          tokenId: `idt${NOWHERE}`,
        }),
    ],
    ['ListMembers', 'members:read', (principal) => client.listMembers({ principal })],
    [
      'AddMember',
      'members:write',
      (principal) => client.addMember({ principal, email: 'x@example.com', role: TenantRole.VIEWER }),
    ],
    [
      'ChangeMemberRole',
      'members:write',
      (principal) => client.changeMemberRole({ principal, userId: ids.userId, role: TenantRole.ADMIN }),
    ],
    ['RemoveMember', 'members:write', (principal) => client.removeMember({ principal, userId: ids.userId })],
    ['ListAuditEvents', 'audit:read', (principal) => client.listAuditEvents({ principal })],
    ['VerifyAuditEvents', 'audit:read', (principal) => client.verifyAuditEvents({ principal })],
    [
      'CreateWebhookEndpoint',
      'webhooks:manage',
      (principal) =>
        client.createWebhookEndpoint({
          principal,
          projectId: P(),
          url: 'https://hooks.example.com/relayplane',
          events: ['api_key.created'],
        }),
    ],
    [
      'ListWebhookEndpoints',
      'webhooks:manage',
      (principal) => client.listWebhookEndpoints({ principal, projectId: P() }),
    ],
    [
      'GetWebhookEndpoint',
      'webhooks:manage',
      (principal) => client.getWebhookEndpoint({ principal, projectId: P(), endpointId: `whk${NOWHERE}` }),
    ],
    [
      'UpdateWebhookEndpoint',
      'webhooks:manage',
      (principal) =>
        client.updateWebhookEndpoint({
          principal,
          projectId: P(),
          endpointId: `whk${NOWHERE}`,
          enabled: true,
        }),
    ],
    [
      'DeleteWebhookEndpoint',
      'webhooks:manage',
      (principal) => client.deleteWebhookEndpoint({ principal, projectId: P(), endpointId: `whk${NOWHERE}` }),
    ],
    [
      'RotateWebhookSecret',
      'webhooks:manage',
      (principal) => client.rotateWebhookSecret({ principal, projectId: P(), endpointId: `whk${NOWHERE}` }),
    ],
    [
      'ListWebhookDeliveries',
      'webhooks:manage',
      (principal) => client.listWebhookDeliveries({ principal, projectId: P(), endpointId: `whk${NOWHERE}` }),
    ],
    [
      'RedeliverWebhook',
      'webhooks:manage',
      (principal) =>
        client.redeliverWebhook({
          principal,
          projectId: P(),
          endpointId: `whk${NOWHERE}`,
          deliveryId: `dlv${NOWHERE}`,
        }),
    ],
  ];

  it('covers every permission of the matrix but credentials:revoke and billing (issuer and billing calls)', () => {
    const covered = new Set(rpcs.map(([, p]) => p));
    const elsewhere = ['credentials:revoke', 'billing:read', 'billing:write'];
    expect(covered).toEqual(new Set(PERMISSIONS.filter((p) => !elsewhere.includes(p))));
  });

  for (const who of ['viewer', 'bot', 'identity']) {
    it(`answers forbidden, naming the permission, to ${who === 'identity' ? 'an identity token' : `a ${who}`} that lacks it — and lets it through otherwise`, async () => {
      const { principal, subject } = principals[who] ?? { principal: undefined, subject: undefined };
      if (!principal || !subject) throw new Error('no principal');
      const answers: Record<string, string> = {};
      const expected: Record<string, string> = {};
      for (const [rpc, permission, call] of rpcs) {
        const err = await call(principal).then(
          () => undefined,
          (e: unknown) => e,
        );
        answers[rpc] = err instanceof AppError && err.code === 'forbidden' ? err.message : 'not refused';
        const lacks = deniedMessage(subject, permission);
        expected[rpc] = can(subject, permission) ? 'not refused' : lacks;
      }
      expect(answers).toEqual(expected);
      // The table is not vacuous for this principal.
      expect(Object.values(expected).filter((v) => v !== 'not refused').length).toBeGreaterThan(5);
    });
  }
});
