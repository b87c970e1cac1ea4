/**
 * The backup and restore drill of deploy/README.md ("Backup and restore"), end to end. A live
 * system (billing, admin, issuer and gateway as processes on PostgreSQL and Redis) gets what an
 * operator has to get back: an owner, a project, an API key, a relay, credentials (one revoked)
 * and a pending key rotation. The runbook's own pg_dump block dumps it while it serves; the
 * system stops; the runbook's pg_restore block restores the dump into a fresh database; the
 * apps start on it with the same KEK and a Redis prefix of their own (Redis is not backed up).
 *
 * Before that, an issuer is started on the restored database with another KEK, as after a
 * restore whose KEK was lost: it must refuse to run and leave the signing keys as they are. A
 * fresh key minted there would change the JWKS, and every credential already handed out would
 * stop verifying; the restored system's identical JWKS below shows that no key was minted.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createTestDatabase,
  createTestRedis,
  type TestDatabase,
  type TestRedis,
} from '@relayplane/testing/storage';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api, type ApiResponse } from '../support/api.ts';
import { type Distributed, startDistributed } from '../support/distributed.ts';
import { freePort, waitFor } from '../support/ports.ts';
import { ROOT, type SystemOptions, startProcess, systemEnv } from '../support/processes.ts';
import { runShell, shellBlocks } from '../support/runbook.ts';

const OWNER = { email: 'ops@example.test', password: 'restore drill password' };
const KEK = Buffer.alloc(32, 5);
const OTHER_KEK = Buffer.alloc(32, 6);
const RUNBOOK = join(ROOT, 'deploy', 'README.md');
const RUNBOOK_SECTION = 'Backup and restore';
/** How long pg_dump, pg_restore or an issuer refusing its KEK may take. */
const STEP_TIMEOUT_MS = 20_000;
/** Credential claims the issuer signs with by default (RELAYPLANE_CREDENTIAL_ISSUER/_AUDIENCE). */
const CLAIMS = { algorithms: ['EdDSA'], issuer: 'relayplane', audience: 'relayplane-relay' };

/** How deploy/README.md identifies a KEK: the first 16 hex digits of its SHA-256. */
const fingerprint = (kek: Buffer) => createHash('sha256').update(kek).digest('hex').slice(0, 16);

interface Credential {
  token: string;
  jti: string;
}

/** What the test recorded on the live system before the dump. */
interface Recorded {
  owner: { authorization: string };
  projectId: string;
  apiKey: string;
  relay: { authorization: string };
  live: Credential[];
  revoked: Credential;
  jwks: { body: { keys: { kid: string }[] }; etag: string };
  signingKeys: { keys: unknown[]; rotation_pending_since: string | null };
  feed: { revocations: { jti: string }[]; next_cursor: number };
}

/** An issuer's attempt to start with another KEK, and the signing keys around it. */
interface OtherKekStart {
  exit: number | null | 'still running';
  output: string;
  keysBefore: string[];
  keysAfter: string[];
}

