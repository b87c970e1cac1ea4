import { Plan, Price } from '../components.ts';
import { presentPlan } from '../present.ts';
import { object, PAGE_BAD_REQUEST, PAGING, pageOf, pageQuery, ref, Type } from '../schemas.ts';
import type { Api, RouteDeps } from './deps.ts';
import { pageInMemory } from './list-page.ts';

const CACHE = 'public, max-age=60';

/**
 * The catalogue is configuration (`RELAYPLANE_PLANS_FILE`) over a fixed set of plan ids (free,
 * pro, enterprise): billing answers it whole, and it is paged here, in memory, so that every
 * list of the API follows one rule.
 */
const CATALOGUE_PAGING =
  `${PAGING} The catalogue is small and fixed (one entry per plan), so the first page holds it ` +
  'all today; it is paged anyway so that every list follows the same rule.';

export function registerPlans(app: Api, { clients }: RouteDeps): void {
  app.get(
    '/v1/plans',
    {
      schema: {
        operationId: 'listPlans',
        summary: 'List plans and every limit they set',
        description: `Public and cacheable (\`Cache-Control: public, max-age=60\`). ${CATALOGUE_PAGING}`,
        tags: ['billing'],
        querystring: pageQuery(),
        response: {
          200: pageOf('plans', ref(Plan)),
          400: PAGE_BAD_REQUEST,
        },
      },
    },
    async (request, reply) => {
      const { plans } = await clients.billing.listPlans({});
      const page = pageInMemory(plans.map(presentPlan), (p) => p.id, request.query);
      reply.header('cache-control', CACHE);
      return { plans: page.items, next_cursor: page.next_cursor };
    },
  );

  app.get(
    '/v1/pricing',
    {
      schema: {
        operationId: 'getPricing',
        summary: 'Prices of the plans',
        description:
          'Public and cacheable (`Cache-Control: public, max-age=60`). Amounts are monthly, in minor units. ' +
          CATALOGUE_PAGING,
        tags: ['billing'],
        querystring: pageQuery(),
        response: {
          200: pageOf(
            'prices',
            object({ plan_id: Type.String(), plan_name: Type.String(), price: ref(Price) }),
          ),
          400: PAGE_BAD_REQUEST,
        },
      },
    },
    async (request, reply) => {
      const { plans } = await clients.billing.listPlans({});
      const prices = plans
        .map(presentPlan)
        .map((p) => ({ plan_id: p.id, plan_name: p.name, price: p.price }));
      const page = pageInMemory(prices, (p) => p.plan_id, request.query);
      reply.header('cache-control', CACHE);
      return { prices: page.items, next_cursor: page.next_cursor };
    },
  );
}
