import cookie from '@fastify/cookie';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { DEFAULT_THROTTLE_IPV6_PREFIX } from '@relayplane/shared/client-address';
import type { Permission } from '@relayplane/shared/iam';
import { requestIdFrom, runWithRequestContext, userAgentFrom } from '@relayplane/shared/request-context';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply } from 'fastify';
import { SHARED_SCHEMAS } from './components.ts';
import { defaultConsoleDir, loadConsole, registerConsole } from './console.ts';
import type { GatewayContext } from './context.ts';
import type { JwksCache } from './jwks-cache.ts';
import { lazyChildLoggerFactory } from './lazy-logger.ts';
import { documentRoute, registerOpenApi } from './openapi.ts';
import { accessLogger } from './plugins/access-log.ts';
import { authGuards, guardOf } from './plugins/auth.ts';
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
import { registerRelaySessions } from './routes/relay-sessions.ts';
import { registerRelays } from './routes/relays.ts';
import { registerSessions } from './routes/sessions.ts';
import { registerSigningKeys } from './routes/signing-keys.ts';
import { registerWebhooks } from './routes/webhooks.ts';
import { SLOW_CLIENT_DEFAULTS } from './settings.ts';
import { trustedProxyCheck } from './trusted-proxies.ts';

export interface ServedRoute {
  method: string;
  url: string;
  /** False for the documentation UI's own assets. */
  documented: boolean;
  /** Its guard accepts a user session: bearer or the session cookie (CSRF-checked). */
  userSession: boolean;
  /** The IAM permission its guard checks (docs/iam.md), if any. */
  permission: Permission | undefined;
  /** Its guard also takes HTTP Basic `<relay id>:<node token>` (GuardInfo.basic). */
  basicAuth: boolean;
  /** It ignores unknown body fields (`config.openBody`), where every other route refuses them (400). */
  openBody: boolean;
}

export interface GatewayApp {
  app: FastifyInstance;
  jwks: JwksCache;
  /** Every route the app serves (HEAD twins excluded). */
  routes: ServedRoute[];
  /**
   * Starts the shutdown before the server closes: /readyz answers 503 and every answer closes
   * its connection (held long-polls answer when the app closes). Closing the app does it too.
   */
  beginShutdown(): void;
}

/**
 * Builds the HTTP application on `ctx` without listening (tests drive it with `inject()`): registers
 * plugins and routes, nothing else. Closing the app does not close `ctx` (its owner does).
 */
