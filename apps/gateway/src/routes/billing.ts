import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
/**
 * Billing routes: the tenant's subscription, plan changes through checkout sessions (the
 * built-in provider's confirmation page is checkout-page.ts), usage and connections against the
 * cap, provider webhooks, and the operator's tenant list with plans and direct plan change.
 * Decisions (limits, throttling, idempotency, webhook verification) are billing's
 * (docs/billing.md); these routes authenticate, validate and present.
 */
import { IDEMPOTENCY_KEY_PATTERN, PLAN_IDS } from '@relayplane/contract/contract';
import { AppError } from '@relayplane/contract/errors';
import { CheckoutSession, Subscription } from '../components.ts';
import { principalOf } from '../plugins/auth.ts';
import {
  iso,
  oneOfValues,
  presentCheckoutSession,
  presentPlan,
  presentUsageDay,
  required,
} from '../present.ts';
import { publicBaseUrl } from '../public-url.ts';
import {
  BODY_ERRORS,
  dateTime,
  errorResponse,
  listOf,
  nullable,
  object,
  oneOf,
  PAGE_BAD_REQUEST,
  PAGING,
  pageOf,
  pageParams,
  pageQuery,
  pathParams,
  ref,
  type Static,
  Type,
} from '../schemas.ts';
import { tenantConnections } from '../workflows/tenant-connections.ts';
import { listTenantsWithPlans, setTenantPlan, type TenantWithPlan } from '../workflows/tenant-plan.ts';
import type { Api, RouteDeps } from './deps.ts';

const DAY = '^\\d{4}-\\d{2}-\\d{2}$';

/** A tenant as the operator's list shows it. */
const TENANT_OVERVIEW = object({
  id: Type.String(),
  name: Type.String(),
  created_at: dateTime(),
  plan_id: oneOf(PLAN_IDS, {
    description: 'The plan billing has the tenant on (`free` without a subscription).',
  }),
  member_count: Type.Integer({ minimum: 0 }),
});

function presentTenantOverview(t: TenantWithPlan): Static<typeof TENANT_OVERVIEW> {
  return {
    id: t.tenant.id,
    name: t.tenant.name,
    created_at: required(iso(t.tenant.createdAt), 'tenant.created_at'),
    plan_id: oneOfValues(PLAN_IDS, t.planId, 'tenant.plan_id'),
    member_count: t.memberCount,
  };
}

