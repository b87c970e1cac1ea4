import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import { newId } from '@relayplane/contract/ids';
import type { AdminService as AdminRpc, Principal } from '@relayplane/proto/admin';
import type { BillingService as BillingRpc } from '@relayplane/proto/billing';
import { ManualClock } from '@relayplane/shared/clock';
import type { ServiceClient } from '@relayplane/shared/rpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botKeyLimitMessage } from '../src/grpc/create-bot-key.ts';
import { identityTokenLimitMessage } from '../src/grpc/identity-tokens.ts';
import type { AdminService } from '../src/service.ts';
import { BotStore, DEFAULT_MAX_ACTIVE_KEYS_PER_BOT } from '../src/stores/bots.ts';
import {
  DEFAULT_MAX_ACTIVE_IDENTITY_TOKENS_PER_BOT,
  IdentityTokenStore,
} from '../src/stores/identity-tokens.ts';
import { type AdminRig, expectAppError, principalFor, startAdminRig } from './support/harness.ts';

const PASSWORD = 'a long enough password';

/**
 * Per-bot limits (docs/iam.md, "Limits"): active bot keys and active identity tokens per bot,
 * counted with the bot locked so concurrent creations cannot pass the limit; revoked (and, for
 * identity tokens, expired) ones free a place.
 */
