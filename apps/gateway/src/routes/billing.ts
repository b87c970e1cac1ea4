/**
 * Billing routes: the tenant's subscription, plan changes through checkout sessions (with
 * the built-in provider's confirmation page), usage, provider webhooks, and the operator's
 * direct plan change. Decisions (limits, throttling, idempotency, webhook verification) are
 * billing's (docs/billing.md); these routes authenticate, validate and present.
 */

import type { CheckoutSession, Subscription } from '@relayplane/proto/billing';
import { IDEMPOTENCY_KEY_PATTERN, PLAN_IDS } from '@relayplane/shared/contract';
import { AppError } from '@relayplane/shared/errors';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { principalOf } from '../plugins/auth.ts';
import { iso, presentPlan } from '../present.ts';
import { publicBaseUrl } from '../public-url.ts';
import { AUTH_ERRORS, BODY_ERRORS, COMMON_ERRORS, errorResponse, ref } from '../schemas.ts';
import type { RouteDeps } from './deps.ts';

const DAY = '^\\d{4}-\\d{2}-\\d{2}$';

const checkoutSessionSchema = {
  type: 'object',
  required: ['id', 'plan', 'provider', 'status', 'url', 'created_at', 'expires_at'],
  additionalProperties: false,
  properties: {
    id: { type: 'string' },
    plan: { type: 'string', enum: PLAN_IDS },
    provider: { type: 'string', enum: ['builtin', 'stripe'] },
    status: { type: 'string', enum: ['open', 'completed', 'expired'] },
    url: { type: 'string', description: 'Where the user confirms (built-in) or pays (Stripe).' },
    created_at: { type: 'string', format: 'date-time' },
    expires_at: { type: 'string', format: 'date-time' },
  },
} as const;

const subscriptionSchema = {
  type: 'object',
  required: ['tenant_id', 'plan', 'updated_at'],
  additionalProperties: false,
  properties: {
    tenant_id: { type: 'string' },
    plan: ref('Plan'),
    updated_at: {
      type: ['string', 'null'],
      format: 'date-time',
      description: 'When the plan last changed; null while the tenant is on the default plan.',
    },
  },
} as const;

