import { isRoleName, ROLES, type RoleName } from '@relayplane/contract/contract';
import { type Kysely, sql, type Transaction } from 'kysely';
import type { AuditStep } from '../audit/trail.ts';
import type { AdminDatabase } from '../db/schema.ts';
import type { MemberChange, MemberDecision } from '../domain/memberships.ts';
import { after, type Page, type PageRequest, positionAt, toPage } from './paging.ts';
import { isUniqueViolation, type MemberRecord, type TenantRecord, type UserRecord } from './records.ts';

/** Any constant works; it only has to be the same in every replica (and unused elsewhere). */
const BOOTSTRAP_LOCK_KEY = 7_236_801_102_113_584;

export interface NewOwner {
  tenant: TenantRecord;
  user: UserRecord;
  passwordHash: string;
}

/** What a membership change came to; `member` is the membership as it is afterwards (or was, when removed). */
export type MemberChangeResult =
  | { outcome: 'not_found' }
  | { outcome: Exclude<MemberDecision, 'ok'> }
  | { outcome: 'ok'; member: MemberRecord };

/** A tenant as the operator's list shows it. */
export interface TenantOverviewRecord {
  tenant: TenantRecord;
  memberCount: number;
}

export interface UserWithPassword extends UserRecord {
  passwordHash: string;
  /** The user's credentials epoch (migration 20261203T1000): a session made under another is refused. */
  credentialsEpoch: number;
}

/** Tenants, users and their memberships. */
export class AccountStore {
  readonly #db: Kysely<AdminDatabase>;
  constructor(db: Kysely<AdminDatabase>) {
    this.#db = db;
  }

  async anyUserExists(): Promise<boolean> {
    const row = await this.#db.selectFrom('users').select('id').limit(1).executeTakeFirst();
    return row !== undefined;
  }

