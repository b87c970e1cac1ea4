/**
 * KEK rotation under load (issue 19, item 4): two issuers, one gateway, admin and billing as
 * processes on PostgreSQL and Redis. While a steady issuance load runs through the gateway,
 * the issuers are restarted one by one as a rollout after a Secret change does it: first with
 * `RELAYPLANE_KEK` = the new key and `RELAYPLANE_KEK_PREVIOUS` = the old one; once their gauge
 * `relayplane_issuer_signing_keys_sealed_by_previous_kek` reads 0, once more without
 * `RELAYPLANE_KEK_PREVIOUS` (the old KEK dropped).
 *
 * Asserted: every request answers 201 (0 failed); afterwards every stored private half is
 * sealed by the new KEK (its fingerprint on the row, and plain AES-256-GCM under the new KEK
 * opens it, under the old one not); the signing keys are the same ones throughout (a KEK
 * rotation re-encrypts, it does not replace keys); credentials signed before, during and after
 * verify against the gateway's JWKS.
 */
import { createDecipheriv, createHash } from 'node:crypto';
import { hasMetric, sampleValue, scrape } from '@relayplane/testing/metrics';
import {
  createTestDatabase,
  createTestRedis,
  type TestDatabase,
  type TestRedis,
} from '@relayplane/testing/storage';
import { createLocalJWKSet, jwtVerify } from 'jose';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLoadClient } from '../rollout/load-client.ts';
import { Api } from '../support/api.ts';
import { type Distributed, startDistributed } from '../support/distributed.ts';
import { freePort, waitFor } from '../support/ports.ts';

const OWNER = { email: 'kek@example.test', password: 'kek rotation password' };
const OLD = Buffer.alloc(32, 21);
const NEW = Buffer.alloc(32, 22);
/** Issuance requests per second of the load. */
const RATE = 100;
const STEADY_MS = 2_000;
const GAUGE = 'relayplane_issuer_signing_keys_sealed_by_previous_kek';
const RESEALED = 'relayplane_issuer_signing_keys_resealed_total';

/** deploy/README.md's fingerprint: the first 16 hex digits of the SHA-256 of the KEK's bytes. */
const fingerprint = (kek: Buffer) => createHash('sha256').update(kek).digest('hex').slice(0, 16);

interface Outcome {
  phase: string;
  status: number;
  token?: string;
  error?: string;
}

/** Open-loop load: `rate` requests per second whatever the answers take, to one gateway. */
function startLoad(url: string, key: string, rate: number) {
  const http = createLoadClient();
  const outcomes: Outcome[] = [];
  const inFlight = new Set<Promise<void>>();
  const startedAt = performance.now();
  let sent = 0;
  const load = {
    phase: 'steady',
    async stop(): Promise<Outcome[]> {
      clearInterval(timer);
      await Promise.all(inFlight);
      http.close();
      return outcomes;
    },
  };
  const send = async (phase: string) => {
    try {
      const res = await http.post(
        `${url}/api/v1/credentials`,
        { 'x-api-key': key, 'content-type': 'application/json' },
        '{"ttl_seconds":600}',
      );
      let body: { token?: string; error?: string } = {};
      try {
        body = JSON.parse(res.text);
      } catch {
        // Not JSON: the status says enough.
      }
      outcomes.push({ phase, status: res.status, token: body.token, error: body.error });
    } catch (err) {
      outcomes.push({ phase, status: 0, error: String(err) });
    }
  };
  const timer = setInterval(() => {
    const due = Math.floor(((performance.now() - startedAt) * rate) / 1000);
    for (; sent < due; sent++) {
      const p = send(load.phase);
      inFlight.add(p);
      void p.finally(() => inFlight.delete(p));
    }
  }, 5);
  return load;
}

