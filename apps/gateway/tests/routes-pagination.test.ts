import { createHash, randomBytes } from 'node:crypto';
import { newId } from '@relayplane/contract/ids';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inProcessCli } from './support/cli.ts';
import { type Stack, startStack } from './support/stack.ts';
import { type Tenant, tenant } from './support/tenant.ts';

const COUNT = 250;

/**
 * Paging of the admin-backed lists (docs/iam.md, "Lists and paging"): every list endpoint
 * answers `limit` items (default 50, at most 200) and a `next_cursor` that walks the whole list
 * once, and refuses a bad `limit` or `cursor` with 400. The 250 items of each list are written
 * straight into admin's tables (the paging is what is tested, through HTTP); their `created_at`
 * are five to a microsecond, all 250 within one millisecond, so the cursor must keep
 * PostgreSQL's microseconds and order ties by the list's unique column.
 */
describe('gateway routes: paged lists', () => {
  let stack: Stack;
  let owner: Tenant;
  let projectId = '';
  let botId = '';
  /** The ids each list must answer, from admin's tables. */
  const expected = new Map<string, Set<string>>();

  /** `created_at` of the i-th inserted row: 2020-01-01, plus ⌊i/5⌋ µs. */
  const at = (i: number) =>
    `2020-01-01T00:00:00.${String(Math.floor(i / 5)).padStart(6, '0')}Z` as unknown as Date;
  const hash = () => randomBytes(32).toString('hex');

  beforeAll(async () => {
    stack = await startStack('gw_pages');
    owner = await tenant(stack, { email: 'pages@example.test', name: 'Pages' });
    projectId = await owner.project('main');
    const bot = await stack.app.inject({
      method: 'POST',
      url: `/admin/v1/projects/${projectId}/bots`,
      headers: owner.auth,
      payload: { name: 'deployer' },
    });
    expect(bot.statusCode, bot.body).toBe(201);
    botId = bot.json<{ id: string }>().id;

    const db = stack.admin.database.db;
    const { tenantId, userId } = owner;
    /** Inserts the rows that make the list 250 long, `existing` being what the setup above created. */
    const fill = async (existing: number, insert: (rows: number[]) => Promise<unknown>) => {
      await insert(Array.from({ length: COUNT - existing }, (_, i) => i));
    };

    // The project `main`.
    await fill(1, (rows) =>
      db
        .insertInto('projects')
        .values(
          rows.map((i) => ({
            id: newId('project'),
            tenant_id: tenantId,
            name: `p-${i}`,
            environment: 'production',
            created_at: at(i),
          })),
        )
        .execute(),
    );
    expected.set(
      'projects',
      new Set(
        (await db.selectFrom('projects').select('id').where('tenant_id', '=', tenantId).execute()).map(
          (r) => r.id,
        ),
      ),
    );

    // The owner.
    await fill(1, async (rows) => {
      const users = rows.map((i) => ({
        id: newId('user'),
        email: `member-${i}@example.test`,
        password_hash: 'x',
        platform_admin: false,
        created_at: at(i),
      }));
      await db.insertInto('users').values(users).execute();
      await db
        .insertInto('memberships')
        .values(
          users.map((u) => ({
            tenant_id: tenantId,
            user_id: u.id,
            role: 'viewer',
            created_at: u.created_at,
          })),
        )
        .execute();
    });
    expected.set(
      'members',
      new Set(
        (
          await db.selectFrom('memberships').select('user_id').where('tenant_id', '=', tenantId).execute()
        ).map((r) => r.user_id),
      ),
    );

    await fill(0, (rows) =>
      db
        .insertInto('api_keys')
        .values(
          rows.map((i) => ({
            id: newId('apiKey'),
            tenant_id: tenantId,
            project_id: projectId,
            name: `k-${i}`,
            mode: 'live',
            key_hash: hash(),
            display_prefix: 'svc_live_0000',
            last_four: '0000',
            scopes: ['credentials:issue'],
            created_at: at(i),
            // All but the oldest are revoked: the free plan's 2 active keys leave room for one more below.
            revoked_at: i === 0 ? null : new Date(0),
          })),
        )
        .execute(),
    );
    expected.set(
      'api_keys',
      new Set(
        (await db.selectFrom('api_keys').select('id').where('project_id', '=', projectId).execute()).map(
          (r) => r.id,
        ),
      ),
    );

    await fill(0, (rows) =>
      db
        .insertInto('allowlist_entries')
        .values(
          rows.map((i) => ({
            id: newId('allowlistEntry'),
            tenant_id: tenantId,
            project_id: projectId,
            cidr: `10.0.${i}.0/24`,
            created_at: at(i),
          })),
        )
        .execute(),
    );
    expected.set(
      'entries',
      new Set(
        (
          await db.selectFrom('allowlist_entries').select('id').where('project_id', '=', projectId).execute()
        ).map((r) => r.id),
      ),
    );

    // The bot `deployer`.
    await fill(1, (rows) =>
      db
        .insertInto('bots')
        .values(
          rows.map((i) => ({
            id: newId('bot'),
            tenant_id: tenantId,
            project_id: projectId,
            name: `b-${i}`,
            role: 'viewer',
            created_at: at(i),
          })),
        )
        .execute(),
    );
    expected.set(
      'bots',
      new Set(
        (await db.selectFrom('bots').select('id').where('project_id', '=', projectId).execute()).map(
          (r) => r.id,
        ),
      ),
    );

    await fill(0, (rows) =>
      db
        .insertInto('bot_keys')
        .values(
          rows.map(() => ({
            id: newId('apiKey'),
            tenant_id: tenantId,
            project_id: projectId,
            bot_id: botId,
            token_hash: hash(),
            display_prefix: 'rpb_0000',
            last_four: '0000',
            created_at: new Date(0),
            revoked_at: new Date(0),
          })),
        )
        .execute(),
    );
    // The keys above, all at one instant (ordered by id alone), are revoked: the limit of 10 active keys is untouched.
    expected.set(
      'bot_keys',
      new Set(
        (await db.selectFrom('bot_keys').select('id').where('bot_id', '=', botId).execute()).map((r) => r.id),
      ),
    );

    await fill(0, (rows) =>
      db
        .insertInto('identity_tokens')
        .values(
          rows.map((i) => ({
            id: newId('identityToken'),
            tenant_id: tenantId,
            project_id: projectId,
            bot_id: botId,
            token_hash: hash(),
            scopes: ['projects:read'],
            display_prefix: 'rpi_0000',
            last_four: '0000',
            created_by_user_id: userId,
            created_by_token_id: null,
            root_user_id: userId,
            created_at: at(i),
            expires_at: at(i + 5),
          })),
        )
        .execute(),
    );
    expected.set(
      'identity_tokens',
      new Set(
        (await db.selectFrom('identity_tokens').select('id').where('bot_id', '=', botId).execute()).map(
          (r) => r.id,
        ),
      ),
    );

    const liveSessions = () =>
      db
        .selectFrom('sessions')
        .select('id')
        .where('user_id', '=', userId)
        .where('expires_at', '>', new Date());
    await fill((await liveSessions().execute()).length, (rows) =>
      db
        .insertInto('sessions')
        .values(
          rows.map((i) => ({
            id: newId('session'),
            token_hash: createHash('sha256').update(`session-${i}`).digest('hex'),
            user_id: userId,
            tenant_id: tenantId,
            created_at: at(i),
            expires_at: new Date(Date.now() + 86_400_000),
            kind: 'session',
          })),
        )
        .execute(),
    );
    expected.set('sessions', new Set((await liveSessions().execute()).map((r) => r.id)));
  });
  afterAll(async () => {
    await stack?.close();
  });

  interface List {
    url: () => string;
    field: string;
    order: 'asc' | 'desc';
    idOf?: (item: Record<string, unknown>) => string;
  }
  const project = () => `/admin/v1/projects/${projectId}`;
  const LISTS: Record<string, List> = {
    projects: { url: () => '/admin/v1/projects', field: 'projects', order: 'asc' },
    members: {
      url: () => '/admin/v1/members',
      field: 'members',
      order: 'asc',
      idOf: (m) => (m.user as { id: string }).id,
    },
    api_keys: { url: () => `${project()}/api-keys`, field: 'api_keys', order: 'desc' },
    entries: { url: () => `${project()}/allowlist`, field: 'entries', order: 'asc' },
    bots: { url: () => `${project()}/bots`, field: 'bots', order: 'asc' },
    bot_keys: { url: () => `${project()}/bots/${botId}/keys`, field: 'bot_keys', order: 'desc' },
    identity_tokens: {
      url: () => `/v1/projects/${projectId}/identities/${botId}/tokens`,
      field: 'identity_tokens',
      order: 'desc',
    },
    sessions: { url: () => '/admin/v1/auth/sessions', field: 'sessions', order: 'desc' },
  };
  const NAMES = Object.keys(LISTS);

  type Page = { items: Record<string, unknown>[]; next: string | null };
  async function page(list: List, query: string): Promise<Page> {
    const res = await stack.app.inject({ method: 'GET', url: `${list.url()}${query}`, headers: owner.auth });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json<Record<string, unknown>>();
    expect(Object.keys(body).sort()).toEqual([list.field, 'next_cursor'].sort());
    const next = body.next_cursor;
    expect(next === null || typeof next === 'string').toBe(true);
    return { items: body[list.field] as Record<string, unknown>[], next: next as string | null };
  }
  const idsOf = (list: List, items: Record<string, unknown>[]) =>
    items.map((item) => (list.idOf ? list.idOf(item) : (item.id as string)));

  it.each(NAMES)('%s: 250 items in three pages of limit=100 (100, 100, 50), each once', async (name) => {
    const list = LISTS[name] as List;
    const first = await page(list, '?limit=100');
    expect(first.items).toHaveLength(100);
    expect(first.next).toEqual(expect.any(String));
    const second = await page(list, `?limit=100&cursor=${encodeURIComponent(first.next ?? '')}`);
    expect(second.items).toHaveLength(100);
    expect(second.next).toEqual(expect.any(String));
    const third = await page(list, `?cursor=${encodeURIComponent(second.next ?? '')}&limit=100`);
    expect(third.items).toHaveLength(50);
    expect(third.next).toBeNull();

    const all = [...first.items, ...second.items, ...third.items];
    const ids = idsOf(list, all);
    expect(new Set(ids).size).toBe(COUNT);
    expect(new Set(ids)).toEqual(expected.get(name));
    // In the list's order (created_at; the API answers it to the millisecond).
    const times = all.map((item) => item.created_at as string);
    const sorted = [...times].sort();
    expect(times).toEqual(list.order === 'asc' ? sorted : sorted.reverse());
  });

  it.each(NAMES)(
    '%s: no parameters answer the first 50, and its cursor leads on to the rest',
    async (name) => {
      const list = LISTS[name] as List;
      const byHundred = await page(list, '?limit=100');
      const first = await page(list, '');
      expect(idsOf(list, first.items)).toEqual(idsOf(list, byHundred.items).slice(0, 50));
      expect(first.next).toEqual(expect.any(String));
      const rest = await page(list, `?limit=200&cursor=${encodeURIComponent(first.next ?? '')}`);
      expect(rest.items).toHaveLength(200);
      expect(rest.next).toBeNull();
      expect(new Set([...idsOf(list, first.items), ...idsOf(list, rest.items)])).toEqual(expected.get(name));
    },
  );

  const badQueries: [string, string | RegExp][] = [
    ['?limit=201', 'limit must be between 1 and 200'],
    ['?limit=0', 'limit must be between 1 and 200'],
    ['?limit=1000000', /limit/],
    ['?limit=ten', /limit/],
    ['?limit=1.5', /limit/],
    ['?limit=-1', /limit/],
    ['?cursor=garbage', 'cursor is not a cursor this endpoint answered'],
    [
      `?cursor=${Buffer.from('{"t":"2026-02-31T00:00:00.000000Z","k":"x"}').toString('base64url')}`,
      'cursor is not a cursor this endpoint answered',
    ],
    [`?cursor=${'a'.repeat(300)}`, /cursor/],
    ['?page=2', /page/],
  ];
  it.each(NAMES)('%s: a bad limit or cursor (or an unknown parameter) is 400 {"error"}', async (name) => {
    const list = LISTS[name] as List;
    for (const [query, message] of badQueries) {
      const res = await stack.app.inject({
        method: 'GET',
        url: `${list.url()}${query}`,
        headers: owner.auth,
      });
      expect(res.statusCode, `${query}: ${res.body}`).toBe(400);
      const body = res.json<{ error: string }>();
      expect(Object.keys(body), query).toEqual(['error']);
      if (typeof message === 'string') expect(body.error, query).toBe(message);
      else expect(body.error, query).toMatch(message);
    }
  });

  it('a cursor answers from where it was, whatever was created since: the pages still hold each item once', async () => {
    const list = LISTS.api_keys as List;
    const first = await page(list, '?limit=100');
    // Newest first: a key created now goes before the cursor, so the next pages do not show it.
    const created = await owner.apiKey(projectId, { name: 'late' });
    const second = await page(list, `?limit=100&cursor=${encodeURIComponent(first.next ?? '')}`);
    const third = await page(list, `?limit=100&cursor=${encodeURIComponent(second.next ?? '')}`);
    const ids = idsOf(list, [...first.items, ...second.items, ...third.items]);
    expect(new Set(ids)).toEqual(expected.get('api_keys'));
    expect(ids).not.toContain(created.id);
    expect(idsOf(list, (await page(list, '?limit=1')).items)).toEqual([created.id]);
    const revoked = await stack.app.inject({
      method: 'DELETE',
      url: `${project()}/api-keys/${created.id}`,
      headers: owner.auth,
    });
    expect(revoked.statusCode, revoked.body).toBe(200);
    await stack.admin.database.db.deleteFrom('api_keys').where('id', '=', created.id).execute();
  });

  it('revokes an API key found beyond the first page (the key is looked up by id, not in a page)', async () => {
    const list = LISTS.api_keys as List;
    const first = await page(list, '?limit=200');
    const last = await page(list, `?limit=100&cursor=${encodeURIComponent(first.next ?? '')}`);
    expect(last.next).toBeNull();
    // Newest first: the only active key, among the five oldest, is on the last page.
    const active = last.items.filter((k) => k.revoked_at === null) as { id: string }[];
    expect(active).toHaveLength(1);
    const oldest = active[0] as { id: string };
    const res = await stack.app.inject({
      method: 'DELETE',
      url: `${project()}/api-keys/${oldest.id}`,
      headers: owner.auth,
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ id: oldest.id, revoked_at: expect.any(String) });
  });

  describe('the CLI shows whole lists (it follows next_cursor)', () => {
    const cli = inProcessCli(() => stack.app, 'pages');
    it.each([
      [['projects', '--json'], 'projects'],
      [['api-keys', '__project__', '--json'], 'api_keys'],
      [['bots', '__project__', '--json'], 'bots'],
      [['sessions', 'list', '--json'], 'sessions'],
    ] as const)('relayplane %j prints all 250', async (argv, field) => {
      const run = await cli(
        argv.map((a) => (a === '__project__' ? projectId : a)),
        owner.token,
      );
      expect(run.code, run.stderr).toBe(0);
      const body = JSON.parse(run.stdout) as Record<string, { id: string }[]>;
      const ids = (body[field] ?? []).map((item) => item.id);
      expect(ids).toHaveLength(COUNT);
      expect(new Set(ids)).toEqual(expected.get(field));
    });
  });
});
