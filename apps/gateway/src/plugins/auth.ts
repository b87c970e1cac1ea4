import type { Principal, Session } from '@relayplane/proto/admin';
import { AppError, INVALID_TOKEN_MESSAGE } from '@relayplane/shared/errors';
import { parseToken } from '@relayplane/shared/tokens';
import type { FastifyRequest } from 'fastify';
import type { GatewayClients } from '../clients.ts';

export interface Authenticated {
  principal: Principal;
  session: Session | undefined;
}

declare module 'fastify' {
  interface FastifyRequest {
    auth: Authenticated | null;
  }
}

const BEARER = /^Bearer ([\x21-\x7e]+)$/i;

/** The bearer token of a request, or a 401 that says what is wrong. Never touches a database. */
export function bearerToken(request: FastifyRequest): string {
  const header = request.headers.authorization;
  if (header === undefined || header === '') {
    throw new AppError('unauthenticated', 'missing bearer token: send "Authorization: Bearer <token>"');
  }
  const match = BEARER.exec(header);
  if (!match?.[1])
    throw new AppError('unauthenticated', 'malformed Authorization header: expected "Bearer <token>"');
  // Unknown prefix or failed checksum: rejected here, without a lookup.
  if (parseToken(match[1]) === undefined) throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
  return match[1];
}

export interface AuthGuards {
  /** Any authenticated principal. */
  session(request: FastifyRequest): Promise<void>;
  /** A platform administrator (operator). 403 for everyone else. */
  platformAdmin(request: FastifyRequest): Promise<void>;
}

export function authGuards(admin: GatewayClients['admin']): AuthGuards {
  const session = async (request: FastifyRequest) => {
    const token = bearerToken(request);
    const res = await admin.authenticate({ token });
    if (!res.principal) throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
    request.auth = { principal: res.principal, session: res.session };
  };
  return {
    session,
    async platformAdmin(request) {
      await session(request);
      if (!request.auth?.principal.platformAdmin) {
        throw new AppError('forbidden', 'this operation needs a platform administrator');
      }
    },
  };
}

/** The authenticated principal of a request that passed a guard. */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.auth) throw new AppError('unauthenticated', INVALID_TOKEN_MESSAGE);
  return request.auth.principal;
}
