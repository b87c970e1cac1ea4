import { ManualClock } from '@relayplane/shared/clock';
import { testLogger } from '@relayplane/testing/logger';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SigningKeys } from '../../issuer/src/keys/signing-keys.ts';
import { inProcessCli } from './support/cli.ts';
import { type Stack, startStack } from './support/stack.ts';

/** What a paged list answers: its items under `field`, and the cursor of the next page. */
type Page = Record<string, unknown> & { next_cursor: string | null };

const LIMIT_ERROR = { error: 'limit must be between 1 and 200' };
const CURSOR_ERROR = { error: 'cursor is not one this API returned' };

/**
 * The relay, signing-key, plan and price lists page by one rule (issue 18, "Bounded lists"):
 * `limit` 1..200 (default 50), `cursor` the previous page's `next_cursor` (null on the last
 * page), on the real services (PostgreSQL, Redis). Relays and keys are made by the real
 * mechanisms: relays registered through the API, keys by rotations.
 */
describe('gateway routes: paging of relays, signing keys, plans and prices', () => {
  let stack: Stack;
  let auth: { authorization: string };

  beforeAll(async () => {
    stack = await startStack('gw_pages_public');
    auth = await stack.ownerAuth();
  });
  afterAll(async () => {
    await stack?.close();
  });
  const cli = inProcessCli(() => stack.app, 'pages-public');
  const token = () => auth.authorization.slice('Bearer '.length);

  async function get(url: string, headers: Record<string, string> = auth) {
    const res = await stack.app.inject({ method: 'GET', url, headers });
    return { status: res.statusCode, body: res.json<Page>(), headers: res.headers };
  }

  /** Follows `next_cursor` from the first page; answers each page's ids. */
  async function pages(path: string, field: string, id: string, limit: number): Promise<string[][]> {
    const out: string[][] = [];
    let cursor: string | null = null;
    do {
      const query = `limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
      const res = await get(`${path}?${query}`);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      out.push((res.body[field] as Record<string, string>[]).map((item) => item[id] as string));
      cursor = res.body.next_cursor;
      expect(out.length, 'pages').toBeLessThanOrEqual(10);
    } while (cursor !== null);
    return out;
  }

  /** 400 with exactly `error` for each query. */
  async function refuses(
    path: string,
    queries: [string, { error: string }][],
    headers: Record<string, string> = auth,
  ) {
    for (const [query, error] of queries) {
      const res = await get(`${path}?${query}`, headers);
      expect(res.status, `${path}?${query}`).toBe(400);
      expect(res.body, `${path}?${query}`).toEqual(error);
    }
  }

  const badQueries = (wellFormedButForeign: string): [string, { error: string }][] => [
    ['limit=201', LIMIT_ERROR],
    ['limit=0', LIMIT_ERROR],
    ['cursor=not-a-cursor!', CURSOR_ERROR],
    [`cursor=${wellFormedButForeign}`, CURSOR_ERROR],
  ];
  const foreignCursor = Buffer.from(JSON.stringify({ s: 'x', r: 1 })).toString('base64url');

  describe('relays', () => {
    const registered: string[] = [];

    beforeAll(async () => {
      for (let i = 0; i < 250; i++) {
        const res = await stack.app.inject({
          method: 'POST',
          url: '/admin/v1/relays',
          headers: auth,
          payload: { region: i % 2 ? 'eu-west' : 'us-east', host: `relay-${i}.pages.example`, port: 4433 },
        });
        expect(res.statusCode, res.body).toBe(201);
        registered.push(res.json<{ relay: { id: string } }>().relay.id);
      }
    }, 120_000);

    it('pages through 250 registered relays with limit=100 in three pages, none twice, in listing order', async () => {
      const ids = await pages('/admin/v1/relays', 'relays', 'id', 100);
      expect(ids.map((p) => p.length)).toEqual([100, 100, 50]);
      const all = ids.flat();
      expect(new Set(all).size).toBe(250);
      expect([...all].sort()).toEqual([...registered].sort());
      // The order of the whole list as the issuer reads it unpaged: oldest first.
      expect(all).toEqual((await stack.issuer.relays.list()).map((r) => r.id));
    });

    it('answers 50 by default, with a cursor, and keeps the existing fields', async () => {
      const res = await get('/admin/v1/relays');
      expect(res.status).toBe(200);
      expect(Object.keys(res.body).sort()).toEqual(['next_cursor', 'relays']);
      expect(res.body.relays).toHaveLength(50);
      expect(res.body.next_cursor).toEqual(expect.any(String));
      expect(Object.keys((res.body.relays as object[])[0] ?? {}).sort()).toEqual(
        [
          'client_certificate_sha256',
          'created_at',
          'host',
          'id',
          'last_heartbeat_at',
          'load',
          'port',
          'region',
          'static',
          'status',
          'url',
        ].sort(),
      );
    });

    it('neither repeats nor skips a relay when relays are registered and removed between pages', async () => {
      const first = await get('/admin/v1/relays?limit=100');
      const firstIds = (first.body.relays as { id: string }[]).map((r) => r.id);
      // Removed: one already read and one not yet read; registered: one new.
      const [readGone, unreadGone] = [firstIds[10] as string, registered[150] as string];
      for (const id of [readGone, unreadGone]) {
        const res = await stack.app.inject({
          method: 'DELETE',
          url: `/admin/v1/relays/${id}`,
          headers: auth,
        });
        expect(res.statusCode, res.body).toBe(204);
      }
      const added = await stack.app.inject({
        method: 'POST',
        url: '/admin/v1/relays',
        headers: auth,
        payload: { region: 'eu-west', host: 'relay-late.pages.example', port: 4433 },
      });
      expect(added.statusCode).toBe(201);
      let rest: string[] = [];
      let cursor = first.body.next_cursor;
      while (cursor !== null) {
        const page = await get(`/admin/v1/relays?limit=100&cursor=${encodeURIComponent(cursor)}`);
        expect(page.status).toBe(200);
        rest = rest.concat((page.body.relays as { id: string }[]).map((r) => r.id));
        cursor = page.body.next_cursor;
      }
      expect(rest).not.toContain(unreadGone);
      expect(rest.filter((id) => firstIds.includes(id))).toEqual([]);
      expect(rest.at(-1)).toBe(added.json<{ relay: { id: string } }>().relay.id);
      // 150 not yet read, one of them removed, one registered.
      expect(rest).toHaveLength(150 - 1 + 1);
    });

    it('answers 400 for a limit outside 1..200 and for a cursor it did not give', async () => {
      await refuses('/admin/v1/relays', badQueries(foreignCursor));
    });

    describe('through the CLI', () => {
      it('`relays --json` reads every page', async () => {
        const run = await cli(['relays', '--json'], token());
        expect(run.code, run.stderr).toBe(0);
        const body = JSON.parse(run.stdout) as { relays: { id: string }[] };
        // The shape the list had before it paged.
        expect(Object.keys(body)).toEqual(['relays']);
        expect(body.relays.map((r) => r.id)).toEqual((await stack.issuer.relays.list()).map((r) => r.id));
        expect(body.relays.length).toBeGreaterThan(200);
      });
    });
  });

  describe('signing keys', () => {
    /**
     * Another issuer replica on the same database whose clock the test moves: each rotation
     * needs the next key to have been published for one JWKS cache lifetime (300 s), and every
     * rotation leaves one more key in the listing (removed keys stay, for audit).
     */
    let replica: SigningKeys;

    beforeAll(async () => {
      const clock = new ManualClock(new Date());
      replica = new SigningKeys({
        db: stack.issuer.database.db,
        kek: stack.issuer.config.kek,
        policy: stack.issuer.config.keys,
        clock,
        bus: stack.issuer.bus,
        logger: testLogger('issuer-replica'),
        audit: stack.issuer.audit,
      });
      let count = (await replica.list()).keys.length;
      expect(count).toBe(2); // the active and the next key made at start-up
      while (count < 250) {
        clock.advance(301_000);
        const result = await replica.rotate('usr_pages_test');
        expect(result.rotation, 'a rotation each time').not.toBeNull();
        count += result.created.length;
      }
    }, 120_000);

    it('pages through 250 keys with limit=100 in three pages, none twice, in listing order', async () => {
      const kids = await pages('/admin/v1/signing-keys', 'keys', 'kid', 100);
      expect(kids.map((p) => p.length)).toEqual([100, 100, 50]);
      const all = kids.flat();
      expect(new Set(all).size).toBe(250);
      // Paged in SQL, in the order the issuer sorts the whole set in memory (compareKeys).
      const whole = (await replica.list()).keys;
      expect(all).toEqual(whole.map((k) => k.kid));
      const states = (await get('/admin/v1/signing-keys?limit=200')).body.keys as { state: string }[];
      expect(states.slice(0, 2).map((k) => k.state)).toEqual(['active', 'next']);
      expect(new Set(states.map((k) => k.state))).toEqual(new Set(['active', 'next', 'previous', 'removed']));
    });

    it('answers 50 by default with the pending rotation on each page; the rotation answers the first page', async () => {
      const res = await get('/admin/v1/signing-keys');
      expect(res.status).toBe(200);
      expect(Object.keys(res.body).sort()).toEqual(['keys', 'next_cursor', 'rotation_pending_since']);
      expect(res.body.keys).toHaveLength(50);
      expect(res.body.next_cursor).toEqual(expect.any(String));
      expect(res.body.rotation_pending_since).toBeNull();

      // The next key was made in the replica's future: this rotation waits (202).
      const rotate = await stack.app.inject({
        method: 'POST',
        url: '/admin/v1/signing-keys/rotate',
        headers: auth,
      });
      expect(rotate.statusCode, rotate.body).toBe(202);
      const rotated = rotate.json<Page & { keys: { kid: string }[] }>();
      expect(rotated.keys).toHaveLength(50);
      expect(rotated.next_cursor).toEqual(expect.any(String));
      expect(rotated.rotation_pending_since).toEqual(expect.any(String));
      const second = await get(
        `/admin/v1/signing-keys?cursor=${encodeURIComponent(rotated.next_cursor ?? '')}`,
      );
      expect(second.status).toBe(200);
      expect(second.body.rotation_pending_since).toBe(rotated.rotation_pending_since);
      const firstTwo = [...rotated.keys, ...(second.body.keys as { kid: string }[])].map((k) => k.kid);
      expect(firstTwo).toEqual((await replica.list()).keys.slice(0, 100).map((k) => k.kid));
    });

    it('answers 400 for a limit outside 1..200 and for a cursor it did not give', async () => {
      const wrongShape = Buffer.from(JSON.stringify([9, 0, 0, 'kid'])).toString('base64url');
      await refuses('/admin/v1/signing-keys', [
        ...badQueries(foreignCursor),
        [`cursor=${wrongShape}`, CURSOR_ERROR],
      ]);
    });

    describe('through the CLI', () => {
      it('`keys --json` reads every page', async () => {
        const run = await cli(['keys', '--json'], token());
        expect(run.code, run.stderr).toBe(0);
        const body = JSON.parse(run.stdout) as { keys: { kid: string }[] };
        expect(Object.keys(body).sort()).toEqual(['keys', 'rotation_pending_since']);
        expect(body.keys.map((k) => k.kid)).toEqual((await replica.list()).keys.map((k) => k.kid));
        expect(body.keys).toHaveLength(250);
      });
    });
  });

  /**
   * The catalogue has one entry per plan id, and plan ids are fixed (free, pro, enterprise: a
   * plans file can only change their names, limits and prices), so three items page here.
   */
  describe('plans and prices', () => {
    for (const [path, field, id] of [
      ['/v1/plans', 'plans', 'id'],
      ['/v1/pricing', 'prices', 'plan_id'],
    ] as const) {
      it(`${path}: pages the catalogue with limit=1 in three pages, none twice`, async () => {
        const ids = await pages(path, field, id, 1);
        expect(ids).toEqual([['free'], ['pro'], ['enterprise']]);
        const two = await pages(path, field, id, 2);
        expect(two).toEqual([['free', 'pro'], ['enterprise']]);
      });

      it(`${path}: answers the whole catalogue by default, cacheable, next_cursor null`, async () => {
        const res = await get(path, {});
        expect(res.status).toBe(200);
        expect(res.headers['cache-control']).toBe('public, max-age=60');
        expect((res.body[field] as Record<string, string>[]).map((p) => p[id])).toEqual([
          'free',
          'pro',
          'enterprise',
        ]);
        expect(res.body.next_cursor).toBeNull();
        expect(Object.keys(res.body).sort()).toEqual([field, 'next_cursor'].sort());
      });

      it(`${path}: answers 400 for a limit outside 1..200 and for a cursor it did not give`, async () => {
        const unknownPlan = Buffer.from(JSON.stringify({ a: 'platinum' })).toString('base64url');
        await refuses(path, [...badQueries(foreignCursor), [`cursor=${unknownPlan}`, CURSOR_ERROR]], {});
        const res = await get(`${path}?limit=201`, {});
        // A refusal is not cached as the catalogue is.
        expect(res.headers['cache-control']).toBe('no-store');
      });
    }
  });
});