function presentCheckoutSession(s: CheckoutSession | undefined) {
  if (!s) throw new AppError('internal', 'billing answered no checkout session');
  return {
    id: s.id,
    plan: s.planId,
    provider: s.provider,
    status: s.status,
    url: s.url,
    created_at: iso(s.createdAt),
    expires_at: iso(s.expiresAt),
  };
}

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function page(reply: FastifyReply, status: number, title: string, body: string) {
  return reply
    .code(status)
    .type('text/html; charset=utf-8')
    .header('cache-control', 'no-store')
    .header('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'")
    .header('x-frame-options', 'DENY')
    .send(
      `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>` +
        '<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem}' +
        'button{font-size:1rem;padding:.5rem 1rem}</style></head>' +
        `<body><h1>${escapeHtml(title)}</h1>${body}</body></html>`,
    );
}

export function registerBilling(app: FastifyInstance, { clients, guards }: RouteDeps): void {
  app.get(
    '/admin/v1/billing/subscription',
    {
      onRequest: guards.allow('billing:read'),
      schema: {
        operationId: 'getSubscription',
        summary: "The active tenant's plan",
        description: 'The plan with all its limits and its price. Tenants start on `free`.',
        tags: ['billing'],
        security: [{ bearerAuth: [] }],
        response: { 200: subscriptionSchema, ...AUTH_ERRORS, ...COMMON_ERRORS },
      },
    },
    async (request) => {
      const { tenantId } = principalOf(request);
      const res = await clients.billing.getSubscription({ tenantId });
      if (!res.plan) throw new AppError('internal', 'billing answered no plan');
      return {
        tenant_id: tenantId,
        plan: presentPlan(res.plan),
        updated_at: res.subscription?.updatedAt ? (iso(res.subscription.updatedAt) ?? null) : null,
      };
    },
  );

  app.post<{ Body: { plan: string } }>(
    '/admin/v1/billing/checkout-sessions',
    {
      onRequest: guards.allow('billing:write'),
      schema: {
        operationId: 'createCheckoutSession',
        summary: 'Start a plan change (checkout session)',
        description:
          'Answers a session whose `url` is where the change is confirmed: the built-in ' +
          "provider's page on this gateway, or Stripe Checkout. Throttled per tenant: 429 with `Retry-After`. " +
          'With an `Idempotency-Key` header, repeating the request answers the same session ' +
          '(`Idempotent-Replayed: true`) and creates nothing.',
        tags: ['billing'],
        security: [{ bearerAuth: [] }],
        headers: {
          type: 'object',
          properties: {
            'idempotency-key': { type: 'string', description: '1–255 visible ASCII characters.' },
          },
        },
        body: {
          type: 'object',
          required: ['plan'],
          additionalProperties: false,
          properties: { plan: { type: 'string', maxLength: 32 } },
        },
        response: {
          201: checkoutSessionSchema,
          ...BODY_ERRORS,
          ...AUTH_ERRORS,
          403: errorResponse('Only owners and admins may change the plan.'),
          409: errorResponse('The tenant is already on that plan.'),
          429: errorResponse(
            'Too many checkout sessions for this tenant; retry after `Retry-After` seconds.',
          ),
          ...COMMON_ERRORS,
        },
      },
    },
    async (request, reply) => {
      const key = request.headers['idempotency-key'];
      if (key !== undefined && (typeof key !== 'string' || !IDEMPOTENCY_KEY_PATTERN.test(key))) {
        throw new AppError('invalid_request', 'Idempotency-Key must be 1-255 visible ASCII characters');
      }
      const { tenantId } = principalOf(request);
      const res = await clients.billing.createCheckoutSession({
        tenantId,
        planId: request.body.plan,
        idempotencyKey: key ?? '',
        publicBaseUrl: publicBaseUrl(request),
      });
      if (res.replayed) reply.header('idempotent-replayed', 'true');
      return reply.code(201).send(presentCheckoutSession(res.session));
    },
  );

  app.get<{ Querystring: { from: string; to: string } }>(
    '/admin/v1/billing/usage',
    {
      onRequest: guards.allow('billing:read'),
      schema: {
        operationId: 'getUsage',
        summary: 'Daily usage of the active tenant',
        description:
          'Per UTC day: credentials issued and the peak of concurrently live credentials, for the tenant ' +
          '(`project_id` null) and per project. Aggregated by background jobs, so today fills in over the day.',
        tags: ['billing'],
        security: [{ bearerAuth: [] }],
        querystring: {
          type: 'object',
          required: ['from', 'to'],
          additionalProperties: false,
          properties: {
            from: { type: 'string', pattern: DAY, description: 'First UTC day, YYYY-MM-DD.' },
            to: { type: 'string', pattern: DAY, description: 'Last UTC day (inclusive), YYYY-MM-DD.' },
          },
        },
        response: {
          200: {
            type: 'object',
            required: ['days'],
            additionalProperties: false,
            properties: {
              days: {
                type: 'array',
                items: {
                  type: 'object',
                  required: ['day', 'project_id', 'credentials_issued', 'peak_concurrent_connections'],
                  additionalProperties: false,
                  properties: {
                    day: { type: 'string' },
                    project_id: { type: ['string', 'null'] },
                    credentials_issued: { type: 'integer' },
                    peak_concurrent_connections: { type: 'integer' },
                  },
                },
              },
            },
          },
          400: errorResponse(
            '`from`/`to` missing or not YYYY-MM-DD, `from` after `to`, or a span over 366 days.',
          ),
          ...AUTH_ERRORS,
          ...COMMON_ERRORS,
        },
      },
    },
    async (request) => {
      const { tenantId } = principalOf(request);
      const res = await clients.billing.getUsage({
        tenantId,
        from: request.query.from,
        to: request.query.to,
      });
      return {
        days: res.days.map((d) => ({
          day: d.day,
          project_id: d.projectId || null,
          credentials_issued: Number(d.credentialsIssued),
          peak_concurrent_connections: d.peakConcurrentConnections,
        })),
      };
    },
  );

  app.put<{ Params: { tenant_id: string }; Body: { plan: string } }>(
    '/admin/v1/tenants/:tenant_id/plan',
    {
      onRequest: guards.platformAdmin,
      schema: {
        operationId: 'setTenantPlan',
        summary: "Set a tenant's plan (platform admins)",
        description:
          'Takes effect on every replica at once, downgrades included: credentials already issued live out their ' +
          'TTL, new ones over the new cap are refused (402); existing projects and keys stay, new ones over a ' +
          'lowered limit are refused.',
        tags: ['billing'],
        security: [{ bearerAuth: [] }],
        params: {
          type: 'object',
          required: ['tenant_id'],
          properties: { tenant_id: { type: 'string', maxLength: 64 } },
        },
        body: {
          type: 'object',
          required: ['plan'],
          additionalProperties: false,
          properties: { plan: { type: 'string', maxLength: 32 } },
        },
        response: {
          200: {
            type: 'object',
            required: ['tenant_id', 'plan', 'updated_at'],
            additionalProperties: false,
            properties: {
              tenant_id: { type: 'string' },
              plan: { type: 'string' },
              updated_at: { type: 'string', format: 'date-time' },
            },
          },
          ...BODY_ERRORS,
          ...AUTH_ERRORS,
          403: errorResponse('Platform admins only.'),
          404: errorResponse('No such tenant.'),
          ...COMMON_ERRORS,
        },
      },
    },
    async (request) => {
      await clients.admin.getTenant({ principal: principalOf(request), tenantId: request.params.tenant_id });
      const res = await clients.billing.setPlan({
        tenantId: request.params.tenant_id,
        planId: request.body.plan,
      });
      const sub: Subscription | undefined = res.subscription;
      return { tenant_id: request.params.tenant_id, plan: sub?.planId, updated_at: iso(sub?.updatedAt) };
    },
  );

  // The built-in provider's checkout page. Its URL is the capability: an unguessable session id
  // of one tenant and one plan, valid until it expires (docs/billing.md).
  app.get<{ Params: { id: string } }>(
    '/billing/checkout/:id',
    {
      schema: {
        operationId: 'showCheckout',
        security: [],
        summary: 'Built-in checkout page',
        description: "The built-in provider's confirmation page (HTML) for a checkout session.",
        tags: ['billing'],
        params: {
          type: 'object',
          required: ['id'],
          properties: { id: { type: 'string', maxLength: 64 } },
        },
        response: {
          200: {
            description: 'The confirmation page.',
            content: { 'text/html': { schema: { type: 'string' } } },
          },
          404: {
            description: 'No such open session.',
            content: { 'text/html': { schema: { type: 'string' } } },
          },
          ...COMMON_ERRORS,
        },
      },
    },
    async (request, reply) => {
      const session = await clients.billing
        .getCheckoutSession({ id: request.params.id })
        .then((r) => r.session)
        .catch((err: unknown) => {
          if (err instanceof AppError && (err.code === 'not_found' || err.code === 'invalid_request'))
            return undefined;
          throw err;
        });
      if (session?.provider !== 'builtin') {
        return page(reply, 404, 'Checkout not found', '<p>This checkout link is unknown.</p>');
      }
      if (session.status === 'completed') {
        return page(
          reply,
          200,
          'Plan changed',
          `<p>The tenant is on the <b>${escapeHtml(session.planId)}</b> plan.</p>`,
        );
      }
      if (session.status !== 'open') {
        return page(
          reply,
          404,
          'Checkout expired',
          '<p>This checkout link has expired. Start a new one.</p>',
        );
      }
      return page(
        reply,
        200,
        'Confirm plan change',
        `<p>Change the plan to <b>${escapeHtml(session.planId)}</b>?</p>` +
          `<form method="post" action="/billing/checkout/${encodeURIComponent(session.id)}">` +
          '<button type="submit">Confirm</button></form>',
      );
    },
  );

  // Form posts from the page above: the only non-JSON body besides introspection, in this scope.
  app.register(async (scope) => {
    scope.addContentTypeParser(
      'application/x-www-form-urlencoded',
      { parseAs: 'string' },
      (_req, _body, done) => done(null, {}),
    );
    scope.post<{ Params: { id: string } }>(
      '/billing/checkout/:id',
      {
        schema: {
          operationId: 'confirmCheckout',
          security: [],
          summary: 'Confirm a built-in checkout',
          description:
            'Applies the plan change of an open built-in checkout session and shows the result (HTML).',
          tags: ['billing'],
          params: {
            type: 'object',
            required: ['id'],
            properties: { id: { type: 'string', maxLength: 64 } },
          },
          response: {
            200: {
              description: 'The plan changed.',
              content: { 'text/html': { schema: { type: 'string' } } },
            },
            404: {
              description: 'No such open session.',
              content: { 'text/html': { schema: { type: 'string' } } },
            },
            ...COMMON_ERRORS,
          },
        },
      },
      async (request, reply) => {
        const done = await clients.billing
          .completeCheckoutSession({ id: request.params.id })
          .catch((err: unknown) => {
            if (err instanceof AppError && (err.code === 'not_found' || err.code === 'invalid_request'))
              return undefined;
            throw err;
          });
        if (!done?.session) {
          return page(
            reply,
            404,
            'Checkout not found',
            '<p>This checkout link is unknown or has expired.</p>',
          );
        }
        return page(
          reply,
          200,
          'Plan changed',
          `<p>The tenant is now on the <b>${escapeHtml(done.session.planId)}</b> plan.</p>`,
        );
      },
    );
  });

  // Provider webhooks: the signature covers the exact bytes, so this scope keeps the raw body.
  app.register(async (scope) => {
    scope.removeContentTypeParser('application/json');
    scope.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_req, body, done) =>
      done(null, body),
    );
    scope.post<{ Params: { provider: string }; Body: Buffer }>(
      '/v1/billing/webhooks/:provider',
      {
        schema: {
          operationId: 'billingWebhook',
          security: [],
          summary: 'Billing provider webhook',
          description:
            'For `stripe`: the event as Stripe sends it, verified with the `Stripe-Signature` header (HMAC-SHA256, ' +
            'timestamp tolerance 300 s). A forged, stale or already processed event answers 400 and changes nothing.',
          tags: ['billing'],
          params: {
            type: 'object',
            required: ['provider'],
            properties: { provider: { type: 'string', maxLength: 32 } },
          },
          response: {
            200: {
              type: 'object',
              required: ['received'],
              additionalProperties: false,
              properties: { received: { type: 'boolean', const: true } },
            },
            400: errorResponse(
              'Missing or invalid signature, stale timestamp, replayed event, or unreadable event.',
            ),
            404: errorResponse('Unknown provider, or not the configured one.'),
            413: errorResponse('The request body is larger than the limit.'),
            415: errorResponse('The body is not `application/json`.'),
            ...COMMON_ERRORS,
          },
        },
      },
      async (request) => {
        const signature = request.headers['stripe-signature'];
        if (request.params.provider !== 'stripe') throw new AppError('not_found', 'unknown billing provider');
        if (typeof signature !== 'string' || signature === '') {
          throw new AppError('invalid_request', 'missing Stripe-Signature header');
        }
        const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
        await clients.billing.handleWebhook({ provider: 'stripe', payload: body, signature });
        return { received: true };
      },
    );
  });
}