export function registerBilling(app: Api, { clients, guards }: RouteDeps): void {
  app.get(
    '/admin/v1/billing/subscription',
    {
      onRequest: guards.allow('billing:read'),
      schema: {
        operationId: 'getSubscription',
        summary: "The active tenant's plan",
        description: 'The plan with all its limits and its price. Tenants start on `free`.',
        tags: ['billing'],
        response: { 200: ref(Subscription) },
      },
    },
    async (request) => {
      const { tenantId } = principalOf(request);
      const res = await clients.billing.getSubscription({ tenantId });
      return {
        tenant_id: tenantId,
        plan: presentPlan(required(res.plan, 'getSubscription.plan')),
        updated_at: res.subscription?.updatedAt ? (iso(res.subscription.updatedAt) ?? null) : null,
      };
    },
  );

  app.post(
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
          '(`Idempotent-Replayed: true`) and creates nothing. The built-in provider takes no payment: ' +
          'a paid plan answers 422 unless the operator set `BILLING_BUILTIN_PAID_CHECKOUT=true` ' +
          '(a free plan, a downgrade, always goes ahead; platform admins set any plan with ' +
          '`PUT /admin/v1/tenants/{tenant_id}/plan`).',
        tags: ['billing'],
        headers: Type.Object({
          'idempotency-key': Type.Optional(Type.String({ description: '1–255 visible ASCII characters.' })),
        }),
        body: object({ plan: Type.String({ maxLength: 32 }) }),
        response: {
          201: ref(CheckoutSession),
          403: errorResponse('Only owners and admins may change the plan.'),
          409: errorResponse('The tenant is already on that plan.'),
          422: errorResponse(
            'Built-in provider: the plan is paid and paid checkout is off (`BILLING_BUILTIN_PAID_CHECKOUT`).',
          ),
          429: errorResponse(
            'Too many checkout sessions for this tenant; retry after `Retry-After` seconds.',
          ),
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
      return reply
        .code(201)
        .send(presentCheckoutSession(required(res.session, 'createCheckoutSession.session')));
    },
  );

  app.get(
    '/admin/v1/billing/usage',
    {
      onRequest: guards.allow('billing:read'),
      schema: {
        operationId: 'getUsage',
        summary: 'Daily usage of the active tenant',
        description:
          'Per UTC day: credentials issued and the peak of concurrently live credentials, and the relay sessions ' +
          'that ended that day (`sessions_ended`, `session_minutes`, `bytes_sent`, `bytes_received`, as the relays ' +
          'reported them; a session counts whole on the day it ended), for the tenant (`project_id` null) and per ' +
          'project. Aggregated by background jobs, so today fills in over the day.',
        tags: ['billing'],
        querystring: object({
          from: Type.String({ pattern: DAY, description: 'First UTC day, YYYY-MM-DD.' }),
          to: Type.String({ pattern: DAY, description: 'Last UTC day (inclusive), YYYY-MM-DD.' }),
        }),
        response: {
          200: listOf(
            'days',
            object({
              day: Type.String(),
              project_id: nullable(Type.String()),
              credentials_issued: Type.Integer(),
              peak_concurrent_connections: Type.Integer(),
              sessions_ended: Type.Integer(),
              session_minutes: Type.Number({ description: 'Minutes, to a hundredth.' }),
              bytes_sent: Type.Integer({ description: 'By the relays, to the clients.' }),
              bytes_received: Type.Integer({ description: 'By the relays, from the clients.' }),
            }),
          ),
          400: errorResponse(
            '`from`/`to` missing or not YYYY-MM-DD, `from` after `to`, or a span over 366 days.',
          ),
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
      return { days: res.days.map(presentUsageDay) };
    },
  );

  app.get(
    '/admin/v1/tenant/connections',
    {
      onRequest: guards.allow('billing:read'),
      schema: {
        operationId: 'getTenantConnections',
        summary: "The active tenant's connections now, against its cap",
        description:
          '`live_sessions`: relay sessions of the tenant with no end recorded. `slots_held`: what counts against ' +
          "the plan's `max_concurrent_connections` right now, the number the next credential or connect is " +
          'decided against: live sessions, plus credentials issued within the connect window that have not ' +
          'connected (a credential that connects passes its slot to its session). `cap`: ' +
          "`max_concurrent_connections` of the tenant's plan as billing has it now. Readable by whoever may " +
          'read usage (`GET /admin/v1/billing/usage`).',
        tags: ['billing'],
        response: {
          200: object({
            live_sessions: Type.Integer({ minimum: 0 }),
            slots_held: Type.Integer({ minimum: 0 }),
            cap: Type.Integer({ minimum: 0 }),
          }),
        },
      },
    },
    async (request) => {
      const res = await tenantConnections(clients, principalOf(request).tenantId);
      return { live_sessions: res.liveSessions, slots_held: res.slotsHeld, cap: res.cap };
    },
  );

  app.get(
    '/admin/v1/tenants',
    {
      onRequest: guards.platformAdmin,
      schema: {
        operationId: 'listTenants',
        summary: 'List every tenant with its plan (platform admins)',
        description:
          "Oldest first (`created_at`, then `id`), with the member count and the plan. Tenants are admin's and " +
          "plans billing's: the gateway asks admin for the page, then billing for that page's plans in one call " +
          '(`GetSubscriptions`), so a plan changed meanwhile shows as it is after the change. ' +
          PAGING,
        tags: ['tenants'],
        querystring: pageQuery(),
        response: {
          200: pageOf('tenants', TENANT_OVERVIEW),
          400: PAGE_BAD_REQUEST,
          403: errorResponse('Platform admins only.'),
        },
      },
    },
    async (request) => {
      const res = await listTenantsWithPlans(clients, {
        principal: principalOf(request),
        ...pageParams(request.query),
      });
      return { tenants: res.tenants.map(presentTenantOverview), next_cursor: res.nextCursor || null };
    },
  );

  app.put(
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
        params: pathParams('tenant_id'),
        body: object({ plan: Type.String({ maxLength: 32 }) }),
        response: {
          200: object({
            tenant_id: Type.String(),
            plan: Type.String(),
            updated_at: dateTime(),
          }),
          403: errorResponse('Platform admins only.'),
          404: errorResponse('No such tenant.'),
        },
      },
    },
    async (request) => {
      const res = await setTenantPlan(clients, {
        principal: principalOf(request),
        tenantId: request.params.tenant_id,
        planId: request.body.plan,
      });
      const sub = required(res.subscription, 'setPlan.subscription');
      return {
        tenant_id: request.params.tenant_id,
        plan: sub.planId,
        updated_at: required(iso(sub.updatedAt), 'subscription.updated_at'),
      };
    },
  );

  // Provider webhooks: the signature covers the exact bytes, so this scope keeps the raw body.
  app.register(async (scope) => {
    scope.removeContentTypeParser('application/json');
    scope.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_req, body, done) =>
      done(null, body),
    );
    scope.withTypeProvider<TypeBoxTypeProvider>().post(
      '/v1/billing/webhooks/:provider',
      {
        schema: {
          operationId: 'billingWebhook',
          summary: 'Billing provider webhook',
          description:
            'For `stripe`: the event as Stripe sends it, verified with the `Stripe-Signature` header (HMAC-SHA256, ' +
            'timestamp tolerance 300 s). A forged or stale-signed event answers 400 and changes nothing. ' +
            'A verified event answers 200 whether or not it changes a plan: an already processed event id, a ' +
            'checkout whose `payment_status` is not `paid` or `no_payment_required`, and a subscription event ' +
            'older than the last one applied to its subscription change nothing.',
          tags: ['billing'],
          params: Type.Object({ provider: Type.String({ maxLength: 32 }) }),
          response: {
            200: object({ received: Type.Literal(true) }),
            400: errorResponse('Missing or invalid signature, stale timestamp, or unreadable event.'),
            404: errorResponse('Unknown provider, or not the configured one.'),
            // The raw body has no schema to derive these from.
            413: BODY_ERRORS[413],
            415: BODY_ERRORS[415],
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
        return { received: true as const };
      },
    );
  });
}
