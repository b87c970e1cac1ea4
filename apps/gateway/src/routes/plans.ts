import type { FastifyInstance } from 'fastify';
import { presentPlan } from '../present.ts';
import { listOf, object, ref } from '../schemas.ts';
import type { RouteDeps } from './deps.ts';

const CACHE = 'public, max-age=60';

export function registerPlans(app: FastifyInstance, { clients }: RouteDeps): void {
  app.get(
    '/v1/plans',
    {
      schema: {
        operationId: 'listPlans',
        summary: 'List plans and every limit they set',
        description: 'Public and cacheable (`Cache-Control: public, max-age=60`).',
        tags: ['billing'],
        response: { 200: listOf('plans', ref('Plan')) },
      },
    },
    async (_request, reply) => {
      const { plans } = await clients.billing.listPlans({});
      reply.header('cache-control', CACHE);
      return { plans: plans.map(presentPlan) };
    },
  );

  app.get(
    '/v1/pricing',
    {
      schema: {
        operationId: 'getPricing',
        summary: 'Prices of the plans',
        description:
          'Public and cacheable (`Cache-Control: public, max-age=60`). Amounts are monthly, in minor units.',
        tags: ['billing'],
        response: {
          200: listOf(
            'prices',
            object({ plan_id: { type: 'string' }, plan_name: { type: 'string' }, price: ref('Price') }),
          ),
        },
      },
    },
    async (_request, reply) => {
      const { plans } = await clients.billing.listPlans({});
      reply.header('cache-control', CACHE);
      return {
        prices: plans.map(presentPlan).map((p) => ({ plan_id: p.id, plan_name: p.name, price: p.price })),
      };
    },
  );
}
