import { type Kysely, sql, type Transaction } from 'kysely';
import type { AdminDatabase } from '../db/schema.ts';
import { isRole, type Role } from '../domain/roles.ts';
import { isUniqueViolation, type TenantRecord, type UserRecord } from './records.ts';

/** Any constant works; it only has to be the same in every replica (and unused elsewhere). */
const BOOTSTRAP_LOCK_KEY = 7_236_801_102_113_584;

export interface NewOwner {
  tenant: TenantRecord;
  user: UserRecord;
  passwordHash: string;
}

export interface UserWithPassword extends UserRecord {
  passwordHash: string;
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
  async createTenantWithOwner(owner: NewOwner): Promise<'created' | 'email_taken'> {
    try {
      await this.#db.transaction().execute((trx) => insertOwner(trx, owner));
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
  async bootstrapOwner(owner: NewOwner): Promise<boolean> {
    return this.#db.transaction().execute(async (trx) => {
      await sql`select pg_advisory_xact_lock(${BOOTSTRAP_LOCK_KEY})`.execute(trx);
      const existing = await trx.selectFrom('users').select('id').limit(1).executeTakeFirst();
      if (existing) return false;
      await insertOwner(trx, owner);
      return true;
    });
  }

  async findUserByEmail(email: string): Promise<UserWithPassword | undefined> {
    const row = await this.#db
      .selectFrom('users')
      .select(['id', 'email', 'password_hash', 'platform_admin', 'created_at'])
      .where('email', '=', email)
      .executeTakeFirst();
    return (
      row && {
        id: row.id,
        email: row.email,
        platformAdmin: row.platform_admin,
        createdAt: row.created_at,
        passwordHash: row.password_hash,
      }
    );
  }

  /** The membership a new session starts in: the oldest one (ties broken by tenant id). */
  async firstMembership(userId: string): Promise<{ tenant: TenantRecord; role: Role } | undefined> {
    const row = await this.#db
      .selectFrom('memberships as m')
      .innerJoin('tenants as t', 't.id', 'm.tenant_id')
      .select(['t.id', 't.name', 't.created_at', 'm.role'])
      .where('m.user_id', '=', userId)
      .orderBy('m.created_at')
      .orderBy('m.tenant_id')
      .limit(1)
      .executeTakeFirst();
    if (!row || !isRole(row.role)) return undefined;
    return { tenant: { id: row.id, name: row.name, createdAt: row.created_at }, role: row.role };
  }

  async findTenant(tenantId: string): Promise<TenantRecord | undefined> {
    const row = await this.#db
      .selectFrom('tenants')
      .select(['id', 'name', 'created_at'])
      .where('id', '=', tenantId)
      .executeTakeFirst();
    return row && { id: row.id, name: row.name, createdAt: row.created_at };
  }

  async addMembership(tenantId: string, userId: string, role: Role, now: Date): Promise<void> {
    await this.#db
      .insertInto('memberships')
      .values({ tenant_id: tenantId, user_id: userId, role, created_at: now })
      .execute();
  }
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
    .values({ tenant_id: tenant.id, user_id: user.id, role: 'owner', created_at: user.createdAt })
    .execute();
}
