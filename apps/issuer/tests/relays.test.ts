import { createHash } from 'node:crypto';
import { create } from '@bufbuild/protobuf';
import { TimestampSchema, timestampDate } from '@bufbuild/protobuf/wkt';
import { BUS_CHANNELS } from '@relayplane/contract/contract';
import { type AppError, INVALID_TOKEN_MESSAGE } from '@relayplane/contract/errors';
import { newToken, parseToken } from '@relayplane/contract/tokens';
import {
  AuthenticateRelayRequestSchema,
  DeleteRelayRequestSchema,
  HeartbeatRequestSchema,
  ListRelaysRequestSchema,
  RegisterRelayRequestSchema,
} from '@relayplane/proto/issuer';
import { enqueueAuditEvent, enqueueNotice } from '@relayplane/shared/audit-outbox';
import { MemoryBus } from '@relayplane/shared/bus';
import { ManualClock } from '@relayplane/shared/clock';
import { createDatabase, type Database } from '@relayplane/shared/db';
import { testLogger } from '@relayplane/testing/logger';
import { createTestDatabase, type TestDatabase } from '@relayplane/testing/storage';
import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { migrations } from '../src/db/migrations/index.ts';
import type { IssuerDatabase, RelaysTable } from '../src/db/schema.ts';
import { authenticateRelay } from '../src/grpc/authenticate-relay.ts';
import { deleteRelay } from '../src/grpc/delete-relay.ts';
import { heartbeat } from '../src/grpc/heartbeat.ts';
import { listRelays } from '../src/grpc/list-relays.ts';
import { registerRelay } from '../src/grpc/register-relay.ts';
import type { RelayConfig } from '../src/relays/relay-config.ts';
import { RelayDirectory, STATIC_RELAY_MESSAGE } from '../src/relays/relay-directory.ts';
import { rejection } from './support/harness.ts';

const WINDOW_SECONDS = 30;

const baseConfig: RelayConfig = {
  healthWindowSeconds: WINDOW_SECONDS,
  // Long enough that only a bus message can explain a replica seeing a change in time.
  refreshIntervalMs: 60_000,
  maxAssigned: 3,
  staticRelays: [],
  fallback: [],
};

