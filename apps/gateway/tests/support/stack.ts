/**
 * The real services behind a gateway app for route tests: billing, admin and issuer on a
 * fresh PostgreSQL database (each in its own schema) and a Redis key prefix, the gateway
 * built with `buildApp` on its own context (support/app.ts) and driven through `inject()`.
 */
import { AdminService, readAdminConfig } from '@relayplane/admin';
import { BillingService, readBillingConfig } from '@relayplane/billing';
import { IssuerApp, readIssuerConfig } from '@relayplane/issuer';
import { RedisBus } from '@relayplane/shared/bus';
import type { Clock } from '@relayplane/shared/clock';
import type { Logger } from '@relayplane/shared/logger';
import { createRegistry, type Registry } from '@relayplane/shared/metrics';
import { createRedis } from '@relayplane/shared/redis';
import { testLogger } from '@relayplane/testing/logger';
import { createTestDatabase, createTestRedis } from '@relayplane/testing/storage';
import type { FastifyInstance } from 'fastify';
import type { ServedRoute } from '../../src/app.ts';
import { closeClients, connectClients, type GatewayClients } from '../../src/clients.ts';
import type { SlowClientLimits } from '../../src/plugins/slow-clients.ts';
import { testApp } from './app.ts';

export const OWNER = { email: 'owner@example.test', password: 'correct horse battery staple' };

export interface Stack {
  app: FastifyInstance;
  routes: ServedRoute[];
  clients: GatewayClients;
  billing: BillingService;
  admin: AdminService;
  issuer: IssuerApp;
  /** The gateway app's metrics registry (HTTP request metrics). */
  metrics: Registry;
  /** Logs in and returns a bearer header for the bootstrap owner (a platform admin). */
  ownerAuth(): Promise<{ authorization: string }>;
  close(): Promise<void>;
}

export interface StackOptions {
  trustedProxies?: string[];
  /** Billing, admin and issuer serve their metrics on a free loopback port (`metricsPort`). */
  serveMetrics?: boolean;
  /** The admin service's clock (session expiry); default the system clock. */
  adminClock?: Clock;
  /** Admin's variables on top of the stack's (e.g. login or sign-up limits). */
  adminEnv?: Record<string, string>;
  /** The issuer's variables on top of the stack's (e.g. a short relay-session cadence). */
  issuerEnv?: Record<string, string>;
  /** Billing's variables on top of the stack's (e.g. a plans file). */
  billingEnv?: Record<string, string>;
  /** The gateway app's logger (e.g. one that captures its lines); default a test logger. */
  gatewayLogger?: Logger;
  /** The gateway's header, request and keep-alive timeouts and connection cap; default the app's. */
  slowClients?: Partial<SlowClientLimits>;
}

export async function startStack(label: string, options: StackOptions = {}): Promise<Stack> {
  const database = await createTestDatabase(label);
  const redis = createTestRedis(label);
  const logger = testLogger('gateway');
  const env = {
    DATABASE_URL: database.url,
    REDIS_URL: redis.url,
    RELAYPLANE_REDIS_PREFIX: redis.prefix,
    RELAYPLANE_KEK: Buffer.alloc(32, 7).toString('base64'),
    RELAYPLANE_BOOTSTRAP_EMAIL: OWNER.email,
    RELAYPLANE_BOOTSTRAP_PASSWORD: OWNER.password,
    RELAYPLANE_BOOTSTRAP_TENANT: 'acme',
    // Route tests sign up many tenants, all from inject's 127.0.0.1: the per-IP sign-up limit
    // (default 10 per hour) must not be the one that bites. login-throttle.test.ts sets its own.
    ADMIN_SIGNUP_MAX_PER_IP: '100000',
    ...options.adminEnv,
  };
  const metricsAddress = options.serveMetrics ? '127.0.0.1:0' : undefined;
  const closers: (() => Promise<void>)[] = [];
  try {
    const issuerEnv = { ...env, ...options.issuerEnv };
    const issuer = await IssuerApp.create(
      readIssuerConfig(issuerEnv, { listen: '127.0.0.1:0', metricsAddress }),
      {
        logger: testLogger('issuer'),
      },
    );
    await issuer.start();
    closers.push(() => issuer.destroy());

    const billing = await BillingService.create(
      readBillingConfig(
        { ...env, ...options.billingEnv },
        {
          listen: '127.0.0.1:0',
          metricsAddress,
          issuerAddress: `127.0.0.1:${issuer.port}`,
        },
      ),
      {
        logger: testLogger('billing'),
      },
    );
    await billing.start();
    closers.push(() => billing.destroy());
    const admin = await AdminService.create(
      readAdminConfig(env, {
        listen: '127.0.0.1:0',
        billingAddress: `127.0.0.1:${billing.port}`,
        metricsAddress,
      }),
      { logger: testLogger('admin'), clock: options.adminClock },
    );
    await admin.start();
    closers.push(() => admin.destroy());
    const clients = connectClients(
      {
        admin: `127.0.0.1:${admin.port}`,
        issuer: `127.0.0.1:${issuer.port}`,
        billing: `127.0.0.1:${billing.port}`,
      },
      5_000,
    );
    closers.push(async () => closeClients(clients));
    const bus = new RedisBus(
      createRedis(redis, logger, 'pub'),
      createRedis(redis, logger, 'sub'),
      redis.prefix,
    );
    closers.push(() => bus.close());
    const metrics = createRegistry();
    const gateway = await testApp({
      config: {
        bodyLimitBytes: 64 * 1024,
        jwksCacheMs: 10_000,
        trustedProxies: options.trustedProxies ?? [],
        ...options.slowClients,
      },
      clients,
      logger: options.gatewayLogger ?? logger,
      bus,
      metrics,
    });
    closers.push(() => gateway.close());
    const { app, routes } = gateway;

    let ownerToken: string | undefined;
    return {
      app,
      routes,
      clients,
      billing,
      admin,
      issuer,
      metrics,
      async ownerAuth() {
        if (!ownerToken) {
          const res = await app.inject({ method: 'POST', url: '/admin/v1/auth/login', payload: OWNER });
          if (res.statusCode !== 200) throw new Error(`owner login failed: ${res.statusCode} ${res.body}`);
          ownerToken = res.json<{ token: string }>().token;
        }
        return { authorization: `Bearer ${ownerToken}` };
      },
      async close() {
        for (const c of closers.reverse()) await c().catch(() => {});
        await redis.clean();
        await database.drop();
      },
    };
  } catch (err) {
    for (const c of closers.reverse()) await c().catch(() => {});
    await database.drop();
    throw err;
  }
}