  /** A new tenant and its owner, atomically. 'email_taken' when the email is registered. */
  async createTenantWithOwner(
    owner: NewOwner,
    audit: AuditStep<NewOwner>,
  ): Promise<'created' | 'email_taken'> {
    try {
      await this.#db.transaction().execute(async (trx) => {
        await insertOwner(trx, owner);
        await audit(trx, owner);
      });
      return 'created';
    } catch (err) {
      if (isUniqueViolation(err, 'users_email_key')) return 'email_taken';
      throw err;
    }
  }

  /**
   * Creates the first tenant and owner unless a user already exists. Replicas starting
   * together serialise on an advisory lock held until commit, and each re-checks under it,
   * so exactly one of them creates the owner.
   */
  async bootstrapOwner(owner: NewOwner, audit: AuditStep<NewOwner>): Promise<boolean> {
    return this.#db.transaction().execute(async (trx) => {
      await sql`select pg_advisory_xact_lock(${BOOTSTRAP_LOCK_KEY})`.execute(trx);
      const existing = await trx.selectFrom('users').select('id').limit(1).executeTakeFirst();
      if (existing) return false;
      await insertOwner(trx, owner);
      await audit(trx, owner);
      return true;
    });
  }

  async findUserByEmail(email: string): Promise<UserWithPassword | undefined> {
    const row = await this.#db
      .selectFrom('users')
      .select(['id', 'email', 'password_hash', 'platform_admin', 'created_at', 'credentials_epoch'])
      .where('email', '=', email)
      .executeTakeFirst();
    return (
      row && {
        id: row.id,
        email: row.email,
        platformAdmin: row.platform_admin,
        createdAt: row.created_at,
        passwordHash: row.password_hash,
        credentialsEpoch: row.credentials_epoch,
      }
    );
  }

  /** The membership a new session starts in: the oldest one (ties broken by tenant id). */
  async firstMembership(userId: string): Promise<{ tenant: TenantRecord; role: RoleName } | undefined> {
    const row = await this.#db
      .selectFrom('memberships as m')
      .innerJoin('tenants as t', 't.id', 'm.tenant_id')
      .select(['t.id', 't.name', 't.created_at', 'm.role'])
      .where('m.user_id', '=', userId)
      .orderBy('m.created_at')
      .orderBy('m.tenant_id')
      .limit(1)
      .executeTakeFirst();
    if (!row || !isRoleName(row.role)) return undefined;
    return { tenant: { id: row.id, name: row.name, createdAt: row.created_at }, role: row.role };
  }

  /** The user's membership of the tenant, with the user and the tenant; undefined when not a member. */
  async findMember(
    tenantId: string,
    userId: string,
  ): Promise<{ user: UserRecord; tenant: TenantRecord; role: RoleName } | undefined> {
    const row = await this.#db
      .selectFrom('memberships as m')
      .innerJoin('tenants as t', 't.id', 'm.tenant_id')
      .innerJoin('users as u', 'u.id', 'm.user_id')
      .select([
        't.id as tenant_id',
        't.name as tenant_name',
        't.created_at as tenant_created_at',
        'u.id as user_id',
        'u.email',
        'u.platform_admin',
        'u.created_at as user_created_at',
        'm.role',
      ])
      .where('m.tenant_id', '=', tenantId)
      .where('m.user_id', '=', userId)
      .executeTakeFirst();
    if (!row || !isRoleName(row.role)) return undefined;
    return {
      user: {
        id: row.user_id,
        email: row.email,
        platformAdmin: row.platform_admin,
        createdAt: row.user_created_at,
      },
      tenant: { id: row.tenant_id, name: row.tenant_name, createdAt: row.tenant_created_at },
      role: row.role,
    };
  }

  async findTenant(tenantId: string): Promise<TenantRecord | undefined> {
    const row = await this.#db
      .selectFrom('tenants')
      .select(['id', 'name', 'created_at'])
      .where('id', '=', tenantId)
      .executeTakeFirst();
    return row && { id: row.id, name: row.name, createdAt: row.created_at };
  }

  /** Every tenant the user is a member of, with the role there, by tenant name (then id). */
  async membershipsOf(userId: string): Promise<{ tenant: TenantRecord; role: RoleName }[]> {
    const rows = await this.#db
      .selectFrom('memberships as m')
      .innerJoin('tenants as t', 't.id', 'm.tenant_id')
      .select(['t.id', 't.name', 't.created_at', 'm.role'])
      .where('m.user_id', '=', userId)
      .orderBy('t.name')
      .orderBy('t.id')
      .execute();
    // The column's check constraint allows only known roles: nothing is dropped in practice.
    return rows.flatMap((r) =>
      isRoleName(r.role)
        ? [{ tenant: { id: r.id, name: r.name, createdAt: r.created_at }, role: r.role }]
        : [],
    );
  }

  /** A page of every tenant with its member count, oldest first (then by id). */
  async listTenants(page: PageRequest): Promise<Page<TenantOverviewRecord>> {
    let query = this.#db
      .selectFrom('tenants as t')
      .select(['t.id', 't.name', 't.created_at', positionAt('t.created_at').as('position_at')])
      .select((eb) =>
        eb
          .selectFrom('memberships as m')
          .select((c) => c.fn.countAll<string>().as('n'))
          .whereRef('m.tenant_id', '=', 't.id')
          .as('member_count'),
      );
    if (page.after) query = query.where(after('t.created_at', 't.id', 'asc', page.after));
    const rows = await query
      .orderBy('t.created_at')
      .orderBy('t.id')
      .limit(page.limit + 1)
      .execute();
    return toPage(
      rows,
      page,
      (r) => r.id,
      (r) => ({
        tenant: { id: r.id, name: r.name, createdAt: r.created_at },
        memberCount: Number(r.member_count ?? 0),
      }),
    );
  }

  /** A page of the tenant's members, oldest membership first (then by user id). */
  async listMembers(tenantId: string, page: PageRequest): Promise<Page<MemberRecord>> {
    let query = memberQuery(this.#db, tenantId).select(positionAt('m.created_at').as('position_at'));
    if (page.after) query = query.where(after('m.created_at', 'u.id', 'asc', page.after));
    const rows = await query
      .orderBy('m.created_at')
      .orderBy('u.id')
      .limit(page.limit + 1)
      .execute();
    const { items, next } = toPage(
      rows,
      page,
      (r) => r.id,
      (r) => memberRecord(tenantId, r),
    );
    // The column's check constraint allows only known roles: nothing is dropped in practice.
    return { items: items.flatMap((m) => m ?? []), next };
  }

  /** The role `userId` holds in `tenantId`, if a member. */
  async roleIn(tenantId: string, userId: string): Promise<RoleName | undefined> {
    const row = await this.#db
      .selectFrom('memberships')
      .select('role')
      .where('tenant_id', '=', tenantId)
      .where('user_id', '=', userId)
      .executeTakeFirst();
    return row && isRoleName(row.role) ? row.role : undefined;
  }

  /** Adds `user` to the tenant; 'exists' when already a member. `audit` records it in the same transaction. */
  async addMember(
    tenantId: string,
    user: UserRecord,
    role: RoleName,
    now: Date,
    audit: AuditStep<MemberRecord>,
  ): Promise<MemberRecord | 'exists'> {
    return this.#db.transaction().execute(async (trx) => {
      const res = await trx
        .insertInto('memberships')
        .values({ tenant_id: tenantId, user_id: user.id, role, created_at: now })
        .onConflict((oc) => oc.columns(['tenant_id', 'user_id']).doNothing())
        .returning('user_id')
        .executeTakeFirst();
      if (!res) return 'exists' as const;
      const member = { user, tenantId, role, createdAt: now };
      await audit(trx, member);
      return member;
    });
  }

  /**
   * Changes or removes a membership if `decide` allows it, given the member's current role, the
   * acting user's current role and the tenant's owner count. The tenant row is locked for the
   * whole decision, so two concurrent changes (say, removing each of the last two owners) are
   * decided one after the other and cannot leave the tenant without an owner.
   */
  async changeMember(
    tenantId: string,
    actorId: string,
    userId: string,
    change: MemberChange,
    decide: (actor: RoleName, target: RoleName, owners: number) => MemberDecision,
    audit: AuditStep<{ before: MemberRecord; after: MemberRecord }>,
  ): Promise<MemberChangeResult> {
    return this.#db.transaction().execute(async (trx): Promise<MemberChangeResult> => {
      if (!(await lockTenant(trx, tenantId))) return { outcome: 'not_found' };
      const row = await memberQuery(trx, tenantId).where('m.user_id', '=', userId).executeTakeFirst();
      const member = row && memberRecord(tenantId, row);
      if (!member) return { outcome: 'not_found' };
      const actor = await trx
        .selectFrom('memberships')
        .select('role')
        .where('tenant_id', '=', tenantId)
        .where('user_id', '=', actorId)
        .executeTakeFirst();
      if (!actor || !isRoleName(actor.role)) return { outcome: 'not_allowed' };
      const owners = await trx
        .selectFrom('memberships')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('tenant_id', '=', tenantId)
        .where('role', '=', ROLES.owner)
        .executeTakeFirstOrThrow();
      const decision = decide(actor.role, member.role, Number(owners.n));
      if (decision !== 'ok') return { outcome: decision };
      if (change.kind === 'remove') {
        await trx
          .deleteFrom('memberships')
          .where('tenant_id', '=', tenantId)
          .where('user_id', '=', userId)
          .execute();
        await audit(trx, { before: member, after: member });
        return { outcome: 'ok', member };
      }
      await trx
        .updateTable('memberships')
        .set({ role: change.role })
        .where('tenant_id', '=', tenantId)
        .where('user_id', '=', userId)
        .execute();
      const after = { ...member, role: change.role };
      await audit(trx, { before: member, after });
      return { outcome: 'ok', member: after };
    });
  }

  async addMembership(tenantId: string, userId: string, role: RoleName, now: Date): Promise<void> {
    await this.#db
      .insertInto('memberships')
      .values({ tenant_id: tenantId, user_id: userId, role, created_at: now })
      .execute();
  }
}

