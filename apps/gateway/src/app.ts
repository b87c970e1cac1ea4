import cookie from '@fastify/cookie';
import type { Relay } from '@relayplane/proto/issuer';
import type { Bus } from '@relayplane/shared/bus';
import { DEFAULT_THROTTLE_IPV6_PREFIX } from '@relayplane/shared/client-address';
import { BUS_CHANNELS } from '@relayplane/shared/contract';
import type { Permission } from '@relayplane/shared/iam';
import type { Logger } from '@relayplane/shared/logger';
import type { Registry } from '@relayplane/shared/metrics';
import { createLeasedRateLimiter } from '@relayplane/shared/rate-limit';
import { createRequestPathRedis } from '@relayplane/shared/redis';
import { requestIdFrom, runWithRequestContext, userAgentFrom } from '@relayplane/shared/request-context';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply } from 'fastify';
import type { GatewayClients } from './clients.ts';
import { type GatewayConfig, SLOW_CLIENT_DEFAULTS } from './config.ts';
import { EntitlementCache } from './entitlements.ts';
import { IssuanceClient } from './issuance-client.ts';
import { JwksCache } from './jwks-cache.ts';
import { lazyChildLoggerFactory } from './lazy-logger.ts';
import { documentRoute, registerOpenApi } from './openapi.ts';
import { accessLogger } from './plugins/access-log.ts';
import { type ApiKeyAuth, authGuards, guardOf } from './plugins/auth.ts';
import { refuseControlCharactersInUrl, registerErrorHandling } from './plugins/errors.ts';
import { acceptForms } from './plugins/forms.ts';
import { HttpMetrics } from './plugins/metrics.ts';
import { registerSecurityHeaders } from './plugins/security-headers.ts';
import {
  capConnections,
  capConnectionsPerAddress,
  type SlowClientLimits,
  slowClientServerOptions,
} from './plugins/slow-clients.ts';
import { registerTracing, tracingLogController } from './plugins/tracing.ts';
import { redisKeys } from './redis/keys.ts';
import { registerAllowlist } from './routes/allowlist.ts';
import { registerApiKeys } from './routes/api-keys.ts';
import { registerAudit } from './routes/audit.ts';
import { registerAuth } from './routes/auth.ts';
import { registerBilling } from './routes/billing.ts';
import { registerBots } from './routes/bots.ts';
import { registerCheckoutPage } from './routes/checkout-page.ts';
import { registerCredentialContainment } from './routes/credential-containment.ts';
import { registerCredentials, registerIntrospection } from './routes/credentials.ts';
import type { RouteDeps } from './routes/deps.ts';
import { registerDevice, registerDeviceOAuth } from './routes/device.ts';
import { registerDevicePage } from './routes/device-page.ts';
import { registerHealth } from './routes/health.ts';
import { registerIdentityTokens } from './routes/identity-tokens.ts';
import { registerJwks } from './routes/jwks.ts';
import { registerMemberships } from './routes/memberships.ts';
import { registerMfa } from './routes/mfa.ts';
import { registerPlans } from './routes/plans.ts';
import { registerProjects } from './routes/projects.ts';
import { registerRelays } from './routes/relays.ts';
import { registerSessions } from './routes/sessions.ts';
import { registerSigningKeys } from './routes/signing-keys.ts';
import { SHARED_SCHEMAS } from './schemas.ts';
import { TtlCache } from './ttl-cache.ts';

/** Bound on one issuance-rate lease command before the per-process count answers instead. */
const ISSUANCE_RATE_REDIS_TIMEOUT_MS = 250;

