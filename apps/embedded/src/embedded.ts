/**
 * The embedded composition root: the four services in one process, on PGlite (Postgres in
 * WASM) under one data directory, with the in-process bus and scheduler standing in for Redis
 * and bullmq. They talk through the in-process transport (`in-process:` addresses,
 * @relayplane/proto's in-process.ts): the same clients, hooks, deadlines and errors as over
 * gRPC, without sockets or encoding, and no port is opened but the gateway's. Services do not
 * know which mode they run in.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { AdminService, ensureAuditKeyFile, readAdminConfig } from '@relayplane/admin';
import { BillingService, readBillingConfig } from '@relayplane/billing';
import { SERVICES } from '@relayplane/contract/contract';
import { GatewayService, readGatewayConfig } from '@relayplane/gateway';
import { DEMO_RELAYS, IssuerApp, loadOrCreateKek, readIssuerConfig } from '@relayplane/issuer';
import { DeferredAuditAdmin } from '@relayplane/shared/audit-outbox';
import { MemoryBus } from '@relayplane/shared/bus';
import { EnvReader, LOG_LEVELS } from '@relayplane/shared/config';
import { createLogger } from '@relayplane/shared/logger';
import { MemoryScheduler } from '@relayplane/shared/scheduler';

type Env = Readonly<Record<string, string | undefined>>;

export interface EmbeddedInfo {
  url: string;
  dataDir: string;
  /**
   * Set when this start created the first owner with generated credentials; the password is
   * also in `passwordFile` (mode 0600).
   */
  generatedLogin: { email: string; password: string; passwordFile: string } | undefined;
  bootstrapEmail: string | undefined;
  kekGenerated: boolean;
  /** How plan changes are paid for: the billing provider, and whether built-in checkout confirms paid plans. */
  billing: { provider: 'builtin' | 'stripe'; paidCheckout: boolean };
}

export class Embedded {
  readonly #gateway: GatewayService;
  readonly #services: { destroy(): Promise<void> }[];
  readonly #bus: MemoryBus;
  readonly info: EmbeddedInfo;

  private constructor(
    gateway: GatewayService,
    services: { destroy(): Promise<void> }[],
    bus: MemoryBus,
    info: EmbeddedInfo,
  ) {
    this.#gateway = gateway;
    this.#services = services;
    this.#bus = bus;
    this.info = info;
  }