export async function buildApp(ctx: GatewayContext): Promise<GatewayApp> {
  const httpMetrics = new HttpMetrics(ctx.metrics);
  const limits: SlowClientLimits = {
    headersTimeoutMs: ctx.config.headersTimeoutMs ?? SLOW_CLIENT_DEFAULTS.headersTimeoutMs,
    requestTimeoutMs: ctx.config.requestTimeoutMs ?? SLOW_CLIENT_DEFAULTS.requestTimeoutMs,
    keepAliveTimeoutMs: ctx.config.keepAliveTimeoutMs ?? SLOW_CLIENT_DEFAULTS.keepAliveTimeoutMs,
    maxConnections: ctx.config.maxConnections ?? SLOW_CLIENT_DEFAULTS.maxConnections,
    maxConnectionsPerIp: ctx.config.maxConnectionsPerIp ?? SLOW_CLIENT_DEFAULTS.maxConnectionsPerIp,
  };
  const logController = tracingLogController();
  const app = Fastify({
    // Access log lines never show a capability URL in full (plugins/access-log.ts).
    loggerInstance: accessLogger(ctx.logger) as FastifyBaseLogger,
    // With tracing on, the request's log lines are written in its span (plugins/tracing.ts).
    ...(logController ? { logController } : {}),
    // Header, request and keep-alive timeouts; slow clients answered 408 (plugins/slow-clients.ts).
    ...slowClientServerOptions(limits, ctx.logger),
    // Request loggers are built only when a request logs something (lazy-logger.ts).
    childLoggerFactory: lazyChildLoggerFactory,
    bodyLimit: ctx.config.bodyLimitBytes,
    genReqId: (req) => requestIdFrom(req.headers['x-request-id']),
    requestIdHeader: false,
    // X-Forwarded-For is believed only from configured proxies (proxy-addr semantics).
    trustProxy: ctx.config.trustedProxies?.length ? ctx.config.trustedProxies : false,
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
  capConnections(app.server, limits.maxConnections, ctx.logger);
  capConnectionsPerAddress(
    app.server,
    {
      maxPerIp: limits.maxConnectionsPerIp ?? SLOW_CLIENT_DEFAULTS.maxConnectionsPerIp,
      ipv6Prefix: ctx.config.throttleIpv6Prefix ?? DEFAULT_THROTTLE_IPV6_PREFIX,
      trustedProxies: ctx.config.trustedProxies ?? [],
    },
    ctx.logger,
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
    // An open body is declared by the route, and its schema must agree: neither alone.
    const openBody = route.config?.openBody === true;
    const body = (route.schema as { body?: { additionalProperties?: unknown } } | undefined)?.body;
    if (body && (body.additionalProperties === true) !== openBody) {
      throw new Error(
        `${route.url}: a body schema with additionalProperties: true needs config.openBody, and config.openBody needs it`,
      );
    }
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
        basicAuth: guard?.basic === true,
        openBody,
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

  registerErrorHandling(app, ctx.config.bodyLimitBytes);
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

  // Shutdown in two steps (service.ts): from SIGTERM (`beginShutdown`) the gateway is not ready
  // but serves; when the server closes, held long-polls answer at once. Holding them through the
  // first step keeps relays from re-polling in a loop a gateway that answers them at once.
  const stopping = new AbortController();
  const shuttingDown = new AbortController();
  app.addHook('preClose', (done) => {
    stopping.abort();
    shuttingDown.abort();
    done();
  });
  // From SIGTERM on, answers close their connection: clients open their next one to another
  // gateway, and idle keep-alive sockets would otherwise hold `close()` until their timeout.
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (stopping.signal.aborted) reply.header('connection', 'close');
    done(null, payload);
  });
  const routeDeps: RouteDeps = {
    stopping: stopping.signal,
    shutdown: shuttingDown.signal,
    clients: ctx.clients,
    jwks: ctx.jwks,
    guards: authGuards(
      ctx.clients.admin,
      ctx.clients.issuer,
      { apiKeys: ctx.apiKeys, relays: ctx.relays },
      trustedProxyCheck(ctx.config.trustedProxies ?? []),
    ),
    entitlements: ctx.entitlements,
    issuance: ctx.issuance,
    issuanceRate: ctx.issuanceRate,
    forgetApiKey: (keyId) => ctx.apiKeys.deleteWhere((auth) => auth.apiKey.id === keyId),
  };
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  registerHealth(api, routeDeps);
  registerJwks(api, routeDeps);
  registerPlans(api, routeDeps);
  registerAuth(api, routeDeps);
  registerSessions(api, routeDeps);
  registerMfa(api, routeDeps);
  registerProjects(api, routeDeps);
  registerSigningKeys(api, routeDeps);
  registerApiKeys(api, routeDeps);
  registerAllowlist(api, routeDeps);
  registerWebhooks(api, routeDeps);
  registerBots(api, routeDeps);
  registerIdentityTokens(api, routeDeps);
  registerCredentials(api, routeDeps);
  registerCredentialContainment(api, routeDeps);
  registerAudit(api, routeDeps);
  registerRelays(api, routeDeps);
  registerRelaySessions(api, routeDeps);
  registerBilling(api, routeDeps);
  registerMemberships(api, routeDeps);
  registerDevice(api, routeDeps);
  // Form bodies (OAuth clients, RFC 7662 introspection, the HTML pages' posts) are parsed in
  // this one scope: every other route stays JSON only (415).
  await api.register(async (forms) => {
    acceptForms(forms);
    registerIntrospection(forms, routeDeps);
    registerCheckoutPage(forms, routeDeps);
    registerDeviceOAuth(forms, routeDeps);
    registerDevicePage(forms, routeDeps);
  });
  // The web console at `/` (console.ts): its pages and hashed assets, from memory.
  registerConsole(app, loadConsole(ctx.config.consoleDir ?? defaultConsoleDir()));

  await app.ready();
  return { app, jwks: ctx.jwks, routes, beginShutdown: () => stopping.abort() };
}