const loadFor = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('KEK rotation under a steady issuance load with 2 issuers', () => {
  let database: TestDatabase;
  let redis: TestRedis;
  let system: Distributed;
  let api: Api;
  let db: pg.Client;
  let apiKey: string;

  /** The live signing keys as stored: kid, fingerprint and sealed private half. */
  const liveKeys = async () =>
    (
      await db.query<{
        kid: string;
        kek_fingerprint: string;
        private_iv: Buffer;
        private_ciphertext: Buffer;
        private_tag: Buffer;
      }>(
        'select kid, kek_fingerprint, private_iv, private_ciphertext, private_tag from issuer.signing_keys where removed_at is null order by created_at, kid',
      )
    ).rows;

  beforeAll(async () => {
    database = await createTestDatabase('e2e_kek');
    redis = createTestRedis('e2e_kek');
    system = await startDistributed({
      label: 'kek',
      databaseUrl: database.url,
      redisUrl: redis.url,
      redisPrefix: redis.prefix,
      kek: OLD.toString('base64'),
      bootstrap: OWNER,
      replicas: { issuer: 2 },
      appEnv: { issuer: { ISSUER_KEY_MAINTENANCE_INTERVAL_SECONDS: '1' } },
    });
    api = await Api.connect(system.baseUrl);
    db = new pg.Client({ connectionString: database.url });
    await db.connect();
    const login = await api.request('POST', '/admin/v1/auth/login', { body: OWNER });
    const auth = { authorization: `Bearer ${login.body.token}` };
    const project = await api.request('POST', '/admin/v1/projects', { headers: auth, body: { name: 'kek' } });
    const key = await api.request('POST', `/admin/v1/projects/${project.body.id}/api-keys`, {
      headers: auth,
      body: { scopes: ['relay:session'] },
    });
    expect(key.status).toBe(201);
    apiKey = key.body.key;
  }, 120_000);

  afterAll(async () => {
    await db?.end();
    const codes = (await system?.stop()) ?? [];
    await redis?.clean();
    await database?.drop();
    expect(codes).toEqual(system.procs.map(() => 0));
  });

  it('restarts the issuers with the new KEK and the old one as previous, then without it: 0 failed requests, every key sealed by the new KEK', async () => {
    const before = await liveKeys();
    expect(before.length).toBeGreaterThanOrEqual(2);
    expect(new Set(before.map((k) => k.kek_fingerprint))).toEqual(new Set([fingerprint(OLD)]));
    const jwksBefore = (await api.request('GET', '/v1/credentials/jwks')).body;
    const issuers = () => system.procs.filter((p) => p.name.startsWith('kek-issuer-'));
    expect(issuers()).toHaveLength(2);
    const metricsUrls: string[] = [];

    const load = startLoad(system.baseUrl, apiKey, RATE);
    let outcomes: Outcome[] = [];
    const phases: string[] = ['steady'];
    try {
      await loadFor(STEADY_MS);
      // Step 1: KEK=new, KEK_PREVIOUS=old, one issuer at a time (each gets a metrics port).
      for (const proc of issuers()) {
        const port = await freePort();
        metricsUrls.push(`http://127.0.0.1:${port}/metrics`);
        load.phase = `${proc.name} new+previous`;
        phases.push(load.phase);
        await system.restart(proc, {
          RELAYPLANE_KEK: NEW.toString('base64'),
          RELAYPLANE_KEK_PREVIOUS: OLD.toString('base64'),
          ISSUER_METRICS_ADDRESS: `127.0.0.1:${port}`,
        });
      }
      // Step 2: wait for every issuer's gauge to read 0.
      load.phase = 'resealed';
      phases.push(load.phase);
      await waitFor(
        async () => {
          const texts = await Promise.all(metricsUrls.map(scrape));
          return texts.every((t) => hasMetric(t, GAUGE, 'gauge') && sampleValue(t, GAUGE) === 0);
        },
        15_000,
        'every issuer to report 0 keys sealed by a previous KEK',
      );
      const texts = await Promise.all(metricsUrls.map(scrape));
      const resealed = texts.reduce((sum, t) => sum + sampleValue(t, RESEALED), 0);
      console.log(
        `KEK rotation: ${resealed} signing keys re-encrypted (by replica: ${texts.map((t) => sampleValue(t, RESEALED)).join(', ')})`,
      );
      expect(resealed).toBe(before.length);
      await loadFor(STEADY_MS);
      // Step 3: the old KEK dropped: KEK=new alone.
      for (const proc of issuers()) {
        load.phase = `${proc.name} new only`;
        phases.push(load.phase);
        await system.restart(proc, { RELAYPLANE_KEK_PREVIOUS: '' });
      }
      load.phase = 'after';
      phases.push(load.phase);
      await loadFor(STEADY_MS);
    } finally {
      outcomes = await load.stop();
    }

    const byPhase = phases.map((phase) => {
      const of = outcomes.filter((o) => o.phase === phase);
      const counts: Record<number, number> = {};
      for (const o of of) counts[o.status] = (counts[o.status] ?? 0) + 1;
      return `${phase}: ${of.length} ${JSON.stringify(counts)}`;
    });
    console.log(`KEK rotation under ${RATE} issuances/s: ${outcomes.length} requests; ${byPhase.join('; ')}`);
    const failed = outcomes.filter((o) => o.status !== 201);
    expect(failed.slice(0, 5), `failed requests (${failed.length})`).toEqual([]);
    for (const phase of phases) {
      expect(outcomes.filter((o) => o.phase === phase && o.status === 201).length, phase).toBeGreaterThan(0);
    }

    // Every live key sealed by the new KEK: the recorded fingerprint, and plain AES says so.
    const after = await liveKeys();
    expect(after.map((k) => k.kid)).toEqual(before.map((k) => k.kid));
    for (const key of after) {
      expect(key.kek_fingerprint).toBe(fingerprint(NEW));
      const open = (kek: Buffer) => {
        const decipher = createDecipheriv('aes-256-gcm', kek, key.private_iv);
        decipher.setAAD(Buffer.from(key.kid));
        decipher.setAuthTag(key.private_tag);
        return Buffer.concat([decipher.update(key.private_ciphertext), decipher.final()]);
      };
      expect(open(NEW).length).toBeGreaterThan(0);
      expect(() => open(OLD)).toThrow();
    }

    // The same signing keys published; credentials from every phase verify against them.
    const jwks = await api.request('GET', '/v1/credentials/jwks');
    expect(jwks.body).toEqual(jwksBefore);
    const keySet = createLocalJWKSet(jwks.body);
    for (const phase of phases) {
      const token = outcomes.find((o) => o.phase === phase && o.token)?.token ?? '';
      const { protectedHeader } = await jwtVerify(token, keySet, { algorithms: ['EdDSA'] });
      expect(before.map((k) => k.kid)).toContain(protectedHeader.kid);
    }
  }, 240_000);
});