  /** Creates and starts everything. */
  static async start(env: Env): Promise<Embedded> {
    const r = new EnvReader(env);
    const dataDir = resolve(r.string('RELAYPLANE_DATA_DIR', './.relayplane'));
    const logLevel = r.oneOf('LOG_LEVEL', LOG_LEVELS, 'info');
    // In-process addresses are process-wide names: each start gets its own.
    const instance = randomBytes(6).toString('hex');
    const address = (service: string) => `in-process:${instance}/${service}`;

    // The first owner: from the environment, or generated (and printed) when none exists yet.
    const givenEmail = r.optional('RELAYPLANE_BOOTSTRAP_EMAIL');
    const generated = givenEmail
      ? undefined
      : { email: 'admin@relayplane.local', password: randomBytes(18).toString('base64url') };
    const bootstrapEnv: Env = generated
      ? {
          ...env,
          RELAYPLANE_BOOTSTRAP_EMAIL: generated.email,
          RELAYPLANE_BOOTSTRAP_PASSWORD: generated.password,
        }
      : env;

    const kek = r.has('RELAYPLANE_KEK') ? undefined : loadOrCreateKek(join(dataDir, SERVICES.issuer));
    const bus = new MemoryBus();
    // Issuer and billing deliver their audit events to admin, which starts after them (it needs
    // billing, billing needs the issuer): their outboxes keep the events until it listens.
    // One client per delivering service: admin takes each event's source from its caller.
    const auditAdmin = { issuer: new DeferredAuditAdmin(), billing: new DeferredAuditAdmin() };
    const started: { destroy(): Promise<void> }[] = [];
    try {
      const issuerLogger = createLogger({ level: logLevel, service: SERVICES.issuer });
      const issuer = await IssuerApp.create(
        readIssuerConfig(env, {
          listen: address(SERVICES.issuer),
          database: { kind: 'pglite', dataDir: join(dataDir, SERVICES.issuer, 'db') },
          redis: undefined,
          // In-process links: no mutual TLS, no separate health listener, whatever the env says.
          grpcTls: undefined,
          healthListen: undefined,
          ...(kek ? { kek: kek.kek } : {}),
          // Demo relays on loopback so a fresh start can issue at once; a relays file replaces them.
          ...(r.has('RELAYPLANE_RELAYS_FILE') ? {} : { relays: DEMO_RELAYS }),
          logLevel,
        }),
        { logger: issuerLogger, bus, scheduler: new MemoryScheduler(issuerLogger), admin: auditAdmin.issuer },
      );
      await issuer.start();
      started.push(issuer);

      // Billing reads usage from the issuer, so the issuer starts first.
      const billingLogger = createLogger({ level: logLevel, service: SERVICES.billing });
      const billing = await BillingService.create(
        readBillingConfig(env, {
          listen: address(SERVICES.billing),
          database: { kind: 'pglite', dataDir: join(dataDir, SERVICES.billing) },
          redis: undefined,
          issuerAddress: address(SERVICES.issuer),
          grpcTls: undefined,
          healthListen: undefined,
          logLevel,
        }),
        {
          logger: billingLogger,
          bus,
          scheduler: new MemoryScheduler(billingLogger),
          admin: auditAdmin.billing,
        },
      );
      await billing.start();
      started.push(billing);

      const admin = await AdminService.create(
        readAdminConfig(bootstrapEnv, {
          listen: address(SERVICES.admin),
          database: { kind: 'pglite', dataDir: join(dataDir, SERVICES.admin) },
          billingAddress: address(SERVICES.billing),
          redis: undefined,
          grpcTls: undefined,
          healthListen: undefined,
          // The issuer's KEK: admin derives its own keys from it.
          ...(kek ? { kek: kek.kek } : {}),
          // The audit key, out of the database like the KEK: a file of its own in the data directory.
          ...(r.has('RELAYPLANE_AUDIT_SIGNING_KEY_FILE')
            ? {}
            : { auditSigningKeyFile: ensureAuditKeyFile(dataDir) }),
          logLevel,
        }),
        { logger: createLogger({ level: logLevel, service: SERVICES.admin }), bus },
      );
      await admin.start();
      started.push(admin);
      auditAdmin.issuer.connectTo(address(SERVICES.admin), SERVICES.issuer);
      auditAdmin.billing.connectTo(address(SERVICES.admin), SERVICES.billing);
      // Last to stop: the services' outboxes may still deliver while they drain.
      started.unshift({
        destroy: async () => {
          auditAdmin.issuer.close();
          auditAdmin.billing.close();
        },
      });
      issuer.audit.kick();
      billing.audit.kick();

      const gateway = await GatewayService.create(
        readGatewayConfig(env, {
          services: {
            admin: address(SERVICES.admin),
            issuer: address(SERVICES.issuer),
            billing: address(SERVICES.billing),
          },
          redis: undefined,
          grpcTls: undefined,
          logLevel,
        }),
        { logger: createLogger({ level: logLevel, service: SERVICES.gateway }), bus },
      );
      await gateway.start();

      const created = admin.bootstrapped;
      // The generated password goes to a file only its owner can read, so that it never has to
      // reach a log: the banner names the file (and shows the password only on a terminal).
      const generatedLogin =
        generated && created
          ? { ...generated, passwordFile: writePasswordFile(dataDir, generated.password) }
          : undefined;
      return new Embedded(gateway, started.reverse(), bus, {
        url: gateway.url,
        dataDir,
        generatedLogin,
        bootstrapEmail: created ? (generated?.email ?? givenEmail) : undefined,
        kekGenerated: kek?.created ?? false,
        billing: {
          provider: billing.config.provider.kind,
          paidCheckout: billing.config.provider.kind === 'builtin' && billing.config.provider.paidCheckout,
        },
      });
    } catch (err) {
      for (const s of started.reverse()) await s.destroy().catch(() => {});
      auditAdmin.issuer.close();
      auditAdmin.billing.close();
      await bus.close();
      throw err;
    }
  }

  get url(): string {
    return this.#gateway.url;
  }

  /** Gateway first (stop accepting, finish in-flight requests), then the services, then the bus. */
  async destroy(): Promise<void> {
    await this.#gateway.destroy();
    for (const s of this.#services) await s.destroy();
    await this.#bus.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.destroy();
  }
}

/** `<dataDir>/initial-owner-password`, mode 0600 (the directory 0700 when created here). */
function writePasswordFile(dataDir: string, password: string): string {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const file = join(dataDir, 'initial-owner-password');
  writeFileSync(file, `${password}\n`, { mode: 0o600 });
  return file;
}