/** Locks the tenant's row until commit: every membership change of a tenant serialises on it. */
async function lockTenant(trx: Transaction<AdminDatabase>, tenantId: string): Promise<boolean> {
  const row = await trx
    .selectFrom('tenants')
    .select('id')
    .where('id', '=', tenantId)
    .forUpdate()
    .executeTakeFirst();
  return row !== undefined;
}

function memberQuery(db: Kysely<AdminDatabase> | Transaction<AdminDatabase>, tenantId: string) {
  return db
    .selectFrom('memberships as m')
    .innerJoin('users as u', 'u.id', 'm.user_id')
    .select([
      'u.id',
      'u.email',
      'u.platform_admin',
      'u.created_at as user_created_at',
      'm.role',
      'm.created_at',
    ])
    .where('m.tenant_id', '=', tenantId);
}

function memberRecord(
  tenantId: string,
  row: {
    id: string;
    email: string;
    platform_admin: boolean;
    user_created_at: Date;
    role: string;
    created_at: Date;
  },
): MemberRecord | undefined {
  if (!isRoleName(row.role)) return undefined;
  return {
    user: { id: row.id, email: row.email, platformAdmin: row.platform_admin, createdAt: row.user_created_at },
    tenantId,
    role: row.role,
    createdAt: row.created_at,
  };
}

async function insertOwner(trx: Transaction<AdminDatabase>, owner: NewOwner): Promise<void> {
  const { tenant, user } = owner;
  await trx
    .insertInto('tenants')
    .values({ id: tenant.id, name: tenant.name, created_at: tenant.createdAt })
    .execute();
  await trx
    .insertInto('users')
    .values({
      id: user.id,
      email: user.email,
      password_hash: owner.passwordHash,
      platform_admin: user.platformAdmin,
      created_at: user.createdAt,
    })
    .execute();
  await trx
    .insertInto('memberships')
    .values({ tenant_id: tenant.id, user_id: user.id, role: ROLES.owner, created_at: user.createdAt })
    .execute();
}
