import { HealthCheckResponse_ServingStatus as Status } from '@relayplane/proto/grpc-health';
import { DOWNSTREAMS, type Downstream, SERVICE_NAMES } from '../clients.ts';
import { errorResponse, object, Type } from '../schemas.ts';
import type { Api, RouteDeps } from './deps.ts';

const STATUS_NAMES: Record<number, string> = {
  [Status.UNKNOWN]: 'UNKNOWN',
  [Status.SERVING]: 'SERVING',
  [Status.NOT_SERVING]: 'NOT_SERVING',
  [Status.SERVICE_UNKNOWN]: 'SERVICE_UNKNOWN',
};

export function registerHealth(app: Api, { clients, stopping }: RouteDeps): void {
  app.get(
    '/healthz',
    {
      config: { commonErrors: false },
      schema: {
        operationId: 'getLiveness',
        summary: 'Liveness: the gateway process is up',
        description: 'Answers 200 whenever the process can serve HTTP. It checks nothing else.',
        tags: ['health'],
        response: {
          200: object({ status: Type.Literal('ok') }),
        },
      },
    },
    async () => ({ status: 'ok' as const }),
  );

  app.get(
    '/readyz',
    {
      config: { commonErrors: false },
      schema: {
        operationId: 'getReadiness',
        summary: 'Readiness: every service behind the gateway is serving',
        description:
          'Asks each service (admin, issuer, billing) over the standard gRPC health protocol. A service reports ' +
          'SERVING only while its database answers. 503 when any is not serving or unreachable; it recovers ' +
          'by itself when they do. 503 too from SIGTERM on: the gateway goes on serving for ' +
          '`GATEWAY_SHUTDOWN_DELAY_MS` while load balancers take it out, then drains and stops.',
        tags: ['health'],
        response: {
          200: object({
            status: Type.Literal('ready'),
            services: {
              type: 'object',
              required: DOWNSTREAMS,
              additionalProperties: false,
              properties: Object.fromEntries(DOWNSTREAMS.map((name) => [name, Type.String()])),
            },
          }),
          503: errorResponse('A service is not serving (database connectivity lost) or unreachable.'),
        },
      },
    },
    async (_request, reply) => {
      if (stopping.aborted) {
        reply.header('retry-after', '1');
        return reply.code(503).send({ error: 'not ready: the gateway is shutting down' });
      }
      const services = Object.fromEntries(
        await Promise.all(
          DOWNSTREAMS.map((name) =>
            clients.health[name]
              .check({ service: SERVICE_NAMES[name] }, { deadline: new Date(Date.now() + 1_000) })
              .then((r) => STATUS_NAMES[r.status] ?? 'UNKNOWN')
              .catch(() => 'UNREACHABLE')
              .then((state) => [name, state] as const),
          ),
        ),
      ) as Record<Downstream, string>;
      const failing = DOWNSTREAMS.filter((n) => services[n] !== 'SERVING');
      if (failing.length) {
        reply.header('retry-after', '1');
        return reply.code(503).send({
          error: `not ready: ${failing.map((n) => `${n} is ${services[n].toLowerCase().replace('_', ' ')}`).join(', ')}`,
        });
      }
      return { status: 'ready' as const, services };
    },
  );
}
