import { createHash } from 'node:crypto';
import type { AppError } from '@relayplane/contract/errors';
import { newId } from '@relayplane/contract/ids';
import type { AdminService as AdminRpc, Principal } from '@relayplane/proto/admin';
import type { BillingService as BillingRpc } from '@relayplane/proto/billing';
import { ManualClock } from '@relayplane/shared/clock';
import type { ServiceClient } from '@relayplane/shared/rpc';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AdminService } from '../src/service.ts';
import { type AdminRig, expectAppError, startAdminRig } from './support/harness.ts';

const PASSWORD = 'a long enough password';
const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');
const seconds = (ts: { seconds: bigint } | undefined) => (ts === undefined ? undefined : Number(ts.seconds));
const FREE_LIMIT_MESSAGE =
  'the free plan allows at most 3 allowlist entries per project (max_allowlist_entries); upgrade the plan to add more';
const ROLE_MESSAGE = 'your role (viewer) does not grant permission allowlist:write';

describe('IP allowlists over gRPC (real PostgreSQL, real billing)', () => {
  let rig: AdminRig | undefined;
  let billingClient: ServiceClient<typeof BillingRpc>;
  let admin: AdminService;
  let client: ServiceClient<typeof AdminRpc>;
  const clock = new ManualClock(Date.parse('2026-11-24T09:00:00Z'));
  let seq = 0;

  beforeAll(async () => {
    rig = await startAdminRig('adminallow', {}, { clock });
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
    const session = await client.login({ email, password: PASSWORD, clientIp: '' });
    const { principal } = await client.authenticate({ token: session.token });
    if (!principal) throw new Error('no principal');
    const projectId = await newProject(principal, 'main');
    return { email, tenantId, principal, projectId };
  }

  async function newProject(principal: Principal, name: string): Promise<string> {
    const { project } = await client.createProject({ principal, name, environment: '' });
    if (!project) throw new Error('no project');
    return project.id;
  }

  async function add(principal: Principal, projectId: string, cidr: string) {
    const { entry } = await client.createAllowlistEntry({ principal, projectId, cidr });
    if (!entry) throw new Error('no entry');
    return entry;
  }

  async function cidrs(principal: Principal, projectId: string): Promise<string[]> {
    const { entries } = await client.listAllowlistEntries({ principal, projectId });
    return entries.map((e) => e.cidr);
  }

  async function apiKey(principal: Principal, projectId: string): Promise<string> {
    const { key } = await client.createApiKey({ principal, projectId, name: '', mode: '', scopes: [] });
    return key;
  }

  describe('creation', () => {
    it('stores IPv4 and IPv6 blocks as their normalised network, with id and creation time', async () => {
      const { principal, projectId } = await newTenant('norm', { plan: 'pro' });
      const cases: [string, string][] = [
        ['10.1.2.3/16', '10.1.0.0/16'],
        ['192.0.2.7', '192.0.2.7/32'],
        ['2001:DB8:0:0::1/32', '2001:db8::/32'],
        ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1/128'],
        ['::ffff:198.51.100.9/120', '198.51.100.0/24'],
      ];
      for (const [input, expected] of cases) {
        const entry = await add(principal, projectId, input);
        expect(entry.id).toMatch(/^alw_[0-9a-z]{20}$/);
        expect(entry).toMatchObject({ projectId, cidr: expected });
        expect(seconds(entry.createdAt)).toBe(clock.now().getTime() / 1000);
      }
      const { rows } = await sql<{ cidr: string }>`
        select cidr from admin.allowlist_entries where project_id = ${projectId} order by cidr
      `.execute(admin.database.db);
      expect(rows.map((r) => r.cidr)).toEqual(cases.map(([, normalised]) => normalised).sort());
    });

    it('answers conflict for a network already listed, however it is written', async () => {
      const { principal, projectId } = await newTenant('dup');
      await add(principal, projectId, '10.1.0.0/16');
      await expectAppError(
        client.createAllowlistEntry({ principal, projectId, cidr: '10.1.255.254/16' }),
        'conflict',
        '10.1.0.0/16 is already in the allowlist',
      );
      await add(principal, projectId, '2001:db8::/48');
      await expectAppError(
        client.createAllowlistEntry({ principal, projectId, cidr: '2001:0DB8:0000:0000::1/48' }),
        'conflict',
        '2001:db8::/48 is already in the allowlist',
      );
      expect(await cidrs(principal, projectId)).toEqual(['10.1.0.0/16', '2001:db8::/48']);
    });

    it('allows the same network in two projects', async () => {
      const { principal, projectId } = await newTenant('twoproj');
      const other = await newProject(principal, 'other');
      await add(principal, projectId, '10.0.0.0/8');
      await add(principal, other, '10.0.0.0/8');
      expect(await cidrs(principal, other)).toEqual(['10.0.0.0/8']);
    });

    it.each([
      ['10.0.0.0/33', 'the prefix length must be 0 to 32 for IPv4'],
      ['010.0.0.0/8', 'IPv4 octet "010" has a leading zero'],
      ['fe80::1%eth0/64', 'zone ids are not allowed'],
      ['10.0.0.0 /8', 'contains whitespace'],
      ['not-an-ip', 'not an IPv4 or IPv6 address'],
      ['', 'empty'],
    ])('answers unprocessable for %j, quoting it', async (input, reason) => {
      const { principal, projectId } = await newTenant('invalid');
      await expectAppError(
        client.createAllowlistEntry({ principal, projectId, cidr: input }),
        'unprocessable',
        `invalid CIDR ${JSON.stringify(input)}: ${reason}`,
      );
      expect(await cidrs(principal, projectId)).toEqual([]);
    });
  });

  describe('plan limit', () => {
    it('allows the free plan 3 entries per project, then unprocessable with the limit message', async () => {
      const { principal, projectId } = await newTenant('limit');
      for (const cidr of ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'])
        await add(principal, projectId, cidr);
      await expectAppError(
        client.createAllowlistEntry({ principal, projectId, cidr: '203.0.113.0/24' }),
        'unprocessable',
        FREE_LIMIT_MESSAGE,
      );
      // A duplicate at the limit is still reported as a duplicate.
      await expectAppError(
        client.createAllowlistEntry({ principal, projectId, cidr: '10.0.0.0/8' }),
        'conflict',
        '10.0.0.0/8 is already in the allowlist',
      );
      expect(await cidrs(principal, projectId)).toHaveLength(3);

      // Per project: another project of the tenant has its own 3.
      const other = await newProject(principal, 'other');
      await add(principal, other, '203.0.113.0/24');

      // Deleting frees a place.
      const { entries } = await client.listAllowlistEntries({ principal, projectId });
      await client.deleteAllowlistEntry({ principal, projectId, entryId: entries[0]?.id ?? '' });
      await add(principal, projectId, '203.0.113.0/24');
    });

    it('holds under concurrent creations: exactly the limit is stored', async () => {
      const { principal, projectId } = await newTenant('race');
      const outcomes = await Promise.allSettled(
        Array.from({ length: 8 }, (_, i) =>
          client.createAllowlistEntry({ principal, projectId, cidr: `10.${i}.0.0/16` }),
        ),
      );
      const fulfilled = outcomes.filter((o) => o.status === 'fulfilled');
      const rejected = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
      expect(fulfilled).toHaveLength(3);
      expect(rejected).toHaveLength(5);
      for (const r of rejected) expect((r.reason as AppError).message).toBe(FREE_LIMIT_MESSAGE);
      expect(await cidrs(principal, projectId)).toHaveLength(3);
    });

    it('follows the plan: pro allows more', async () => {
      const { principal, projectId } = await newTenant('pro', { plan: 'pro' });
      for (let i = 0; i < 5; i++) await add(principal, projectId, `10.${i}.0.0/16`);
      expect(await cidrs(principal, projectId)).toHaveLength(5);
    });
  });

  describe('listing and deletion', () => {
    it('lists oldest first, deletes, and answers not_found for a second delete', async () => {
      const { principal, projectId } = await newTenant('list');
      const first = await add(principal, projectId, '192.168.0.0/16');
      clock.advance(1_000);
      const second = await add(principal, projectId, '10.0.0.0/8');
      clock.advance(1_000);
      const third = await add(principal, projectId, '::1');
      const { entries } = await client.listAllowlistEntries({ principal, projectId });
      expect(entries.map((e) => e.id)).toEqual([first.id, second.id, third.id]);
      expect(entries[0]).toEqual(first);

      await expect(
        client.deleteAllowlistEntry({ principal, projectId, entryId: second.id }),
      ).resolves.toBeDefined();
      expect(await cidrs(principal, projectId)).toEqual(['192.168.0.0/16', '::1/128']);
      await expectAppError(
        client.deleteAllowlistEntry({ principal, projectId, entryId: second.id }),
        'not_found',
        'allowlist entry not found',
      );
      await expectAppError(
        client.deleteAllowlistEntry({ principal, projectId, entryId: 'not-an-id' }),
        'not_found',
        'allowlist entry not found',
      );
    });

    it('does not delete an entry through another project of the same tenant', async () => {
      const { principal, projectId } = await newTenant('crossproj');
      const other = await newProject(principal, 'other');
      const entry = await add(principal, projectId, '10.0.0.0/8');
      await expectAppError(
        client.deleteAllowlistEntry({ principal, projectId: other, entryId: entry.id }),
        'not_found',
        'allowlist entry not found',
      );
      expect(await cidrs(principal, projectId)).toEqual(['10.0.0.0/8']);
    });
  });

  describe('access', () => {
    it('lets a viewer list the allowlist but not create or delete entries', async () => {
      const owner = await newTenant('vowner');
      const entry = await add(owner.principal, owner.projectId, '10.0.0.0/8');
      const viewer = await newTenant('viewer');
      await admin.accounts.addMembership(owner.tenantId, viewer.principal.userId, 'viewer', new Date(0));
      const login = await client.login({ email: viewer.email, password: PASSWORD, clientIp: '' });
      const { principal } = await client.authenticate({ token: login.token });
      if (!principal) throw new Error('no principal');
      expect(principal.tenantId).toBe(owner.tenantId);

      await expectAppError(
        client.createAllowlistEntry({ principal, projectId: owner.projectId, cidr: '192.168.0.0/16' }),
        'forbidden',
        ROLE_MESSAGE,
      );
      await expectAppError(
        client.deleteAllowlistEntry({ principal, projectId: owner.projectId, entryId: entry.id }),
        'forbidden',
        ROLE_MESSAGE,
      );
      expect(await cidrs(principal, owner.projectId)).toEqual(['10.0.0.0/8']);
    });

    it("answers not_found for another tenant's project on create, list and delete", async () => {
      const a = await newTenant('tenanta');
      const b = await newTenant('tenantb');
      const entry = await add(a.principal, a.projectId, '10.0.0.0/8');

      await expectAppError(
        client.createAllowlistEntry({
          principal: b.principal,
          projectId: a.projectId,
          cidr: '192.168.0.0/16',
        }),
        'not_found',
        'project not found',
      );
      await expectAppError(
        client.listAllowlistEntries({ principal: b.principal, projectId: a.projectId }),
        'not_found',
        'project not found',
      );
      await expectAppError(
        client.deleteAllowlistEntry({ principal: b.principal, projectId: a.projectId, entryId: entry.id }),
        'not_found',
        'project not found',
      );
      // Through b's own project, a's entry id is simply unknown.
      await expectAppError(
        client.deleteAllowlistEntry({ principal: b.principal, projectId: b.projectId, entryId: entry.id }),
        'not_found',
        'allowlist entry not found',
      );
      await expectAppError(
        client.listAllowlistEntries({ principal: b.principal, projectId: newId('project') }),
        'not_found',
        'project not found',
      );
      expect(await cidrs(a.principal, a.projectId)).toEqual(['10.0.0.0/8']);
    });

    it('checks the project before the CIDR: an invalid CIDR for a foreign project is not_found', async () => {
      const a = await newTenant('ordera');
      const b = await newTenant('orderb');
      await expectAppError(
        client.createAllowlistEntry({ principal: b.principal, projectId: a.projectId, cidr: 'nonsense' }),
        'not_found',
        'project not found',
      );
    });
  });

  describe('VerifyApiKey', () => {
    it("answers the key's project allowlist, normalised, and follows creations and deletions", async () => {
      const { principal, projectId } = await newTenant('verify');
      const other = await newProject(principal, 'other');
      const key = await apiKey(principal, projectId);
      const keyHash = sha256(key);
      expect((await client.verifyApiKey({ keyHash })).allowlist).toEqual([]);

      const v4 = await add(principal, projectId, '10.1.2.3/16');
      clock.advance(1_000);
      const v6 = await add(principal, projectId, '2001:DB8::1/32');
      await add(principal, other, '192.168.0.0/16');
      const verified = await client.verifyApiKey({ keyHash });
      expect(verified.allowlist).toEqual(['10.1.0.0/16', '2001:db8::/32']);
      expect(verified.apiKey?.projectId).toBe(projectId);

      await client.deleteAllowlistEntry({ principal, projectId, entryId: v4.id });
      expect((await client.verifyApiKey({ keyHash })).allowlist).toEqual(['2001:db8::/32']);
      await client.deleteAllowlistEntry({ principal, projectId, entryId: v6.id });
      expect((await client.verifyApiKey({ keyHash })).allowlist).toEqual([]);
    });
  });
});
