/** Starts real billing and admin services for a test file. */
import { Writable } from 'node:stream';
import { BillingService, readBillingConfig } from '@relayplane/billing';
import { AppError } from '@relayplane/shared/errors';
import { createLogger, type Logger } from '@relayplane/shared/logger';
import { auditSink } from '@relayplane/testing/audit';
import { testLogger } from '@relayplane/testing/logger';
import { expect } from 'vitest';
import { readAdminConfig } from '../src/config.ts';
import { type AdminOverrides, AdminService } from '../src/service.ts';

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
    ...env,
  });
  return AdminService.create(config, { logger: testLogger('admin'), ...overrides });
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
