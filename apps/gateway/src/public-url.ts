import type { FastifyRequest } from 'fastify';

/**
 * The base URL clients reach this gateway at: scheme and host of the request, as forwarded by
 * trusted proxies only (`GATEWAY_TRUSTED_PROXIES`). Links the gateway hands out (checkout
 * pages, the device-flow verification URL, the RFC 8414 issuer) are built from it.
 */
export function publicBaseUrl(request: FastifyRequest): string {
  return `${request.protocol}://${request.host}`;
}