describe('backup and restore drill: pg_dump of the three schemas, restore, same KEK', () => {
  let source: TestDatabase | undefined;
  let target: TestDatabase | undefined;
  let sourceRedis: TestRedis | undefined;
  let targetRedis: TestRedis | undefined;
  let backupDir: string | undefined;
  let live: Distributed | undefined;
  let restored: Distributed | undefined;
  const exitCodes: Record<string, number | null> = {};
  let before: Recorded;
  let otherKek: OtherKekStart;
  let dumpedTables: string[];
  let api: Api;
  const apis: Api[] = [];

  beforeAll(async () => {
    const t0 = Date.now();
    const blocks = shellBlocks(RUNBOOK, RUNBOOK_SECTION);
    const dumpBlock = blockRunning(blocks, 'pg_dump');
    const restoreBlock = blockRunning(blocks, 'pg_restore');

    source = await createTestDatabase('e2e_backup');
    sourceRedis = createTestRedis('e2e_backup');
    const options = (database: TestDatabase, redis: TestRedis, label: string) => ({
      label,
      databaseUrl: database.url,
      redisUrl: redis.url,
      redisPrefix: redis.prefix,
      kek: KEK.toString('base64'),
      bootstrap: OWNER,
    });
    live = await startDistributed(options(source, sourceRedis, 'backup'));
    const liveApi = await Api.connect(live.baseUrl);
    apis.push(liveApi);
    const tStarted = Date.now();
    before = await populate(liveApi);

    backupDir = mkdtempSync(join(tmpdir(), 'rp-backup-'));
    const backupFile = join(backupDir, 'relayplane.dump');
    await runStep(dumpBlock, { DATABASE_URL: source.url, BACKUP_FILE: backupFile });
    const tDumped = Date.now();
    dumpedTables = await tablesIn(backupFile);
    await stop(live);
    live = undefined;

    target = await createTestDatabase('e2e_restore');
    await runStep(restoreBlock, { DATABASE_URL: target.url, BACKUP_FILE: backupFile });
    const tRestored = Date.now();
    targetRedis = createTestRedis('e2e_restore');
    otherKek = await startIssuerWith(OTHER_KEK, options(target, targetRedis, 'restore'));
    const tRefused = Date.now();
    restored = await startDistributed(options(target, targetRedis, 'restored'));
    api = await Api.connect(restored.baseUrl);
    apis.push(api);
    console.log(
      `restore drill: system up ${tStarted - t0} ms, populated + dumped ${tDumped - tStarted} ms, ` +
        `stopped + restored ${tRestored - tDumped} ms, other-KEK issuer refused ${tRefused - tRestored} ms, ` +
        `restored system up ${Date.now() - tRefused} ms`,
    );
  }, 90_000);

  afterAll(async () => {
    await stop(live);
    await stop(restored);
    await Promise.all([sourceRedis?.clean(), targetRedis?.clean(), source?.drop(), target?.drop()]);
    if (backupDir) rmSync(backupDir, { recursive: true, force: true });
    // Graceful shutdown on SIGTERM, before the dump and at the end: every process exits 0.
    expect(exitCodes).toEqual(Object.fromEntries(Object.keys(exitCodes).map((name) => [name, 0])));
  });

  /** SIGTERM to every process of `system`, recording their exit codes. */
  async function stop(system: Distributed | undefined): Promise<void> {
    const codes = (await system?.stop()) ?? [];
    system?.procs.forEach((p, i) => {
      exitCodes[p.name] = codes[i] ?? null;
    });
  }

  /** Everything the restore must bring back, made through the public API of the live system. */
  async function populate(gw: Api): Promise<Recorded> {
    const login = await gw.request('POST', '/admin/v1/auth/login', { body: OWNER });
    expect(login.status).toBe(200);
    const owner = { authorization: `Bearer ${login.body.token}` };
    const project = await gw.request('POST', '/admin/v1/projects', {
      headers: owner,
      body: { name: 'drill' },
    });
    expect(project.status).toBe(201);
    const key = await gw.request('POST', `/admin/v1/projects/${project.body.id}/api-keys`, {
      headers: owner,
      body: { scopes: ['relay:session'] },
    });
    expect(key.status).toBe(201);
    const relay = await gw.request('POST', '/admin/v1/relays', {
      headers: owner,
      body: { region: 'eu-west', host: 'relay.drill.example', port: 4433 },
    });
    expect(relay.status).toBe(201);

    const issued: Credential[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await issue(gw, key.body.key);
      expect(res.status).toBe(201);
      issued.push({ token: res.body.token, jti: res.body.jti });
    }
    const [revoked, ...others] = issued as [Credential, ...Credential[]];
    const revoke = await gw.request('POST', `/admin/v1/credentials/${revoked.jti}/revoke`, {
      headers: owner,
    });
    expect(revoke.status).toBe(200);

    // The next key is younger than one JWKS cache lifetime, so the rotation is recorded as
    // pending: state the restore must keep (the JWKS already holds the active and the next key).
    const rotation = await gw.request('POST', '/admin/v1/signing-keys/rotate', { headers: owner });
    expect(rotation.status).toBe(202);
    const jwks = await gw.request('GET', '/v1/credentials/jwks');
    expect(jwks.body.keys).toHaveLength(2);
    const signingKeys = await gw.request('GET', '/admin/v1/signing-keys', { headers: owner });
    expect(signingKeys.body.rotation_pending_since).not.toBeNull();
    const relayAuth = { authorization: `Bearer ${relay.body.token}` };
    const feed = await gw.request('GET', '/v1/credentials/revocations?cursor=0', { headers: relayAuth });
    expect(feed.body.revocations.map((r: { jti: string }) => r.jti)).toEqual([revoked.jti]);
    return {
      owner,
      projectId: project.body.id,
      apiKey: key.body.key,
      relay: relayAuth,
      live: others,
      revoked,
      jwks: { body: jwks.body, etag: jwks.headers.get('etag') ?? '' },
      signingKeys: signingKeys.body,
      feed: feed.body,
    };
  }

  /**
   * One issuance. A fresh system's first ones can answer 503 + Retry-After for a moment (the
   * start-up window issue 16 item 7 is about); a client retries those, so this does too, for at
   * most 5 s. Any other answer is returned as is.
   */
  async function issue(gw: Api, key: string): Promise<ApiResponse> {
    let res: ApiResponse | undefined;
    let failure: unknown;
    await waitFor(
      async () => {
        try {
          res = await gw.request('POST', '/api/v1/credentials', { headers: { 'x-api-key': key }, body: {} });
        } catch (err) {
          // An answer the OpenAPI document does not allow: report it, do not retry it away.
          failure = err;
          return true;
        }
        return res.status !== 503;
      },
      5_000,
      'issuance to answer other than 503',
    );
    if (failure) throw failure;
    return res as ApiResponse;
  }

  /**
   * Starts one issuer on the restored database with `kek`, waits (bounded) for it to exit, and
   * records the signing keys around the attempt.
   */
  async function startIssuerWith(kek: Buffer, o: SystemOptions): Promise<OtherKekStart> {
    const url = o.databaseUrl;
    const keysBefore = await signingKeyRows(url);
    const env = systemEnv(
      { ...o, kek: kek.toString('base64') },
      { billing: await freePort(), admin: await freePort() },
    );
    const proc = startProcess('restore-other-kek-issuer', 'apps/issuer/src/main.ts', {
      ...env,
      ISSUER_LISTEN_ADDRESS: `127.0.0.1:${await freePort()}`,
    });
    let timer: NodeJS.Timeout | undefined;
    try {
      const exit = await Promise.race([
        proc.exited,
        new Promise<'still running'>((resolve) => {
          timer = setTimeout(() => resolve('still running'), STEP_TIMEOUT_MS);
        }),
      ]);
      return { exit, output: proc.output(), keysBefore, keysAfter: await signingKeyRows(url) };
    } finally {
      clearTimeout(timer);
      await proc.stop();
    }
  }

  it('dumps every table the apps created, all of them in the admin, billing and issuer schemas', async () => {
    const client = new pg.Client({ connectionString: source?.url });
    await client.connect();
    try {
      const { rows } = await client.query<{ name: string }>(
        `select table_schema || '.' || table_name as name from information_schema.tables
          where table_type = 'BASE TABLE' and table_schema not in ('pg_catalog', 'information_schema')`,
      );
      expect(dumpedTables).toEqual(rows.map((r) => r.name).sort());
      expect(new Set(dumpedTables.map((t) => t.split('.')[0]))).toEqual(
        new Set(['admin', 'billing', 'issuer']),
      );
    } finally {
      await client.end();
    }
  });

  it('an issuer given another KEK exits 78 naming RELAYPLANE_KEK and both fingerprints, and mints no key', () => {
    expect(otherKek.exit).toBe(78);
    expect(otherKek.output).toContain(
      `configuration error: RELAYPLANE_KEK does not match the key-encryption key that sealed the stored signing keys (stored key fingerprint ${fingerprint(KEK)}, configured ${fingerprint(OTHER_KEK)})`,
    );
    expect(otherKek.keysBefore).toHaveLength(2);
    expect(otherKek.keysAfter).toEqual(otherKek.keysBefore);
  });

  it('serves the same JWKS: same keys and kids in the same order, same ETag (304 to a cached copy)', async () => {
    const jwks = await api.request('GET', '/v1/credentials/jwks');
    expect(jwks.status).toBe(200);
    expect(jwks.body).toEqual(before.jwks.body);
    expect(jwks.headers.get('etag')).toBe(before.jwks.etag);
    const cached = await api.request('GET', '/v1/credentials/jwks', {
      headers: { 'if-none-match': before.jwks.etag },
    });
    expect(cached.status).toBe(304);
    const keys = await api.request('GET', '/admin/v1/signing-keys', { headers: before.owner });
    expect(keys.body).toEqual(before.signingKeys);
  });

  it('credentials issued before the dump verify against the restored JWKS and are assignable', async () => {
    // The relay registered before the dump: its node token still authenticates its heartbeat.
    const heartbeat = await api.request('POST', '/v1/relays/heartbeat', {
      headers: before.relay,
      body: { load: 0.1 },
    });
    expect(heartbeat.status).toBe(200);
    const jwks = createLocalJWKSet((await api.request('GET', '/v1/credentials/jwks')).body);
    for (const { token, jti } of before.live) {
      const { payload } = await jwtVerify(token, jwks, CLAIMS);
      expect(payload).toMatchObject({ jti, pid: before.projectId });
      const assignment = await api.request('GET', '/v1/relays/assignment', {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(assignment.status).toBe(200);
      expect(assignment.body.relays.map((r: { host: string }) => r.host)).toContain('relay.drill.example');
      const introspection = await api.request('POST', '/v1/credentials/introspect', {
        headers: before.relay,
        body: { token },
      });
      expect(introspection.body).toMatchObject({ active: true, jti });
    }
  });

  it('the credential revoked before the dump stays revoked, with Redis empty: 401 at assignment, inactive, in the feed', async () => {
    const { token, jti } = before.revoked;
    const assignment = await api.request('GET', '/v1/relays/assignment', {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(assignment.status).toBe(401);
    expect(assignment.body).toEqual({ error: 'invalid or expired token' });
    const introspection = await api.request('POST', '/v1/credentials/introspect', {
      headers: before.relay,
      body: { token },
    });
    expect(introspection.body).toEqual({ active: false });
    const feed = await api.request('GET', '/v1/credentials/revocations?cursor=0', { headers: before.relay });
    expect(feed.status).toBe(200);
    expect(feed.body).toEqual(before.feed);
    expect(feed.body.revocations.map((r: { jti: string }) => r.jti)).toEqual([jti]);
  });

  it('the API key still issues credentials, signed by the restored active key; the owner logs in and the old session works', async () => {
    const res = await issue(api, before.apiKey);
    expect(res.status).toBe(201);
    expect(decodeProtectedHeader(res.body.token).kid).toBe(before.jwks.body.keys[0]?.kid);
    const jwks = createLocalJWKSet((await api.request('GET', '/v1/credentials/jwks')).body);
    await expect(jwtVerify(res.body.token, jwks, CLAIMS)).resolves.toBeDefined();

    expect((await api.request('POST', '/admin/v1/auth/login', { body: OWNER })).status).toBe(200);
    const projects = await api.request('GET', '/admin/v1/projects', { headers: before.owner });
    expect(projects.status).toBe(200);
    expect(projects.body.projects.map((p: { id: string }) => p.id)).toContain(before.projectId);
  });

  it('checked every response against the OpenAPI document', () => {
    expect(apis.reduce((n, a) => n + a.checked, 0)).toBeGreaterThan(20);
  });
});

/** The one shell block of the runbook section that runs `tool`. */
function blockRunning(blocks: string[], tool: string): string {
  const found = blocks.filter((b) => new RegExp(`^\\s*${tool}\\s`, 'm').test(b));
  if (found.length !== 1) {
    throw new Error(
      `deploy/README.md "${RUNBOOK_SECTION}" should have one sh block running ${tool}, found ${found.length}`,
    );
  }
  return found[0] as string;
}

async function runStep(script: string, env: Record<string, string>): Promise<void> {
  const { code, output } = await runShell(script, env, STEP_TIMEOUT_MS);
  if (code !== 0) throw new Error(`runbook step exited ${code}:\n${script}\n${output}`);
}

/** `<schema>.<table>` of every table in a custom-format dump, sorted (from its table of contents). */
async function tablesIn(backupFile: string): Promise<string[]> {
  const { code, output } = await runShell(
    'pg_restore --list "$BACKUP_FILE"',
    { BACKUP_FILE: backupFile },
    STEP_TIMEOUT_MS,
  );
  if (code !== 0) throw new Error(`pg_restore --list exited ${code}:\n${output}`);
  // Entries read `<id>; <class oid> <oid> TABLE <schema> <name> <owner>` (and `TABLE DATA …` for rows).
  return [...output.matchAll(/^\d+; \d+ \d+ TABLE (?!DATA )(\S+) (\S+) /gm)]
    .map((m) => `${m[1]}.${m[2]}`)
    .sort();
}

/** Each signing key's kid, KEK fingerprint and a digest of its whole row, by kid. */
async function signingKeyRows(url: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ row: string }>(
      `select kid || ' ' || kek_fingerprint || ' ' || md5(k::text) as row from issuer.signing_keys k order by kid`,
    );
    return rows.map((r) => r.row);
  } finally {
    await client.end();
  }
}
