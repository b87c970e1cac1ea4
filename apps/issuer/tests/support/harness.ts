import { createHash, randomBytes } from 'node:crypto';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { AppError } from '@relayplane/contract/errors';
import { newId } from '@relayplane/contract/ids';
import { type IssueCredentialRequestSchema, IssuerService } from '@relayplane/proto/issuer';
import type { Clock } from '@relayplane/shared/clock';
import { connect, type ServiceClient } from '@relayplane/shared/rpc';
import { testLogger } from '@relayplane/testing/logger';
import type { TestRedis } from '@relayplane/testing/storage';
import { sql } from 'kysely';
import { expect } from 'vitest';
import { type IssuerConfigOverrides, readIssuerConfig } from '../../src/config.ts';
import { IssuerApp, type IssuerOverrides } from '../../src/service.ts';

export interface RunningIssuer {
  service: IssuerApp;
  client: ServiceClient<typeof IssuerService>;
  stop(): Promise<void>;
}

export function newKek(): Buffer {
  return randomBytes(32);
}

/** Builds an issuer on `databaseUrl` through the real config reader, starts it and connects a client. */
export async function startIssuer(options: {
  databaseUrl: string;
  clock: Clock;
  kek: Buffer;
  redis?: TestRedis;
  env?: Record<string, string>;
  /** Config sections replaced after reading the environment (e.g. static relays). */
  config?: IssuerConfigOverrides;
  /** Service overrides (fault injection: slot store, signer). */
  overrides?: Omit<IssuerOverrides, 'logger' | 'clock'>;
}): Promise<RunningIssuer> {
  const env: Record<string, string> = {
    ISSUER_DATABASE_URL: options.databaseUrl,
    ISSUER_LISTEN_ADDRESS: '127.0.0.1:0',
    RELAYPLANE_KEK: options.kek.toString('base64'),
    ...(options.redis
      ? { ISSUER_REDIS_URL: options.redis.url, ISSUER_REDIS_PREFIX: options.redis.prefix }
      : {}),
    ...options.env,
  };
  const config = readIssuerConfig(env, { ...(options.redis ? {} : { redis: undefined }), ...options.config });
  const service = await IssuerApp.create(config, {
    logger: testLogger('issuer'),
    clock: options.clock,
    ...options.overrides,
  });
  try {
    await service.start();
  } catch (err) {
    await service.destroy();
    throw err;
  }
  // No channel retries: these tests look at the issuer's own answers, failures included.
  const client = connect(IssuerService, `127.0.0.1:${service.port}`, { retries: false });
  return {
    service,
    client,
    async stop() {
      client.close();
      await service.destroy();
    },
  };
}

export interface RawKeyRow {
  kid: string;
  x: string;
  kek_fingerprint: string;
  private_iv: Uint8Array | null;
  private_ciphertext: Uint8Array | null;
  private_tag: Uint8Array | null;
  created_at: Date;
  activated_at: Date | null;
  deactivated_at: Date | null;
  remove_after: Date | null;
  removed_at: Date | null;
}

/** Every row of the keys table, read with a raw query (no store code involved). */
export async function rawKeyRows(service: IssuerApp): Promise<RawKeyRow[]> {
  const result = await sql<RawKeyRow>`select * from issuer.signing_keys order by created_at, kid`.execute(
    service.database.db,
  );
  return result.rows;
}

/** RFC 7638 thumbprint computed here, independently of the service (which uses jose). */
export function rfc7638Thumbprint(x: string): string {
  return createHash('sha256').update(`{"crv":"Ed25519","kty":"OKP","x":"${x}"}`).digest('base64url');
}

/** Polls `probe` until it returns a value (not undefined) or `timeoutMs` passes. */
export async function eventually<T>(
  probe: () => Promise<T | undefined>,
  what: string,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export const seconds = (n: number) => n * 1000;

/** The AppError `promise` rejects with (fails the test if it resolves or fails otherwise). */
export async function rejection(promise: Promise<unknown>): Promise<AppError> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(AppError);
    return err as AppError;
  }
  throw new Error('expected the call to fail');
}

/** The jtis of `tenantId`'s credential rows, read with a raw query (no store code involved). */
export async function credentialJtis(service: IssuerApp, tenantId: string): Promise<string[]> {
  const result = await sql<{
    jti: string;
  }>`select jti from issuer.credentials where tenant_id = ${tenantId}`.execute(service.database.db);
  return result.rows.map((r) => r.jti);
}

export interface CredentialRowInit {
  tenant: string;
  project: string;
  issued: Date | string;
  expires: Date | string;
  revoked?: Date | string;
}

/** Inserts credential rows directly: exact instants, no issuance path involved. */
export async function insertCredentials(service: IssuerApp, rows: CredentialRowInit[]): Promise<void> {
  const kid = service.keys.activeSigningKey().kid;
  await service.database.db
    .insertInto('credentials')
    .values(
      rows.map((r) => ({
        jti: newId('session').replace('ses_', 'crd_'),
        tenant_id: r.tenant,
        project_id: r.project,
        api_key_id: newId('apiKey'),
        kid,
        mode: 'live' as const,
        scopes: 'relay:session',
        issued_at: new Date(r.issued),
        expires_at: new Date(r.expires),
        revoked_at: r.revoked === undefined ? null : new Date(r.revoked),
      })),
    )
    .execute();
}

export type IssueInit = Omit<MessageInitShape<typeof IssueCredentialRequestSchema>, '$typeName'>;

/** A valid live request of a project's API key (the session scope, 600 s, cap 5); `over` replaces fields. */
export function issueRequest(
  key: { tenantId: string; projectId: string; apiKeyId: string },
  over: IssueInit = {},
): IssueInit {
  return {
    ...key,
    mode: 'live',
    scopes: ['relay:session'],
    ttlSeconds: 600,
    region: '',
    maxConcurrentConnections: 5,
    ...over,
  };
}
