/**
 * The peer `pnpm bench` compares issuance with (issue 20): node-oidc-provider in one Node process,
 * issuing EdDSA-signed JWT access tokens by the `client_credentials` grant to one confidential
 * client, for one resource server named by the `resource` parameter (RFC 8707). That is the
 * closest thing to a Relayplane credential the provider makes: a short-lived JWS over a few
 * claims, signed with Ed25519, after authenticating the caller by a secret.
 *
 * Its tokens are not stored (JWT access tokens are self-contained; the provider's default
 * in-memory adapter is never asked to keep them), and the provider logs nothing per request.
 *
 * Environment: PORT, PEER_CLIENT_ID, PEER_CLIENT_SECRET, PEER_RESOURCE (an absolute URI).
 * Prints `listening http://127.0.0.1:<port>` once it serves.
 */
import { generateKeyPairSync } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider, { errors } from 'oidc-provider';

const need = (name: string): string => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
};
const port = Number(process.env.PORT ?? 0);
const clientId = need('PEER_CLIENT_ID');
const clientSecret = need('PEER_CLIENT_SECRET');
const resource = need('PEER_RESOURCE');
/** As long as the credentials the bench asks Relayplane for (ttl_seconds 60). */
const TOKEN_TTL_SECONDS = 60;

// One Ed25519 signing key, made for the run, as the only key of the provider's JWKS.
const jwk = generateKeyPairSync('ed25519').privateKey.export({ format: 'jwk' });

const provider = new Provider(`http://127.0.0.1:${port}`, {
  clients: [
    {
      client_id: clientId,
      client_secret: clientSecret,
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_basic',
    },
  ],
  jwks: { keys: [{ ...jwk, use: 'sig', alg: 'EdDSA' }] },
  // The default (RS256) has no key here, and a client whose default algorithm the keystore cannot
  // serve would be refused at start.
  clientDefaults: { id_token_signed_response_alg: 'EdDSA' },
  ttl: { ClientCredentials: TOKEN_TTL_SECONDS },
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, resourceIndicator) => {
        if (resourceIndicator !== resource) throw new errors.InvalidTarget();
        return {
          scope: 'api:read',
          audience: resource,
          accessTokenTTL: TOKEN_TTL_SECONDS,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'EdDSA' } },
        };
      },
    },
  },
});

const server = createServer(provider.callback());
await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
process.stdout.write(`listening http://127.0.0.1:${(server.address() as AddressInfo).port}\n`);
process.once('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