export interface AppDeps {
  config: Pick<GatewayConfig, 'bodyLimitBytes' | 'jwksCacheMs'> &
    Partial<
      Pick<
        GatewayConfig,
        | 'authCacheMs'
        | 'rpcTimeoutMs'
        | 'trustedProxies'
        | 'issuanceStreams'
        | 'issuanceStreamMaxAgeMs'
        | 'redis'
        | 'headersTimeoutMs'
        | 'requestTimeoutMs'
        | 'keepAliveTimeoutMs'
        | 'maxConnections'
        | 'maxConnectionsPerIp'
        | 'throttleIpv6Prefix'
      >
    >;
  clients: GatewayClients;
  logger: Logger;
  bus?: Bus;
  /** Where the HTTP request metrics go; absent: none are kept. */
  metrics?: Registry;
}

export interface ServedRoute {
  method: string;
  url: string;
  /** False for the documentation UI's own assets. */
  documented: boolean;
  /** Its guard accepts a user session: bearer or the session cookie (CSRF-checked). */
  userSession: boolean;
  /** The IAM permission its guard checks (docs/iam.md), if any. */
  permission: Permission | undefined;
}

export interface GatewayApp {
  app: FastifyInstance;
  jwks: JwksCache;
  /** Every route the app serves (HEAD twins excluded). */
  routes: ServedRoute[];
}

