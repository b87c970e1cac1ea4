import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KeyState } from '@relayplane/proto/issuer';
import { ManualClock } from '@relayplane/shared/clock';
import { createTestDatabase, type TestDatabase } from '@relayplane/testing/storage';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CURSOR_MESSAGE } from '../src/common/list-paging.ts';
import { JWKS_MAX_AGE_SECONDS } from '../src/keys/key-lifecycle.ts';
import { newKek, type RunningIssuer, rejection, startIssuer } from './support/harness.ts';

const STATIC = [
  { id: 'rly_static_a', region: 'eu-west', host: 'static-a.example', port: 4433 },
  { id: 'rly_static_b', region: 'eu-west', host: 'static-b.example', port: 4433 },
  { id: 'rly_static_c', region: 'us-east', host: 'static-c.example', port: 4433 },
];
const REGISTERED = 9;
const ROTATIONS = 30;
const cursorOf = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

/**
 * ListRelays and ListSigningKeys page where the lists are stored (issue 18, "Bounded lists"),
 * on PostgreSQL and on PGlite (embedded mode): every page size walks the whole list in the
 * order the unpaged listing has, once each; anything but a cursor it answered is refused.
 */
describe.each([
  ['PostgreSQL', 'postgres'],
  ['PGlite', 'pglite'],
] as const)('issuer list paging on %s', (_name, kind) => {
  const clock = new ManualClock(Date.parse('2026-11-22T12:00:00Z'));
  let database: TestDatabase | undefined;
  let dataDir: string | undefined;
  let issuer: RunningIssuer;

  beforeAll(async () => {
    if (kind === 'postgres') database = await createTestDatabase('issuer_list_paging');
    else dataDir = mkdtempSync(join(tmpdir(), 'issuer-paging-'));
    issuer = await startIssuer({
      databaseUrl: database?.url ?? 'postgres://unused.invalid/none',
      clock,
      kek: newKek(),
      env: { ISSUER_MAX_CREDENTIAL_TTL_SECONDS: '600', ISSUER_KEY_MAINTENANCE_INTERVAL_SECONDS: '300' },
      config: {
        relays: { staticRelays: STATIC },
        ...(dataDir ? { database: { kind: 'pglite', dataDir } } : {}),
      },
    });
    // Some relays share a creation instant (the id orders them), some do not.
    for (let i = 0; i < REGISTERED; i++) {
      if (i % 3 === 0) clock.advance(1);
      await issuer.client.registerRelay({ region: 'eu-west', host: `relay-${i}.example`, port: 4433 });
    }
    // Every rotation adds a key; previous keys are removed once their credentials have expired.
    for (let i = 0; i < ROTATIONS; i++) {
      clock.advance((JWKS_MAX_AGE_SECONDS + 1) * 1000);
      const rotated = await issuer.client.rotateSigningKeys({ requestedBy: 'usr_paging' });
      expect(rotated.rotated).toBe(true);
    }
  }, 120_000);

  afterAll(async () => {
    await issuer?.stop();
    await database?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  async function walk<T>(
    list: (cursor: string) => Promise<{ items: T[]; nextCursor: string }>,
    limit: number,
  ): Promise<T[][]> {
    const pages: T[][] = [];
    let cursor = '';
    do {
      const page = await list(cursor);
      pages.push(page.items);
      cursor = page.nextCursor;
      expect(pages.length).toBeLessThanOrEqual(100);
    } while (cursor !== '');
    for (const page of pages.slice(0, -1)) expect(page).toHaveLength(limit);
    return pages;
  }

  it('pages relays: static ones first, then registered ones oldest first, at every page size', async () => {
    const whole = (await issuer.service.relays.list()).map((r) => r.id);
    expect(whole.slice(0, 3)).toEqual(STATIC.map((r) => r.id));
    expect(whole).toHaveLength(STATIC.length + REGISTERED);
    for (let limit = 1; limit <= whole.length + 1; limit++) {
      const pages = await walk(async (cursor) => {
        const res = await issuer.client.listRelays({ limit, cursor });
        return { items: res.relays.map((r) => r.id), nextCursor: res.nextCursor };
      }, limit);
      expect(pages.flat(), `limit ${limit}`).toEqual(whole);
      expect(pages.at(-1)?.length, `limit ${limit}`).toBeGreaterThan(0);
    }
    // 0 is the default (50): one page here.
    expect((await issuer.client.listRelays({})).relays.map((r) => r.id)).toEqual(whole);
  });

  it('pages signing keys in listing order (active, next, previous, removed) at every page size', async () => {
    const whole = (await issuer.service.keys.list()).keys.map((k) => k.kid);
    expect(whole).toHaveLength(ROTATIONS + 2);
    for (const limit of [1, 2, 3, 5, 7, 16, 31, 32, 33, 200]) {
      const pages = await walk(async (cursor) => {
        const res = await issuer.client.listSigningKeys({ limit, cursor });
        return { items: res.keys.map((k) => k.kid), nextCursor: res.nextCursor };
      }, limit);
      expect(pages.flat(), `limit ${limit}`).toEqual(whole);
    }
    const states = (await issuer.client.listSigningKeys({ limit: 200 })).keys.map((k) => k.state);
    expect(states.slice(0, 3)).toEqual([KeyState.ACTIVE, KeyState.NEXT, KeyState.PREVIOUS]);
    expect(states.at(-1)).toBe(KeyState.REMOVED);
  });

  it('answers the first page after a rotation, with the cursor of the rest', async () => {
    clock.advance((JWKS_MAX_AGE_SECONDS + 1) * 1000);
    const rotated = await issuer.client.rotateSigningKeys({ requestedBy: 'usr_paging' });
    const whole = (await issuer.service.keys.list()).keys.map((k) => k.kid);
    expect(whole).toHaveLength(ROTATIONS + 3);
    expect(rotated.keys.map((k) => k.kid)).toEqual(whole);
    expect(rotated.nextCursor).toBe('');
  });

  it('refuses a limit outside 0..200 and any cursor it did not answer', async () => {
    for (const limit of [201, -1]) {
      for (const call of [issuer.client.listRelays({ limit }), issuer.client.listSigningKeys({ limit })]) {
        const err = await rejection(call);
        expect(err.code).toBe('invalid_request');
        expect(err.message).toBe('limit must be between 1 and 200');
      }
    }
    const relayCursors = [
      'x!',
      'bm90IGpzb24',
      cursorOf({}),
      cursorOf({ s: 0 }),
      cursorOf({ s: 1.5 }),
      cursorOf({ s: 1, r: [0, 'rly_00000000000000000000'] }),
      cursorOf({ r: [0, 'not-a-relay-id'] }),
      cursorOf({ r: [8.64e15 + 1, 'rly_00000000000000000000'] }),
      'A'.repeat(600),
    ];
    const keyCursors = [
      'x!',
      cursorOf([]),
      cursorOf([4, 0, 0, 'kid']),
      cursorOf([0, '0', 0, 'kid']),
      cursorOf([0, 0, 0, 'kid with spaces']),
      cursorOf({ s: 1 }),
    ];
    for (const [list, cursors] of [
      [(cursor: string) => issuer.client.listRelays({ cursor }), relayCursors],
      [(cursor: string) => issuer.client.listSigningKeys({ cursor }), keyCursors],
    ] as const) {
      for (const cursor of cursors) {
        const err = await rejection(list(cursor));
        expect(err.code, cursor).toBe('invalid_request');
        expect(err.message, cursor).toBe(CURSOR_MESSAGE);
      }
    }
  });

  it('starts on registered relays when a static-relay cursor runs past the configured ones', async () => {
    const res = await issuer.client.listRelays({ limit: 200, cursor: cursorOf({ s: STATIC.length + 5 }) });
    expect(res.relays.map((r) => r.static)).toEqual(Array(REGISTERED).fill(false));
    expect(res.nextCursor).toBe('');
  });
});
