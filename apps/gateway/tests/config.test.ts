import { describe, expect, it } from 'vitest';
import { readGatewayConfig } from '../src/config.ts';

describe('gateway slow-client settings', () => {
  it('are read from the environment with their documented defaults and ranges', () => {
    const defaults = readGatewayConfig({});
    expect(defaults).toMatchObject({
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 30_000,
      keepAliveTimeoutMs: 72_000,
      maxConnections: 10_000,
    });
    const set = readGatewayConfig({
      GATEWAY_HEADERS_TIMEOUT_MS: '5000',
      GATEWAY_REQUEST_TIMEOUT_MS: '60000',
      GATEWAY_KEEP_ALIVE_TIMEOUT_MS: '65000',
      GATEWAY_MAX_CONNECTIONS: '500',
    });
    expect(set).toMatchObject({
      headersTimeoutMs: 5_000,
      requestTimeoutMs: 60_000,
      keepAliveTimeoutMs: 65_000,
      maxConnections: 500,
    });
    expect(() => readGatewayConfig({ GATEWAY_HEADERS_TIMEOUT_MS: '500' })).toThrow(
      /GATEWAY_HEADERS_TIMEOUT_MS/,
    );
    expect(() => readGatewayConfig({ GATEWAY_MAX_CONNECTIONS: '0' })).toThrow(/GATEWAY_MAX_CONNECTIONS/);
    expect(() =>
      readGatewayConfig({ GATEWAY_HEADERS_TIMEOUT_MS: '20000', GATEWAY_REQUEST_TIMEOUT_MS: '10000' }),
    ).toThrow(/GATEWAY_HEADERS_TIMEOUT_MS \(20000\) must not exceed GATEWAY_REQUEST_TIMEOUT_MS \(10000\)/);
  });
});
