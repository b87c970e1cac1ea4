import { describe, expect, it } from 'vitest';
import { ConfigError, EnvReader } from './config.ts';
import { peerIdentity, readGrpcTls, spiffeId, uriSanOf } from './grpc-tls.ts';

describe('identities: the one URI SAN of a certificate', () => {
  it('reads the URI SAN among other names', () => {
    expect(uriSanOf('URI:spiffe://relayplane.local/issuer')).toBe('spiffe://relayplane.local/issuer');
    expect(uriSanOf('DNS:issuer.example, URI:spiffe://relayplane.local/issuer, IP Address:10.0.0.1')).toBe(
      'spiffe://relayplane.local/issuer',
    );
  });

  it('has no identity without a URI SAN, or with several (an X509-SVID has exactly one)', () => {
    expect(uriSanOf(undefined)).toBeUndefined();
    expect(uriSanOf('')).toBeUndefined();
    expect(uriSanOf('DNS:gateway.example')).toBeUndefined();
    expect(
      uriSanOf('URI:spiffe://relayplane.local/gateway, URI:spiffe://relayplane.local/issuer'),
    ).toBeUndefined();
  });

  it('cannot be fooled by a SAN that embeds ", URI:" (Node quotes it as a JSON string)', () => {
    // What Node prints for a certificate whose second URI SAN is "spiffe://a/b,c, URI:spiffe://evil/x".
    const printed =
      'URI:spiffe://relayplane.local/issuer, DNS:x.example, URI:"spiffe://a/b\\u002cc\\u002c URI:spiffe://evil/x"';
    expect(uriSanOf(printed)).toBeUndefined();
    expect(uriSanOf('URI:"spiffe://a/b\\u002cc"')).toBe('spiffe://a/b,c');
    expect(uriSanOf('URI:"unterminated')).toBeUndefined();
  });

  it('names one of our apps only for spiffe://<our trust domain>/<app> exactly', () => {
    const td = 'relayplane.local';
    expect(peerIdentity('URI:spiffe://relayplane.local/billing', td)).toEqual({
      id: 'spiffe://relayplane.local/billing',
      app: 'billing',
    });
    for (const id of [
      'spiffe://other.example/billing',
      'spiffe://relayplane.local/billing/extra',
      'spiffe://relayplane.local/Billing',
      'spiffe://relayplane.local/relay',
      'spiffe://relayplane.localx/billing',
      'https://relayplane.local/billing',
    ]) {
      expect(peerIdentity(`URI:${id}`, td), id).toEqual({ id, app: undefined });
    }
    expect(peerIdentity(undefined, td)).toEqual({ id: undefined, app: undefined });
    expect(spiffeId('prod.example', 'gateway')).toBe('spiffe://prod.example/gateway');
  });
});

describe('readGrpcTls: all three files or none', () => {
  const files = {
    RELAYPLANE_GRPC_TLS_CERT_FILE: '/tls/tls.crt',
    RELAYPLANE_GRPC_TLS_KEY_FILE: '/tls/tls.key',
    RELAYPLANE_GRPC_TLS_CA_FILE: '/tls/ca.crt',
  };

  function refusal(env: Record<string, string>): ConfigError {
    try {
      readGrpcTls(new EnvReader(env), 'issuer');
    } catch (err) {
      if (err instanceof ConfigError) return err;
      throw err;
    }
    throw new Error('no configuration error');
  }

  it('is plaintext (undefined) when none is set', () => {
    expect(readGrpcTls(new EnvReader({}), 'issuer')).toBeUndefined();
    expect(readGrpcTls(new EnvReader({ RELAYPLANE_GRPC_TLS_CERT_FILE: ' ' }), 'issuer')).toBeUndefined();
  });

  it('refuses a partial set, naming the first missing variable and what is set', () => {
    const onlyCert = refusal({ RELAYPLANE_GRPC_TLS_CERT_FILE: files.RELAYPLANE_GRPC_TLS_CERT_FILE });
    expect(onlyCert.variable).toBe('RELAYPLANE_GRPC_TLS_KEY_FILE');
    expect(onlyCert.message).toBe(
      'configuration error: RELAYPLANE_GRPC_TLS_KEY_FILE is not set, but RELAYPLANE_GRPC_TLS_CERT_FILE is: mutual TLS needs all of RELAYPLANE_GRPC_TLS_CERT_FILE, RELAYPLANE_GRPC_TLS_KEY_FILE, RELAYPLANE_GRPC_TLS_CA_FILE (or none of them for plaintext gRPC)',
    );
    const noCa = refusal({
      RELAYPLANE_GRPC_TLS_CERT_FILE: files.RELAYPLANE_GRPC_TLS_CERT_FILE,
      RELAYPLANE_GRPC_TLS_KEY_FILE: files.RELAYPLANE_GRPC_TLS_KEY_FILE,
    });
    expect(noCa.variable).toBe('RELAYPLANE_GRPC_TLS_CA_FILE');
    expect(noCa.message).toContain('RELAYPLANE_GRPC_TLS_CERT_FILE and RELAYPLANE_GRPC_TLS_KEY_FILE are');
    expect(refusal({ RELAYPLANE_GRPC_TLS_CA_FILE: '/tls/ca.crt' }).variable).toBe(
      'RELAYPLANE_GRPC_TLS_CERT_FILE',
    );
  });

  it('refuses a trust domain SPIFFE does not allow and a refresh interval out of range', () => {
    for (const bad of ['Relayplane.Local', 'spiffe://relayplane.local', 'relay plane', 'a/b']) {
      expect(refusal({ RELAYPLANE_TRUST_DOMAIN: bad }).variable, bad).toBe('RELAYPLANE_TRUST_DOMAIN');
    }
    expect(refusal({ RELAYPLANE_GRPC_TLS_REFRESH_MS: '10' }).variable).toBe('RELAYPLANE_GRPC_TLS_REFRESH_MS');
  });

  it('reads the files named: one that cannot be read stops the start', () => {
    const err = refusal(files);
    expect(err.variable).toBe('RELAYPLANE_GRPC_TLS_CERT_FILE');
    expect(err.message).toContain('names a file that cannot be read (ENOENT: /tls/tls.crt)');
  });
});
