/**
 * Every app through PgBouncer in transaction pooling mode (issue 22, item 2): Debian's
 * `pgbouncer` in front of the machine's PostgreSQL (tests/support/pgbouncer.ts), the apps'
 * URLs pointing at it with `pgbouncer=true`, and fewer server connections than the apps hold
 * client connections, so consecutive transactions of one client do run on different sessions.
 *
 * - The database layer: what PgBouncer refuses (the statement_timeout startup parameter the
 *   apps send without the flag); the start-up check of the role's statement timeout (none, or
 *   one longer than the request bound, is a configuration error: exit 78); that timeout
 *   cancelling a long statement; prepared statements over many server connections; replicas
 *   migrating at once, and no advisory lock left on a pooled connection after a migration.
 * - The distributed topology (2 gateways, 3 issuers, admin, billing), migrated and running
 *   through PgBouncer: every flow, and a statement blocked past the timeout answered 503 +
 *   Retry-After within the gateway's deadline.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@relayplane/shared/config';
import { createDatabase, type Database } from '@relayplane/shared/db';
import { testLogger } from '@relayplane/testing/logger';
import {
  createTestDatabase,
  createTestRedis,
  type TestDatabase,
  type TestRedis,
} from '@relayplane/testing/storage';
import { createVerifier } from '@relayplane/verifier';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../support/api.ts';
import { type Distributed, startDistributed } from '../support/distributed.ts';
import { PgBouncer } from '../support/pgbouncer.ts';
import { freePort, waitFor } from '../support/ports.ts';
import { startProcess } from '../support/processes.ts';

const OWNER = { email: 'pgbouncer@example.test', password: 'pgbouncer owner password' };
/** Server connections PgBouncer keeps per database and user: fewer than the apps' clients. */
const SERVER_CONNECTIONS = 8;
/** The apps' request bound (STATEMENT_TIMEOUT_MS in packages/shared/src/db.ts). */
const STATEMENT_TIMEOUT_MS = 4_000;
const logger = testLogger('pgbouncer');

/** `url` with `pgbouncer=true`: the app's way of being told it goes through a transaction pooler. */
function pooled(url: string): string {
  const u = new URL(url);
  u.searchParams.set('pgbouncer', 'true');
  return u.toString();
}

/** Runs `statements` on a direct connection to `url` (past PgBouncer). */
async function direct<T extends pg.QueryResultRow>(url: string, ...statements: string[]): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    let rows: T[] = [];
    for (const s of statements) rows = (await client.query<T>(s)).rows;
    return rows;
  } finally {
    await client.end();
  }
}

/** The statement timeout PostgreSQL applies to the role's sessions in the database of `url`. */
function roleTimeout(url: string, value: string): Promise<unknown[]> {
  const name = new URL(url).pathname.slice(1);
  return direct(url, `alter role current_user in database "${name}" set statement_timeout = '${value}'`);
}

interface Tables {
  widgets: { id: number };
}
type Migrations = Parameters<Database<Tables>['migrate']>[0];