/** Builds the HTTP application without listening (tests drive it with `inject()`). */
export async function buildApp(deps: AppDeps): Promise<GatewayApp> {
  const httpMetrics = deps.metrics ? new HttpMetrics(deps.metrics) : undefined;
  const limits: SlowClientLimits = {
    headersTimeoutMs: deps.config.headersTimeoutMs ?? SLOW_CLIENT_DEFAULTS.headersTimeoutMs,
    requestTimeoutMs: deps.config.requestTimeoutMs ?? SLOW_CLIENT_DEFAULTS.requestTimeoutMs,
    keepAliveTimeoutMs: deps.config.keepAliveTimeoutMs ?? SLOW_CLIENT_DEFAULTS.keepAliveTimeoutMs,
    maxConnections: deps.config.maxConnections ?? SLOW_CLIENT_DEFAULTS.maxConnections,
    maxConnectionsPerIp: deps.config.maxConnectionsPerIp ?? SLOW_CLIENT_DEFAULTS.maxConnectionsPerIp,
  };
  const logController = tracingLogController();
  const app = Fastify({
    // Access log lines never show a capability URL in full (plugins/access-log.ts).
    loggerInstance: accessLogger(deps.logger) as FastifyBaseLogger,
    // With tracing on, the request's log lines are written in its span (plugins/tracing.ts).
    ...(logController ? { logController } : {}),
    // Header, request and keep-alive timeouts; slow clients answered 408 (plugins/slow-clients.ts).
    ...slowClientServerOptions(limits, deps.logger),
    // Request loggers are built only when a request logs something (lazy-logger.ts).
    childLoggerFactory: lazyChildLoggerFactory,
    bodyLimit: deps.config.bodyLimitBytes,
    genReqId: (req) => requestIdFrom(req.headers['x-request-id']),
    requestIdHeader: false,
    // X-Forwarded-For is believed only from configured proxies (proxy-addr semantics).
    trustProxy: deps.config.trustedProxies?.length ? deps.config.trustedProxies : false,
    return503OnClosing: true,
    // Errors Fastify raises before routing (a malformed URL, …) get the same envelope.
    frameworkErrors: (error, request, rawReply) => {
      const started = performance.now();
      const reply = rawReply as unknown as FastifyReply;
      const status = error.statusCode && error.statusCode < 500 ? error.statusCode : 400;
      reply
        .code(status)
        .type('application/json; charset=utf-8')
        .send(JSON.stringify({ error: error.code === 'FST_ERR_BAD_URL' ? 'malformed URL' : 'bad request' }));
      // These run no hooks: counted here, timed from this handler (routing took no measurable time).
      httpMetrics?.unrouted(request.method, status, (performance.now() - started) / 1000);
    },
    ajv: {
      // Unknown fields are rejected (not stripped) and types are not coerced: "1" is not 1.
      customOptions: { removeAdditional: false, coerceTypes: false, allErrors: true, useDefaults: true },
    },
  });
  capConnections(app.server, limits.maxConnections, deps.logger);
  capConnectionsPerAddress(
    app.server,
    {
      maxPerIp: limits.maxConnectionsPerIp ?? SLOW_CLIENT_DEFAULTS.maxConnectionsPerIp,
      ipv6Prefix: deps.config.throttleIpv6Prefix ?? DEFAULT_THROTTLE_IPV6_PREFIX,
      trustedProxies: deps.config.trustedProxies ?? [],
    },
    deps.logger,
  );
  app.decorateRequest('auth', null);
  app.decorateRequest('apiKey', null);
  app.decorateRequest('relay', null);
  // JSON bodies: Fastify's parser (prototype poisoning refused), plus no NUL characters —
  // PostgreSQL cannot store them, and a 500 must never answer bad input.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (/\\u0000/i.test(body as string)) {
      done(
        Object.assign(new Error('request body must not contain NUL characters'), { statusCode: 400 }),
        undefined,
      );
      return;
    }
    parseJson(request, body as string, done);
  });
  // JSON only: any other body (text/plain included) is answered 415.
  app.removeContentTypeParser('text/plain');
  const routes: ServedRoute[] = [];
  // Runs before the OpenAPI generator's own onRoute hook (registered later), so the document
  // shows what each route's guard implies (security, 401/403, the session cookie) and the
  // errors every route of its shape can give.
  app.addHook('onRoute', (route) => {
    const methods = [route.method].flat();
    const guard = [route.onRequest ?? []]
      .flat()
      .map(guardOf)
      .find((g) => g !== undefined);
    const documented = !(route.schema as { hide?: boolean } | undefined)?.hide;
    if (documented) {
      route.schema = documentRoute(route.schema, {
        methods,
        guard,
        commonErrors: route.config?.commonErrors !== false,
      });
    }
    for (const method of methods) {
      if (method === 'HEAD') continue;
      routes.push({
        method,
        url: route.url,
        documented,
        userSession: guard?.scheme === 'bearerAuth',
        permission: guard?.permission,
      });
    }
  });

  httpMetrics?.register(app);
  // The first onRequest hook: with tracing on, every later hook runs in the request's span (docs/tracing.md).
  registerTracing(app);
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    // The client's address and user agent travel to the services (audit events, sessions); the
    // auth guards add the actor once they know it.
    runWithRequestContext(
      {
        requestId: request.id,
        clientIp: request.ip,
        userAgent: userAgentFrom(request.headers['user-agent']),
      },
      done,
    );
  });

  registerErrorHandling(app, deps.config.bodyLimitBytes);
  // no-store unless a route sets its own Cache-Control; CSP on HTML; HSTS over HTTPS. Before
  // every route and plugin (the docs UI included), which all inherit it.
  registerSecurityHeaders(app);
  // Like NUL in a JSON body: a NUL (or other control character) in the path or query is a 400.
  refuseControlCharactersInUrl(app);
  // Parses `Cookie` for the session cookie login sets (see plugins/csrf.ts).
  // No parsing hook: session guards parse the Cookie header when they need it (sessionCookieOf).
  await app.register(cookie, { hook: false });
  for (const schema of SHARED_SCHEMAS) app.addSchema(schema);
  await registerOpenApi(app);

  const jwks = new JwksCache(deps.clients.issuer, deps.config.jwksCacheMs, deps.logger);
  if (deps.bus) await jwks.listen(deps.bus);
  // Verification results live at most `authCacheMs` (1 s): a revoked key stops working on every
  // replica within that bound even if the invalidation message is lost; the bus makes it immediate.
  const authCacheMs = deps.config.authCacheMs ?? 1_000;
  const apiKeys = new TtlCache<string, ApiKeyAuth>(authCacheMs);
  const relays = new TtlCache<string, Relay>(authCacheMs);
  const entitlements = new EntitlementCache(deps.clients.billing, authCacheMs);
  const issuance = new IssuanceClient(
    deps.clients.issuer,
    {
      timeoutMs: deps.config.rpcTimeoutMs ?? 5_000,
      streams: deps.config.issuanceStreams,
      maxAgeMs: deps.config.issuanceStreamMaxAgeMs,
    },
    deps.logger,
  );
  // max_issuance_per_second_per_key: one count per API key and second in Redis, shared by every
  // gateway, spent through leases (no round trip per request); per process while Redis fails,
  // and without Redis (embedded mode). See docs/billing.md.
  const rateRedis =
    deps.config.redis &&
    createRequestPathRedis(deps.config.redis, deps.logger, {
      name: 'gateway-issuance-rate',
      commandTimeoutMs: ISSUANCE_RATE_REDIS_TIMEOUT_MS,
    });
  const issuanceRate = createLeasedRateLimiter(
    rateRedis && deps.config.redis
      ? { connection: rateRedis, prefix: redisKeys(deps.config.redis.prefix).issuanceRate }
      : undefined,
    { windowMs: 1_000 },
    deps.logger,
    'issuance rate limit',
  );
  const unsubscribe: (() => Promise<void>)[] = [];
  if (deps.bus) {
    // Payloads: the revoked key's SHA-256; the tenant whose plan changed.
    unsubscribe.push(await deps.bus.subscribe(BUS_CHANNELS.apiKeysRevoked, (hash) => apiKeys.delete(hash)));
    unsubscribe.push(
      await deps.bus.subscribe(BUS_CHANNELS.plansChanged, (tenantId) => entitlements.invalidate(tenantId)),
    );
  }
  const shuttingDown = new AbortController();
  app.addHook('preClose', (done) => {
    shuttingDown.abort();
    done();
  });
  // While shutting down, answers close their connection: idle keep-alive sockets would
  // otherwise hold `close()` until their timeout.
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (shuttingDown.signal.aborted) reply.header('connection', 'close');
    done(null, payload);
  });
  const routeDeps: RouteDeps = {
    shutdown: shuttingDown.signal,
    clients: deps.clients,
    jwks,
    guards: authGuards(deps.clients.admin, deps.clients.issuer, { apiKeys, relays }),
    entitlements,
    issuance,
    issuanceRate,
    forgetApiKey: (keyId) => apiKeys.deleteWhere((auth) => auth.apiKey.id === keyId),
  };
  registerHealth(app, routeDeps);
  registerJwks(app, routeDeps);
  registerPlans(app, routeDeps);
  registerAuth(app, routeDeps);
  registerSessions(app, routeDeps);
  registerMfa(app, routeDeps);
  registerProjects(app, routeDeps);
  registerSigningKeys(app, routeDeps);
  registerApiKeys(app, routeDeps);
  registerAllowlist(app, routeDeps);
  registerBots(app, routeDeps);
  registerIdentityTokens(app, routeDeps);
  registerCredentials(app, routeDeps);
  registerCredentialContainment(app, routeDeps);
  registerAudit(app, routeDeps);
  registerRelays(app, routeDeps);
  registerBilling(app, routeDeps);
  registerMemberships(app, routeDeps);
  registerDevice(app, routeDeps);
  // Form bodies (OAuth clients, RFC 7662 introspection, the HTML pages' posts) are parsed in
  // this one scope: every other route stays JSON only (415).
  await app.register(async (forms) => {
    acceptForms(forms);
    registerIntrospection(forms, routeDeps);
    registerCheckoutPage(forms, routeDeps);
    registerDeviceOAuth(forms, routeDeps);
    registerDevicePage(forms, routeDeps);
  });

  app.addHook('onClose', async () => {
    issuance.close();
    await issuanceRate.close();
    rateRedis?.disconnect();
    for (const u of unsubscribe) await u();
    await jwks.close();
  });
  await app.ready();
  return { app, jwks, routes };
}