describe('per-bot limits on active bot keys and identity tokens (gRPC, real PostgreSQL)', () => {
  let rig: AdminRig | undefined;
  let client: ServiceClient<typeof AdminRpc>;
  let billingClient: ServiceClient<typeof BillingRpc>;
  let admin: AdminService;
  const clock = new ManualClock(Date.parse('2026-11-26T09:00:00Z'));
  let owner: Principal;
  let projectId = '';
  let tenantId = '';

  beforeAll(async () => {
    rig = await startAdminRig('adminperbot', {}, { clock });
    ({ client, billingClient, admin } = rig);
    const signedUp = await client.signup({
      email: 'perbot@example.com',
      password: PASSWORD,
      tenantName: 'perbot',
    });
    tenantId = signedUp.tenant?.id ?? '';
    // Enough bots for every case below (the free plan allows fewer).
    await billingClient.setPlan({ tenantId, planId: 'enterprise' });
    owner = await principalFor(client, 'perbot@example.com', PASSWORD);
    const { project } = await client.createProject({ principal: owner, name: 'main', environment: '' });
    projectId = project?.id ?? '';
  });

  afterAll(async () => {
    await rig?.close();
  });

  let botSeq = 0;
  async function newBot(): Promise<string> {
    const { bot } = await client.createBot({ principal: owner, projectId, name: `bot-${++botSeq}` });
    if (!bot) throw new Error('no bot');
    return bot.id;
  }

  const createKey = (botId: string) => client.createBotKey({ principal: owner, projectId, botId });
  const createToken = (identityId: string, expiresInMs?: number) =>
    client.createIdentityToken({
      principal: owner,
      projectId,
      identityId,
      scopes: ['projects:read'],
      ...(expiresInMs === undefined
        ? {}
        : { expiresAt: timestampFromMs(clock.now().getTime() + expiresInMs) }),
    });

  it('defaults to 10 active keys and 100 active identity tokens per bot', () => {
    expect(DEFAULT_MAX_ACTIVE_KEYS_PER_BOT).toBe(10);
    expect(DEFAULT_MAX_ACTIVE_IDENTITY_TOKENS_PER_BOT).toBe(100);
  });

  it('refuses the 11th active key of a bot (unprocessable, naming the limit); a revoked key frees a place', async () => {
    const botId = await newBot();
    const keys: string[] = [];
    for (let i = 0; i < 10; i++) keys.push((await createKey(botId)).botKey?.id ?? '');
    await expectAppError(createKey(botId), 'unprocessable', botKeyLimitMessage(10));
    expect(botKeyLimitMessage(10)).toContain('ADMIN_MAX_ACTIVE_KEYS_PER_BOT');

    // Another bot of the same project counts its own keys.
    const other = await newBot();
    expect((await createKey(other)).botKey?.botId).toBe(other);

    await client.revokeBotKey({ principal: owner, projectId, botId, keyId: keys[3] ?? '' });
    const replacement = await createKey(botId);
    expect(replacement.botKey?.revokedAt).toBeUndefined();
    await expectAppError(createKey(botId), 'unprocessable', botKeyLimitMessage(10));
    const listed = await client.listBotKeys({ principal: owner, projectId, botId, limit: 200 });
    expect(listed.botKeys).toHaveLength(11);
    expect(listed.botKeys.filter((k) => k.revokedAt === undefined)).toHaveLength(10);
  });

  it('lets exactly 10 of 25 concurrent key creations for one bot through', async () => {
    const botId = await newBot();
    const results = await Promise.allSettled(Array.from({ length: 25 }, () => createKey(botId)));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(10);
    const refused = results.filter((r) => r.status === 'rejected');
    expect(refused).toHaveLength(15);
    for (const r of refused) expect((r.reason as { code?: string }).code).toBe('unprocessable');
    const active = await admin.database.db
      .selectFrom('bot_keys')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('bot_id', '=', botId)
      .where('revoked_at', 'is', null)
      .executeTakeFirstOrThrow();
    expect(Number(active.n)).toBe(10);
  });

  it('refuses the 101st active identity token of an identity; a revoked or an expired token frees a place', async () => {
    const botId = await newBot();
    // The first expires after 2 minutes, the others after the default hour.
    const first = await createToken(botId, 120_000);
    const ids = [first.identityToken?.id ?? ''];
    for (let i = 1; i < 100; i++) ids.push((await createToken(botId)).identityToken?.id ?? '');
    await expectAppError(createToken(botId), 'unprocessable', identityTokenLimitMessage(100));
    expect(identityTokenLimitMessage(100)).toContain('ADMIN_MAX_ACTIVE_IDENTITY_TOKENS_PER_BOT');

    await client.revokeIdentityToken({
      principal: owner,
      projectId,
      identityId: botId,
      tokenId: ids[50] ?? '',
    });
    await createToken(botId);
    await expectAppError(createToken(botId), 'unprocessable', identityTokenLimitMessage(100));

    clock.advance(121_000);
    // The owner's session outlives the 2 minutes; the first token has expired: one place.
    await createToken(botId);
    await expectAppError(createToken(botId), 'unprocessable', identityTokenLimitMessage(100));
  });

  it('counts under a lock per bot: concurrent creations never pass a store’s limit', async () => {
    const botId = await newBot();
    const now = clock.now();
    const keys = new BotStore(admin.database.db, 3);
    const keyOutcomes = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        keys.createKey(
          {
            id: newId('apiKey'),
            tenantId,
            projectId,
            botId,
            tokenHash: i.toString(16).padStart(64, '0'),
            displayPrefix: 'rpb_0000',
            lastFour: '0000',
            createdAt: now,
            lastUsedAt: null,
            revokedAt: null,
          },
          async () => {},
        ),
      ),
    );
    expect(keyOutcomes.filter((o) => o === 'created')).toHaveLength(3);
    expect(keyOutcomes.filter((o) => o === 'limit_reached')).toHaveLength(9);

    const tokens = new IdentityTokenStore(admin.database.db, 4);
    const tokenOutcomes = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        tokens.create(
          {
            id: newId('identityToken'),
            tenantId,
            projectId,
            botId,
            tokenHash: (1000 + i).toString(16).padStart(64, '0'),
            scopes: ['projects:read'],
            displayPrefix: 'rpi_0000',
            lastFour: '0000',
            createdByUserId: owner.userId,
            createdByTokenId: null,
            rootUserId: owner.userId,
            rootSessionId: null,
            createdAt: now,
            expiresAt: new Date(now.getTime() + 3_600_000),
            lastUsedAt: null,
            revokedAt: null,
          },
          async () => {},
        ),
      ),
    );
    expect(tokenOutcomes.filter((o) => o === 'created')).toHaveLength(4);
    expect(tokenOutcomes.filter((o) => o === 'limit_reached')).toHaveLength(8);
  });
});