describe('PgBouncer in transaction pooling mode', () => {
  let bouncer: PgBouncer;
  const databases: TestDatabase[] = [];
  const fresh = async (label: string) => {
    const db = await createTestDatabase(label);
    databases.push(db);
    return db;
  };

  beforeAll(async () => {
    const first = await fresh('e2e_pgbouncer');
    bouncer = await PgBouncer.start(first.url, { poolSize: SERVER_CONNECTIONS });
  });

  afterAll(async () => {
    await bouncer?.stop();
    for (const db of databases) await db.drop();
  });

  describe('the database layer through PgBouncer', () => {
    const MIGRATIONS: Migrations = {
      '20260101T000000-widgets': {
        async up(db) {
          await db.schema
            .createTable('widgets')
            .addColumn('id', 'integer', (c) => c.primaryKey())
            .execute();
        },
      },
      '20260102T000000-gadgets': {
        async up(db) {
          await db.schema
            .createTable('gadgets')
            .addColumn('id', 'integer', (c) => c.primaryKey())
            .execute();
        },
      },
    };
    const open: Database<Tables>[] = [];
    const connect = async (url: string, statementTimeoutMs?: number, schema = 'svc') => {
      const database = await createDatabase<Tables>(
        { kind: 'postgres', url, poolMax: 10, ...(statementTimeoutMs ? { statementTimeoutMs } : {}) },
        schema,
        logger,
      );
      open.push(database);
      return database;
    };
    afterAll(async () => {
      for (const database of open) await database.destroy();
    });

    it('PgBouncer refuses the statement_timeout startup parameter, which the default (direct) mode sends', async () => {
      const db = await fresh('pgb_refused');
      const database = await connect(bouncer.url(db.url));
      await expect(database.db.selectNoFrom((eb) => eb.lit(1).as('one')).execute()).rejects.toThrow(
        /unsupported startup parameter: statement_timeout/,
      );
    });

    it('refuses to migrate through the pooler when the role has no statement timeout, or one above the request bound, naming the fix', async () => {
      const db = await fresh('pgb_no_timeout');
      const database = await connect(pooled(bouncer.url(db.url)));
      const refusal = await database.migrate(MIGRATIONS).catch((e: unknown) => e);
      expect(refusal).toBeInstanceOf(ConfigError);
      expect((refusal as ConfigError).variable).toBe('SVC_DATABASE_URL');
      expect((refusal as Error).message).toMatch(/statement_timeout is not set, expected 1 to 4000 ms/);
      expect((refusal as Error).message).toContain(
        `ALTER ROLE "postgres" IN DATABASE "${new URL(db.url).pathname.slice(1)}" SET statement_timeout = '4000ms'`,
      );
      await roleTimeout(db.url, '10s');
      await bouncer.admin('RECONNECT');
      await expect(database.migrate(MIGRATIONS)).rejects.toThrow(
        /statement_timeout is 10000 ms, expected 1 to 4000 ms/,
      );
      // Nothing was migrated.
      expect(
        await direct(db.url, `select 1 from information_schema.schemata where schema_name = 'svc'`),
      ).toEqual([]);
    });

    it('an app started through the pooler without the role default exits 78, naming its variable', async () => {
      const db = await fresh('pgb_exit');
      const admin = startProcess('pgb-admin-no-timeout', 'apps/admin/src/main.ts', {
        LOG_LEVEL: 'info',
        ADMIN_DATABASE_URL: pooled(bouncer.url(db.url)),
        ADMIN_LISTEN_ADDRESS: `127.0.0.1:${await freePort()}`,
        ADMIN_BILLING_ADDRESS: `127.0.0.1:${await freePort()}`,
        RELAYPLANE_KEK: Buffer.alloc(32, 3).toString('base64'),
      });
      const code = await Promise.race([
        admin.exited,
        new Promise<string>((resolve) => setTimeout(() => resolve('still running'), 20_000)),
      ]);
      if (code === 'still running') await admin.stop();
      expect(code).toBe(78);
      expect(admin.output()).toContain(
        'configuration error: ADMIN_DATABASE_URL goes through a transaction pooler',
      );
    });

    it('the role default cancels a statement longer than it (57014) and the connection serves the next one', async () => {
      const db = await fresh('pgb_timeout');
      await roleTimeout(db.url, '300ms');
      const database = await connect(pooled(bouncer.url(db.url)), 1_000);
      expect(await database.migrate(MIGRATIONS)).toEqual(Object.keys(MIGRATIONS));
      const setting = await database.db
        .selectNoFrom((eb) => eb.fn<string>('current_setting', [eb.val('statement_timeout')]).as('timeout'))
        .execute();
      expect(setting).toEqual([{ timeout: '300ms' }]);
      const sleep = (db: typeof database.db) =>
        db.selectNoFrom((eb) => eb.fn('pg_sleep', [eb.val(5)]).as('slept')).execute();
      const started = performance.now();
      const err = (await sleep(database.db).catch((e: unknown) => e)) as { code?: string };
      expect(err.code).toBe('57014');
      // Cancelled by the server well before the client's own bound (1 s + 0.5 s) or the sleep.
      expect(performance.now() - started).toBeLessThan(1_500);
      // Inside a transaction too.
      const inTransaction = await database.db
        .transaction()
        .execute((trx) => sleep(trx))
        .catch((e: unknown) => e as { code?: string });
      expect((inTransaction as { code?: string }).code).toBe('57014');
      expect(await database.ping(1_000)).toBe(true);
    });

    it('prepared statements work over every server connection (they run unnamed through the pooler)', async () => {
      const db = await fresh('pgb_prepared');
      await roleTimeout(db.url, '4s');
      const database = await connect(pooled(bouncer.url(db.url)));
      await database.migrate(MIGRATIONS);
      const run = database.prepared;
      if (!run) throw new Error('PostgreSQL has prepared');
      // 10 clients over 8 server connections, 200 statements of one name: a statement named on one
      // server connection would be missing on the next ("prepared statement … does not exist").
      const results = await Promise.all(
        Array.from({ length: 200 }, (_, i) =>
          run('relayplane_test_insert', 'insert into svc.widgets (id) select * from unnest($1::int[])', [
            [i],
          ]),
        ),
      );
      expect(results.map((r) => r.rowCount)).toEqual(results.map(() => 1));
      expect(await direct(db.url, 'select count(*)::int as n from svc.widgets')).toEqual([{ n: 200 }]);
    });

    it('three replicas migrate one fresh schema at once, each migration once; no advisory lock outlives a migration, failed or not', async () => {
      const db = await fresh('pgb_migrate');
      await roleTimeout(db.url, '4s');
      const url = pooled(bouncer.url(db.url));
      const replicas = await Promise.all([connect(url), connect(url), connect(url)]);
      const applied = await Promise.all(replicas.map((r) => r.migrate(MIGRATIONS)));
      expect(applied.flat().sort()).toEqual(Object.keys(MIGRATIONS));
      expect(await direct(db.url, 'select name from svc.kysely_migration order by name')).toEqual(
        Object.keys(MIGRATIONS).map((name) => ({ name })),
      );
      const advisoryLocks = async () =>
        direct<{ n: number }>(
          db.url,
          `select count(*)::int as n from pg_locks where locktype = 'advisory'
             and database = (select oid from pg_database where datname = current_database())`,
        );
      expect(await advisoryLocks()).toEqual([{ n: 0 }]);

      const failing: Migrations = {
        ...MIGRATIONS,
        '20260103T000000-broken': {
          async up(db) {
            await db.selectFrom('no_such_table').selectAll().execute();
          },
        },
      };
      await expect(replicas[0]?.migrate(failing)).rejects.toThrow(/no_such_table/);
      expect(await advisoryLocks()).toEqual([{ n: 0 }]);
      // Another replica is not kept waiting by a lock left behind: it migrates at once.
      const fixed: Migrations = {
        ...MIGRATIONS,
        '20260103T000000-fixed': {
          async up(db) {
            await db.schema.createTable('fixed').addColumn('id', 'integer').execute();
          },
        },
      };
      expect(await replicas[1]?.migrate(fixed)).toEqual(['20260103T000000-fixed']);
    });
  });

  describe('the distributed topology through PgBouncer: 2 gateways, 3 issuers, admin, billing', () => {
    let database: TestDatabase;
    let redis: TestRedis;
    let system: Distributed;
    let gateways: Api[];
    let root: { authorization: string };
    const today = new Date().toISOString().slice(0, 10);

    beforeAll(async () => {
      database = databases[0] as TestDatabase;
      redis = createTestRedis('e2e_pgbouncer');
      await roleTimeout(database.url, `${STATEMENT_TIMEOUT_MS}ms`);
      // PgBouncer's server connections to this database (its own readiness check made one) were
      // opened before: PostgreSQL applies a role's default to sessions started after it.
      await bouncer.admin('RECONNECT');
      const plans = join(mkdtempSync(join(tmpdir(), 'rp-plans-')), 'plans.yaml');
      writeFileSync(
        plans,
        'plans:\n  free:\n    limits: { max_concurrent_connections: 1000, max_issuance_per_second_per_key: 1000 }\n',
      );
      system = await startDistributed({
        label: 'pgb',
        // Migrations (the migrate commands, then each app at start) go through PgBouncer too.
        databaseUrl: pooled(bouncer.url(database.url)),
        redisUrl: redis.url,
        redisPrefix: redis.prefix,
        kek: Buffer.alloc(32, 22).toString('base64'),
        bootstrap: OWNER,
        replicas: { issuer: 3, gateway: 2 },
        extraEnv: {
          RELAYPLANE_PLANS_FILE: plans,
          BILLING_USAGE_INTERVAL_MS: '1000',
          BILLING_BUILTIN_PAID_CHECKOUT: 'true',
        },
      });
      gateways = await Promise.all(system.baseUrls.map((u) => Api.connect(u)));
      const login = await gateways[0]?.request('POST', '/admin/v1/auth/login', { body: OWNER });
      expect(login?.status).toBe(200);
      root = { authorization: `Bearer ${login?.body.token}` };
    }, 120_000);

    afterAll(async () => {
      const codes = (await system?.stop()) ?? [];
      await redis?.clean();
      expect(Object.fromEntries(system.procs.map((p, i) => [p.name, codes[i]]))).toEqual(
        Object.fromEntries(system.procs.map((p) => [p.name, 0])),
      );
    });

    it('serves every flow: sign-up, login, projects, API keys, issuance on both gateways, JWKS, relays, revocation and its feed, introspection, bots and identity tokens, checkout, usage, audit', async () => {
      const [a, b] = gateways as [Api, Api];
      const ready = await b.request('GET', '/readyz');
      expect(ready.body.services).toEqual({ admin: 'SERVING', issuer: 'SERVING', billing: 'SERVING' });

      const owner = { email: 'tenant@pgbouncer.test', password: 'tenant password 123' };
      const signup = await a.request('POST', '/admin/v1/auth/signup', {
        body: { ...owner, tenant_name: 'Pooled' },
      });
      expect(signup.status).toBe(201);
      const session = await b.request('POST', '/admin/v1/auth/login', { body: owner });
      expect(session.status).toBe(200);
      const auth = { authorization: `Bearer ${session.body.token}` };
      const project = await a.request('POST', '/admin/v1/projects', { headers: auth, body: { name: 'p' } });
      expect(project.status).toBe(201);
      const projects = await b.request('GET', '/admin/v1/projects', { headers: auth });
      expect(projects.body.projects.map((p: { id: string }) => p.id)).toEqual([project.body.id]);
      const key = await a.request('POST', `/admin/v1/projects/${project.body.id}/api-keys`, {
        headers: auth,
        body: { scopes: ['relay:session'] },
      });
      expect(key.status).toBe(201);

      const relay = await a.request('POST', '/admin/v1/relays', {
        headers: root,
        body: { region: 'eu-west', host: 'relay.pgbouncer.example', port: 4433 },
      });
      expect(relay.status).toBe(201);
      const relayAuth = { authorization: `Bearer ${relay.body.token}` };
      expect(
        (await b.request('POST', '/v1/relays/heartbeat', { headers: relayAuth, body: { load: 0.1 } })).status,
      ).toBe(200);

      // Enough at once that the issuers' batched inserts (prepared statements) run on several
      // server connections, through both gateways and both issuers.
      const issued = await Promise.all(
        Array.from({ length: 30 }, (_, i) =>
          (i % 2 ? b : a).request('POST', '/api/v1/credentials', {
            headers: { 'x-api-key': key.body.key },
            body: { region: 'eu-west' },
          }),
        ),
      );
      expect(issued.map((r) => r.status)).toEqual(issued.map(() => 201));
      const verifier = createVerifier({ baseUrl: b.baseUrl, relayToken: relay.body.token });
      try {
        await verifier.ready;
        const [first, second] = issued;
        const token = first?.body.token as string;
        await expect(verifier.verify(token, { scope: 'relay:session' })).resolves.toMatchObject({
          pid: project.body.id,
        });
        const assignment = await b.request('GET', '/v1/relays/assignment', {
          headers: { authorization: `Bearer ${token}` },
        });
        expect(assignment.status).toBe(200);
        expect(
          (await b.request('POST', '/v1/credentials/introspect', { headers: relayAuth, body: { token } }))
            .body,
        ).toMatchObject({ active: true });
        expect(
          (await a.request('POST', `/admin/v1/credentials/${first?.body.jti}/revoke`, { headers: auth }))
            .status,
        ).toBe(200);
        await waitFor(
          async () => verifier.isRevoked(first?.body.jti),
          3_000,
          'the revocation in the feed',
          20,
        );
        expect(
          (await b.request('POST', '/v1/credentials/introspect', { headers: relayAuth, body: { token } }))
            .body,
        ).toEqual({ active: false });
        const feed = await a.request('GET', '/v1/credentials/revocations?cursor=0', { headers: relayAuth });
        const revoked = feed.body.revocations.map((r: { jti: string }) => r.jti);
        expect(revoked).toContain(first?.body.jti);
        expect(revoked).not.toContain(second?.body.jti);
      } finally {
        await verifier.close();
      }

      // Bots: a bot key and an identity token, each then used as a credential.
      const bot = await a.request('POST', `/admin/v1/projects/${project.body.id}/bots`, {
        headers: auth,
        body: { name: 'reader', role: 'viewer' },
      });
      expect(bot.status).toBe(201);
      const botKey = await b.request(
        'POST',
        `/admin/v1/projects/${project.body.id}/bots/${bot.body.id}/keys`,
        {
          headers: auth,
        },
      );
      expect(botKey.status).toBe(201);
      const identity = await a.request(
        'POST',
        `/v1/projects/${project.body.id}/identities/${bot.body.id}/tokens`,
        {
          headers: auth,
          body: { scopes: ['projects:read'] },
        },
      );
      expect(identity.status).toBe(201);
      for (const token of [botKey.body.token, identity.body.value]) {
        const own = await b.request('GET', '/admin/v1/projects', {
          headers: { authorization: `Bearer ${token}` },
        });
        expect(own.status).toBe(200);
        expect(own.body.projects.map((p: { id: string }) => p.id)).toEqual([project.body.id]);
      }

      // Billing: a checkout through the built-in provider moves the tenant to pro.
      const checkout = await a.request('POST', '/admin/v1/billing/checkout-sessions', {
        headers: auth,
        body: { plan: 'pro' },
      });
      expect(checkout.status).toBe(201);
      const confirmed = await fetch(checkout.body.url, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: '',
      });
      expect(confirmed.status).toBe(200);
      const subscription = await b.request('GET', '/admin/v1/billing/subscription', { headers: auth });
      expect(subscription.body.plan.id).toBe('pro');
      // billing → issuer: the usage job summarises what the issuers recorded.
      await waitFor(
        async () => {
          const usage = await a.request('GET', `/admin/v1/billing/usage?from=${today}&to=${today}`, {
            headers: auth,
          });
          return usage.body.days.some(
            (d: { project_id: string | null; credentials_issued: number }) =>
              d.project_id === null && d.credentials_issued === issued.length,
          );
        },
        15_000,
        'usage aggregated from the issuers',
      );

      // Audit: admin's own events, and the issuer's and billing's through their outboxes.
      for (const [who, query] of [
        [auth, 'action=project.create'],
        [auth, 'action=credential.revoke'],
        [auth, 'action=checkout.confirm'],
        [root, 'action=relay.register&tenant_id=platform'],
      ] as const) {
        await waitFor(
          async () =>
            (await a.request('GET', `/admin/v1/audit-events?${query}`, { headers: who })).body.events.length >
            0,
          5_000,
          `audit events ${query}`,
        );
      }
      const verified = await b.request('GET', '/admin/v1/audit-events/verify', { headers: auth });
      expect(verified.body).toMatchObject({ ok: true, first_bad_id: null });

      // Every process went through PgBouncer, many clients over few server connections.
      const pools = await bouncer.admin<{
        database: string;
        pool_mode: string;
        cl_active: string;
        sv_active: string;
        sv_idle: string;
        sv_used: string;
      }>('SHOW POOLS');
      const pool = pools.find((p) => p.database === new URL(database.url).pathname.slice(1));
      expect(pool?.pool_mode).toBe('transaction');
      const servers = Number(pool?.sv_active) + Number(pool?.sv_idle) + Number(pool?.sv_used);
      expect(servers).toBeLessThanOrEqual(SERVER_CONNECTIONS);
      expect(Number(pool?.cl_active)).toBeGreaterThan(servers);
      for (const gw of gateways) expect(gw.checked).toBeGreaterThan(5);
    }, 60_000);

    it('a statement blocked past the statement timeout is cancelled by PostgreSQL: 503 + Retry-After within the deadline, not a hang', async () => {
      const [a] = gateways as [Api];
      const login = await a.request('POST', '/admin/v1/auth/login', { body: OWNER });
      const auth = { authorization: `Bearer ${login.body.token}` };
      expect((await a.request('GET', '/admin/v1/projects', { headers: auth })).status).toBe(200);
      const admin = system.procs.find((p) => p.name === 'pgb-admin');
      const before = admin?.output().length ?? 0;
      // A direct session holds the projects table: admin's list waits on the lock until cancelled.
      const holder = new pg.Client({ connectionString: database.url });
      await holder.connect();
      try {
        await holder.query('begin');
        await holder.query('lock table admin.projects in access exclusive mode');
        const started = Date.now();
        const blocked = await a.request('GET', '/admin/v1/projects', { headers: auth });
        const elapsed = Date.now() - started;
        expect(blocked.status).toBe(503);
        expect(blocked.headers.get('retry-after')).not.toBeNull();
        expect(Object.keys(blocked.body)).toEqual(['error']);
        // PostgreSQL cancelled the statement after the role's 4 s (SQLSTATE 57014), before the
        // client's own bound (4.5 s, "Query read timeout"). The gateway's channel retries an
        // UNAVAILABLE once, and that attempt waits too: the answer comes at its 5 s deadline.
        const cancelled = (admin?.output().slice(before) ?? '')
          .split('\n')
          .find((line) => line.includes('"dependency":"SQLSTATE 57014"'));
        expect(cancelled).toContain('"rpc":"ListProjects"');
        const at = Date.parse(JSON.parse(cancelled ?? '{}').time) - started;
        expect(at).toBeGreaterThanOrEqual(STATEMENT_TIMEOUT_MS - 100);
        expect(at).toBeLessThan(STATEMENT_TIMEOUT_MS + 500);
        expect(elapsed).toBeLessThan(6_000);
      } finally {
        await holder.query('rollback');
        await holder.end();
      }
      expect((await a.request('GET', '/admin/v1/projects', { headers: auth })).status).toBe(200);
    }, 30_000);
  });
});