/** Polls `probe` until it returns a value (not undefined) or the deadline passes. */
async function until<T>(probe: () => T | undefined, what: string, timeoutMs = 5_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('relay directory (PostgreSQL)', () => {
  let testDb: TestDatabase;
  const databases: Database<IssuerDatabase>[] = [];
  let database: Database<IssuerDatabase>;
  let clock: ManualClock;
  let bus: MemoryBus;
  const started: RelayDirectory[] = [];

  async function openDatabase(): Promise<Database<IssuerDatabase>> {
    const db = await createDatabase<IssuerDatabase>(
      { kind: 'postgres', url: testDb.url },
      'issuer',
      testLogger('issuer'),
    );
    databases.push(db);
    return db;
  }

  async function directory(
    config: Partial<RelayConfig> = {},
    options: { db?: Database<IssuerDatabase>; bus?: MemoryBus } = {},
  ): Promise<RelayDirectory> {
    const dir = new RelayDirectory(
      (options.db ?? database).db,
      { ...baseConfig, ...config },
      {
        clock,
        bus: options.bus ?? bus,
        logger: testLogger('relays'),
        // Events written to the real outbox table; nothing delivers them in these tests.
        audit: { enqueue: enqueueAuditEvent, notice: enqueueNotice, kick() {} },
      },
    );
    await dir.start();
    started.push(dir);
    return dir;
  }

  const rawRows = async () =>
    (await sql<RelaysTable>`select * from issuer.relays order by created_at, id`.execute(database.db)).rows;

  beforeAll(async () => {
    testDb = await createTestDatabase('issuer_relays');
    database = await openDatabase();
    expect(await database.migrate(migrations)).toContain('20261122T2100-relays');
  });

  afterAll(async () => {
    for (const db of databases) await db.destroy();
    await testDb?.drop();
  });

  beforeEach(async () => {
    await sql`delete from issuer.relays`.execute(database.db);
    clock = new ManualClock(Date.parse('2026-11-22T12:00:00Z'));
    bus = new MemoryBus();
  });

  afterEach(async () => {
    for (const dir of started.splice(0)) await dir.stop();
    await bus.close();
  });

  describe('registration and tokens', () => {
    it('registers a relay and returns an rpr_ token stored only as its SHA-256', async () => {
      const dir = await directory();
      const { relay, token } = await dir.register({
        region: 'eu-west',
        host: 'Relay-1.Example.NET',
        port: 4433,
      });
      expect(token).toMatch(/^rpr_[0-9a-f]{72}$/);
      expect(parseToken(token)).toBe('relayNode');
      expect(relay).toEqual({
        id: expect.stringMatching(/^rly_[0-9a-z]{20}$/),
        region: 'eu-west',
        host: 'relay-1.example.net',
        port: 4433,
        url: 'https://relay-1.example.net:4433',
        status: 'unhealthy',
        load: 0,
        static: false,
        createdAt: clock.now(),
      });

      const rows = await rawRows();
      expect(rows).toHaveLength(1);
      const [row] = rows;
      expect(row?.token_hash).toBe(createHash('sha256').update(token).digest('hex'));
      for (const [column, value] of Object.entries(row ?? {})) {
        expect(String(value instanceof Date ? value.toISOString() : value), column).not.toContain(token);
        expect(String(value), column).not.toContain(token.slice(4));
      }
      expect(row?.deleted_at).toBeNull();
      expect(row?.last_heartbeat_at).toBeNull();
    });

    it('gives an IPv6 relay a bracketed URL', async () => {
      const dir = await directory();
      const { relay } = await dir.register({ region: 'eu-west', host: '2001:DB8::0:1', port: 443 });
      expect(relay.host).toBe('2001:db8::1');
      expect(relay.url).toBe('https://[2001:db8::1]:443');
    });

    it('rejects an invalid region, host or port with invalid_request and stores nothing', async () => {
      const dir = await directory();
      const bad = [
        { region: 'EU-West', host: 'a.example', port: 443 },
        { region: '', host: 'a.example', port: 443 },
        { region: 'a'.repeat(33), host: 'a.example', port: 443 },
        { region: 'eu-west', host: 'not a host', port: 443 },
        { region: 'eu-west', host: `${'a'.repeat(60)}.`.repeat(5), port: 443 },
        { region: 'eu-west', host: '', port: 443 },
        { region: 'eu-west', host: 'a.example', port: 0 },
        { region: 'eu-west', host: 'a.example', port: 65536 },
        { region: 'eu-west', host: 'a.example', port: 443.5 },
      ];
      for (const input of bad) {
        const err = await rejection(dir.register(input));
        expect(err.code, JSON.stringify(input)).toBe('invalid_request');
      }
      expect(await rawRows()).toEqual([]);
    });

    it('answers conflict for an address already taken by a live or static relay, and frees it on removal', async () => {
      const dir = await directory({
        staticRelays: [{ id: 'rly_static_eu-west_1', region: 'eu-west', host: 'static.example', port: 443 }],
      });
      const { relay } = await dir.register({ region: 'eu-west', host: 'relay.example', port: 443 });
      const dup = await rejection(dir.register({ region: 'us-east', host: 'RELAY.example', port: 443 }));
      expect(dup.code).toBe('conflict');
      expect(dup.message).toBe('a relay at relay.example:443 is already registered');
      expect(
        (await rejection(dir.register({ region: 'eu-west', host: 'static.example', port: 443 }))).code,
      ).toBe('conflict');
      // Another port on the same host is another relay.
      await dir.register({ region: 'eu-west', host: 'relay.example', port: 444 });

      await dir.remove(relay.id);
      const again = await dir.register({ region: 'eu-west', host: 'relay.example', port: 443 });
      expect(again.relay.id).not.toBe(relay.id);
    });

    it('lets exactly one of many concurrent registrations of one address win', async () => {
      const [a, b] = [await directory(), await directory({}, { db: await openDatabase() })];
      const results = await Promise.allSettled(
        Array.from({ length: 8 }, (_, i) =>
          (i % 2 ? a : b).register({ region: 'eu-west', host: 'race.example', port: 443 }),
        ),
      );
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      for (const r of results) {
        if (r.status === 'rejected') expect((r.reason as AppError).code).toBe('conflict');
      }
      expect(await rawRows()).toHaveLength(1);
    });

    it('authenticates a live relay’s token and rejects unknown, malformed, wrong-kind and deleted ones alike', async () => {
      const dir = await directory();
      const { relay, token } = await dir.register({ region: 'eu-west', host: 'relay.example', port: 443 });
      const other = await dir.register({ region: 'eu-west', host: 'other.example', port: 443 });
      expect((await dir.authenticate(token)).id).toBe(relay.id);
      expect((await dir.authenticate(other.token)).id).toBe(other.relay.id);

      const last = token.at(-1) === '0' ? '1' : '0';
      const rejected = [
        newToken('relayNode'), // well formed, never issued
        `${token.slice(0, -1)}${last}`, // checksum broken
        token.slice(0, -2),
        `${token} `,
        'rpr_',
        '',
        newToken('bot'),
        token.replace(/^rpr_/, 'rpb_'),
      ];
      for (const candidate of rejected) {
        const err = await rejection(dir.authenticate(candidate));
        expect(err.code, candidate).toBe('unauthenticated');
        expect(err.message).toBe(INVALID_TOKEN_MESSAGE);
      }

      await dir.remove(relay.id);
      const err = await rejection(dir.authenticate(token));
      expect(err.code).toBe('unauthenticated');
      expect(err.message).toBe(INVALID_TOKEN_MESSAGE);
      // The other relay's token is untouched.
      expect((await dir.authenticate(other.token)).id).toBe(other.relay.id);
    });
  });

  describe('heartbeats and health', () => {
    it('marks a relay healthy on heartbeat and records its load and time', async () => {
      const dir = await directory();
      const { relay } = await dir.register({ region: 'eu-west', host: 'relay.example', port: 443 });
      expect(dir.assign('eu-west').relays).toEqual([]);
      clock.advance(5_000);
      const beat = await dir.heartbeat(relay.id, 0.25);
      expect(beat).toMatchObject({
        id: relay.id,
        status: 'healthy',
        load: 0.25,
        lastHeartbeatAt: clock.now(),
      });
      const [row] = await rawRows();
      expect(row?.load).toBe(0.25);
      expect(row?.last_heartbeat_at).toEqual(clock.now());
      expect(dir.assign('eu-west').relays.map((r) => [r.id, r.load, r.status])).toEqual([
        [relay.id, 0.25, 'healthy'],
      ]);
      expect((await dir.list()).find((r) => r.id === relay.id)?.status).toBe('healthy');
    });

    it('turns a relay unhealthy once its last heartbeat is older than the window, and never assigns it', async () => {
      const dir = await directory();
      const { relay } = await dir.register({ region: 'eu-west', host: 'relay.example', port: 443 });
      await dir.heartbeat(relay.id, 0.1);
      clock.advance(WINDOW_SECONDS * 1000);
      expect(dir.assign().relays.map((r) => r.id)).toEqual([relay.id]);
      clock.advance(1);
      expect(dir.assign().relays).toEqual([]);
      expect(dir.assign('eu-west').relays).toEqual([]);
      const listed = (await dir.list()).find((r) => r.id === relay.id);
      expect(listed?.status).toBe('unhealthy');
      expect(listed?.lastHeartbeatAt).toEqual(new Date(clock.now().getTime() - WINDOW_SECONDS * 1000 - 1));
      await dir.heartbeat(relay.id, 0.1);
      expect(dir.assign().relays.map((r) => r.id)).toEqual([relay.id]);
    });

    it('rejects a load outside 0..1 and heartbeats of unknown, removed or static relays', async () => {
      const dir = await directory({
        staticRelays: [{ id: 'rly_static_eu-west_1', region: 'eu-west', host: 'static.example', port: 443 }],
      });
      const { relay } = await dir.register({ region: 'eu-west', host: 'relay.example', port: 443 });
      for (const load of [-0.01, 1.01, Number.NaN, Number.POSITIVE_INFINITY]) {
        expect((await rejection(dir.heartbeat(relay.id, load))).code, String(load)).toBe('invalid_request');
      }
      expect((await rawRows())[0]?.last_heartbeat_at).toBeNull();
      expect((await dir.heartbeat(relay.id, 0)).load).toBe(0);
      expect((await dir.heartbeat(relay.id, 1)).load).toBe(1);
      expect((await rejection(dir.heartbeat('rly_00000000000000000000', 0.5))).code).toBe('not_found');
      expect((await rejection(dir.heartbeat('nonsense', 0.5))).code).toBe('not_found');
      expect((await rejection(dir.heartbeat('rly_static_eu-west_1', 0.5))).code).toBe('invalid_request');
      await dir.remove(relay.id);
      expect((await rejection(dir.heartbeat(relay.id, 0.5))).code).toBe('not_found');
    });
  });

  describe('assignment', () => {
    async function fleet(dir: RelayDirectory, relays: Array<[string, string, number]>) {
      const ids: Record<string, string> = {};
      for (const [name, region, load] of relays) {
        const { relay } = await dir.register({ region, host: `${name}.example`, port: 443 });
        await dir.heartbeat(relay.id, load);
        ids[relay.id] = name;
      }
      return (relays: { id: string }[]) => relays.map((r) => ids[r.id] ?? r.id);
    }

    it('hands out the requested region first, then least loaded, ties by id, at most maxAssigned', async () => {
      const dir = await directory({ maxAssigned: 4 });
      const names = await fleet(dir, [
        ['eu1', 'eu-west', 0.6],
        ['eu2', 'eu-west', 0.2],
        ['us1', 'us-east', 0.1],
        ['us2', 'us-east', 0.5],
        ['ap1', 'ap-south', 0.3],
      ]);
      expect(names(dir.assign('eu-west').relays)).toEqual(['eu2', 'eu1', 'us1', 'ap1']);
      expect(names(dir.assign('us-east').relays)).toEqual(['us1', 'us2', 'eu2', 'ap1']);
      expect(names(dir.assign().relays)).toEqual(['us1', 'eu2', 'ap1', 'us2']);
      expect(names(dir.assign(' EU-West ').relays)).toEqual(['eu2', 'eu1', 'us1', 'ap1']);
      expect(names(dir.assign('mars-1').relays)).toEqual(['us1', 'eu2', 'ap1', 'us2']);

      // Equal loads: by id.
      const tie = await dir.register({ region: 'eu-west', host: 'eu3.example', port: 443 });
      await dir.heartbeat(tie.relay.id, 0.2);
      const euIds = dir
        .assign('eu-west')
        .relays.slice(0, 2)
        .map((r) => r.id);
      expect(euIds).toHaveLength(2);
      expect(euIds).toEqual([...euIds].sort());

      const small = await directory({ maxAssigned: 1 });
      expect(names(small.assign('eu-west').relays)).toHaveLength(1);
    });

    it('composes the fallback from configured entry points and other regions, without duplicates', async () => {
      const dir = await directory({
        maxAssigned: 1,
        fallback: ['edge.example:443', 'us1.example:443'],
      });
      await fleet(dir, [
        ['eu1', 'eu-west', 0.6],
        ['eu2', 'eu-west', 0.2],
        ['us1', 'us-east', 0.1],
        ['ap1', 'ap-south', 0.3],
      ]);
      const res = dir.assign('eu-west');
      expect(res.relays.map((r) => r.host)).toEqual(['eu2.example']);
      expect(res.fallback).toEqual(['edge.example:443', 'us1.example:443', 'ap1.example:443']);
      expect(dir.assign('us-east').fallback).toEqual([
        'edge.example:443',
        'us1.example:443',
        'eu2.example:443',
        'ap1.example:443',
        'eu1.example:443',
      ]);
    });

    it('answers no relays but the configured fallback when none is healthy', async () => {
      const dir = await directory({ fallback: ['edge.example:443'] });
      const { relay } = await dir.register({ region: 'eu-west', host: 'relay.example', port: 443 });
      expect(dir.assign('eu-west')).toEqual({ relays: [], fallback: ['edge.example:443'] });
      await dir.heartbeat(relay.id, 0.5);
      clock.advance((WINDOW_SECONDS + 1) * 1000);
      expect(dir.assign('eu-west')).toEqual({ relays: [], fallback: ['edge.example:443'] });
    });

    it('stops assigning a removed relay and keeps its row for audit', async () => {
      const dir = await directory();
      const { relay } = await dir.register({ region: 'eu-west', host: 'relay.example', port: 443 });
      await dir.heartbeat(relay.id, 0.5);
      expect(dir.assign().relays).toHaveLength(1);
      clock.advance(1_000);
      await dir.remove(relay.id);
      expect(dir.assign().relays).toEqual([]);
      expect(await dir.list()).toEqual([]);
      const [row] = await rawRows();
      expect(row?.id).toBe(relay.id);
      expect(row?.deleted_at).toEqual(clock.now());
      expect((await rejection(dir.remove(relay.id))).code).toBe('not_found');
      expect((await rejection(dir.remove('rly_00000000000000000000'))).code).toBe('not_found');
      expect((await rejection(dir.remove('whatever'))).code).toBe('not_found');
    });
  });

  describe('static relays', () => {
    const staticRelays = [
      { id: 'rly_static_eu-west_1', region: 'eu-west', host: '127.0.0.1', port: 4433 },
      { id: 'rly_static_us-east_1', region: 'us-east', host: '::1', port: 4434 },
    ];

    it('are always healthy, listed first and assigned with load 0', async () => {
      const dir = await directory({ staticRelays, fallback: ['127.0.0.1:4443'] });
      const registered = await dir.register({ region: 'eu-west', host: 'relay.example', port: 443 });
      clock.advance(365 * 24 * 3600 * 1000);
      const listed = await dir.list();
      expect(listed.map((r) => [r.id, r.static, r.status])).toEqual([
        ['rly_static_eu-west_1', true, 'healthy'],
        ['rly_static_us-east_1', true, 'healthy'],
        [registered.relay.id, false, 'unhealthy'],
      ]);
      expect(listed[1]?.url).toBe('https://[::1]:4434');
      const res = dir.assign('us-east');
      expect(res.relays.map((r) => r.id)).toEqual(['rly_static_us-east_1', 'rly_static_eu-west_1']);
      expect(res.relays.every((r) => r.static && r.status === 'healthy' && r.load === 0)).toBe(true);
      expect(res.fallback).toEqual(['127.0.0.1:4443', '127.0.0.1:4433']);
    });

    it('cannot be removed through the API', async () => {
      const dir = await directory({ staticRelays });
      const err = await rejection(dir.remove('rly_static_eu-west_1'));
      expect(err.code).toBe('invalid_request');
      expect(err.message).toBe(STATIC_RELAY_MESSAGE);
      expect((await dir.list()).map((r) => r.id)).toContain('rly_static_eu-west_1');
    });
  });

  describe('rpc handlers', () => {
    it('map the directory onto the Relay messages and pass errors through', async () => {
      const dir = await directory({
        staticRelays: [{ id: 'rly_static_eu-west_1', region: 'eu-west', host: '::1', port: 4433 }],
      });
      const deps = { relays: dir };
      const rpc = {
        registerRelay: registerRelay(deps),
        authenticateRelay: authenticateRelay(deps),
        heartbeat: heartbeat(deps),
        listRelays: listRelays(deps),
        deleteRelay: deleteRelay(deps),
      };
      const call = {} as never;
      const registered = await rpc.registerRelay(
        create(RegisterRelayRequestSchema, { region: 'us-east', host: 'relay.example', port: 443 }),
        call,
      );
      expect(registered.token).toMatch(/^rpr_/);
      expect(registered.relay).toMatchObject({
        region: 'us-east',
        host: 'relay.example',
        port: 443,
        url: 'https://relay.example:443',
        status: 'unhealthy',
        static: false,
        lastHeartbeatAt: undefined,
      });
      const id = registered.relay?.id ?? '';
      const createdAt = registered.relay?.createdAt;
      expect(createdAt && timestampDate(create(TimestampSchema, createdAt))).toEqual(clock.now());

      const authed = await rpc.authenticateRelay(
        create(AuthenticateRelayRequestSchema, { token: registered.token }),
        call,
      );
      expect(authed.relay?.id).toBe(id);
      clock.advance(2_000);
      const beat = await rpc.heartbeat(create(HeartbeatRequestSchema, { relayId: id, load: 0.5 }), call);
      expect(beat.relay).toMatchObject({ id, status: 'healthy', load: 0.5 });
      const beatAt = beat.relay?.lastHeartbeatAt;
      expect(beatAt && timestampDate(create(TimestampSchema, beatAt))).toEqual(clock.now());

      const listed = await rpc.listRelays(create(ListRelaysRequestSchema), call);
      expect(listed.relays?.map((r) => [r.id, r.static, r.status, r.url])).toEqual([
        ['rly_static_eu-west_1', true, 'healthy', 'https://[::1]:4433'],
        [id, false, 'healthy', 'https://relay.example:443'],
      ]);

      await expect(
        rpc.deleteRelay(create(DeleteRelayRequestSchema, { relayId: 'rly_static_eu-west_1' }), call),
      ).rejects.toMatchObject({ code: 'invalid_request' });
      expect(await rpc.deleteRelay(create(DeleteRelayRequestSchema, { relayId: id }), call)).toEqual({});
      await expect(
        rpc.authenticateRelay(create(AuthenticateRelayRequestSchema, { token: registered.token }), call),
      ).rejects.toMatchObject({ code: 'unauthenticated', message: INVALID_TOKEN_MESSAGE });
    });
  });

  describe('replicas', () => {
    it('a second directory sees a registration, heartbeat and removal through relays.changed', async () => {
      const a = await directory();
      const b = await directory({}, { db: await openDatabase() });
      let messages = 0;
      const unsubscribe = await bus.subscribe(BUS_CHANNELS.relaysChanged, () => messages++);

      const { relay } = await a.register({ region: 'eu-west', host: 'relay.example', port: 443 });
      await a.heartbeat(relay.id, 0.4);
      const seen = await until(
        () => b.assign('eu-west').relays.find((r) => r.id === relay.id),
        'replica b to assign the relay registered on a',
      );
      expect(seen).toMatchObject({ load: 0.4, status: 'healthy' });

      await a.heartbeat(relay.id, 0.9);
      await until(
        () => (b.assign().relays.find((r) => r.id === relay.id)?.load === 0.9 ? true : undefined),
        'replica b to see the new load',
      );

      await a.remove(relay.id);
      await until(() => (b.assign().relays.length === 0 ? true : undefined), 'replica b to drop the relay');
      expect(messages).toBe(4);
      await unsubscribe();
    });

    it('a replica that missed the message catches up on its refresh timer', async () => {
      const a = await directory();
      // Its own bus: no message from a ever reaches it.
      const b = await directory(
        { refreshIntervalMs: 100 },
        { db: await openDatabase(), bus: new MemoryBus() },
      );
      const { relay } = await a.register({ region: 'eu-west', host: 'relay.example', port: 443 });
      await a.heartbeat(relay.id, 0.3);
      const seen = await until(
        () => b.assign().relays.find((r) => r.id === relay.id),
        'replica b to pick the relay up on its timer',
      );
      expect(seen.load).toBe(0.3);
    });

    it('loads relays registered before it started', async () => {
      const a = await directory();
      const { relay } = await a.register({ region: 'eu-west', host: 'relay.example', port: 443 });
      await a.heartbeat(relay.id, 0.3);
      const b = await directory({}, { db: await openDatabase(), bus: new MemoryBus() });
      expect(b.assign().relays.map((r) => r.id)).toEqual([relay.id]);
    });
  });
});
