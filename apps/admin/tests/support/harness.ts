/** Starts real billing and admin services for a test file. */
import { Writable } from 'node:stream';
import { BillingService, readBillingConfig } from '@relayplane/billing';
import { AppError } from '@relayplane/contract/errors';
import { AdminService as AdminRpc, type Principal } from '@relayplane/proto/admin';
import { BillingService as BillingRpc } from '@relayplane/proto/billing';
import { createLogger, type Logger } from '@relayplane/shared/logger';
import { connect, type ServiceClient } from '@relayplane/shared/rpc';
import { auditSink } from '@relayplane/testing/audit';
import { testLogger } from '@relayplane/testing/logger';
import { createTestDatabase, type TestDatabase } from '@relayplane/testing/storage';
import { expect } from 'vitest';
import { readAdminConfig } from '../../src/config.ts';
import { type AdminOverrides, AdminService } from '../../src/service.ts';

export const OWNER_EMAIL = 'owner@example.com';
export const OWNER_PASSWORD = 'bootstrap owner password 1';

export async function startBilling(databaseUrl: string, listen = '127.0.0.1:0'): Promise<BillingService> {
  const billing = await BillingService.create(
    readBillingConfig({ BILLING_DATABASE_URL: databaseUrl, BILLING_LISTEN_ADDRESS: listen }),
    { logger: testLogger('billing') },
  );
  await billing.start();
  return billing;
}

/** The KEK the admin tests run with (admin derives its device-token and second-factor keys from it). */
export const TEST_KEK = Buffer.alloc(32, 7).toString('base64');

export async function createAdmin(
  databaseUrl: string,
  billingAddress: string,
  env: Record<string, string> = {},
  overrides: AdminOverrides = {},
): Promise<AdminService> {
  const config = readAdminConfig({
    ADMIN_DATABASE_URL: databaseUrl,
    ADMIN_LISTEN_ADDRESS: '127.0.0.1:0',
    ADMIN_BILLING_ADDRESS: billingAddress,
    RELAYPLANE_KEK: TEST_KEK,
    ...env,
  });
  return AdminService.create(config, { logger: testLogger('admin'), ...overrides });
}

/** Real PostgreSQL, billing and admin for one test file, with a gRPC client of each service. */
export interface AdminRig {
  database: TestDatabase;
  billing: BillingService;
  billingClient: ServiceClient<typeof BillingRpc>;
  admin: AdminService;
  client: ServiceClient<typeof AdminRpc>;
  /** Closes the clients, stops the services and drops the database. */
  close(): Promise<void>;
}

export async function startAdminRig(
  label: string,
  env: Record<string, string> = {},
  overrides: AdminOverrides = {},
): Promise<AdminRig> {
  const database = await createTestDatabase(label);
  let billing: BillingService | undefined;
  let admin: AdminService | undefined;
  try {
    billing = await startBilling(database.url);
    admin = await createAdmin(database.url, `127.0.0.1:${billing.port}`, env, overrides);
    await admin.start();
  } catch (err) {
    await admin?.destroy();
    await billing?.destroy();
    await database.drop();
    throw err;
  }
  const billingClient = connect(BillingRpc, `127.0.0.1:${billing.port}`);
  const client = connect(AdminRpc, `127.0.0.1:${admin.port}`);
  const started = { billing, admin };
  return {
    database,
    billing,
    billingClient,
    admin,
    client,
    async close() {
      client.close();
      billingClient.close();
      await started.admin.destroy();
      await started.billing.destroy();
      await database.drop();
    },
  };
}

/** The principal admin answers for a fresh session of `email`. */
export async function principalFor(
  client: ServiceClient<typeof AdminRpc>,
  email: string,
  password: string,
): Promise<Principal> {
  const session = await client.login({ email, password, clientIp: '' });
  const { principal } = await client.authenticate({ token: session.token });
  if (!principal) throw new Error('no principal');
  return principal;
}

export interface CapturedLogs {
  logger: Logger;
  /** Every line written so far, as written. */
  readonly lines: string[];
  /** Resolves with the first entry (past or future) whose msg is `msg`; rejects after `timeoutMs`. */
  waitFor(msg: string, timeoutMs?: number): Promise<Record<string, unknown>>;
}

export function captureLogs(): CapturedLogs {
  const lines: string[] = [];
  const waiters: { msg: string; resolve: (entry: Record<string, unknown>) => void }[] = [];
  const find = (msg: string) =>
    lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((entry) => entry.msg === msg);
  const audit = auditSink('logs', 'admin-captured');
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      const line = chunk.toString('utf8');
      audit?.write(line);
      lines.push(line);
      const entry = JSON.parse(line) as Record<string, unknown>;
      for (const w of waiters.filter((w) => w.msg === entry.msg)) w.resolve(entry);
      done();
    },
  });
  return {
    logger: createLogger({ level: 'debug', service: 'admin' }, stream),
    lines,
    waitFor(msg, timeoutMs = 15_000) {
      const seen = find(msg);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`no log entry "${msg}" within ${timeoutMs} ms`)),
          timeoutMs,
        );
        waiters.push({
          msg,
          resolve: (entry) => {
            clearTimeout(timer);
            resolve(entry);
          },
        });
      });
    },
  };
}

/** Awaits `call` and expects it to fail with an AppError of `code` (and `message`, exact or matching). */
export async function expectAppError(
  call: Promise<unknown>,
  code: string,
  message?: string | RegExp,
): Promise<void> {
  const err = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(AppError);
  expect((err as AppError).code).toBe(code);
  if (typeof message === 'string') expect((err as AppError).message).toBe(message);
  if (message instanceof RegExp) expect((err as AppError).message).toMatch(message);
}
