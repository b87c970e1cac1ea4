import { spawnSync } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ConfigError } from './config.ts';
import { statementKind } from './db.ts';
import { tracingSettings } from './tracing.ts';

const ENDPOINT = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' };

describe('tracingSettings: what turns tracing on', () => {
  it('is off without an endpoint, whatever else is set', () => {
    expect(
      tracingSettings({ OTEL_SERVICE_NAME: 'x', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, 'relayplane-gateway'),
    ).toBeUndefined();
    expect(tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: '  ' }, 'relayplane-gateway')).toBeUndefined();
  });

  it('is off with OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none, even with an endpoint', () => {
    expect(tracingSettings({ ...ENDPOINT, OTEL_SDK_DISABLED: 'TRUE' }, 'g')).toBeUndefined();
    expect(tracingSettings({ ...ENDPOINT, OTEL_TRACES_EXPORTER: 'none' }, 'g')).toBeUndefined();
    expect(tracingSettings({ ...ENDPOINT, OTEL_SDK_DISABLED: 'false' }, 'g')).toBeDefined();
  });

  it('is on with either endpoint variable; the traces one is named when both are set', () => {
    expect(tracingSettings(ENDPOINT, 'relayplane-issuer')).toEqual({
      endpointVariable: 'OTEL_EXPORTER_OTLP_ENDPOINT',
      protocol: 'http/protobuf',
      serviceName: 'relayplane-issuer',
      defaultServiceName: true,
    });
    expect(
      tracingSettings(
        { ...ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces' },
        'relayplane-issuer',
      )?.endpointVariable,
    ).toBe('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  });

  it('takes the three protocols, the traces one first, and refuses any other naming the variable', () => {
    for (const protocol of ['http/protobuf', 'http/json', 'grpc']) {
      expect(tracingSettings({ ...ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL: protocol }, 'g')?.protocol).toBe(
        protocol,
      );
    }
    expect(
      tracingSettings(
        { ...ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json' },
        'g',
      )?.protocol,
    ).toBe('http/json');
    const err = (() => {
      try {
        tracingSettings({ ...ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL: 'http' }, 'g');
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toContain('OTEL_EXPORTER_OTLP_PROTOCOL');
  });

  it('names the service after the app unless OTEL_SERVICE_NAME or a service.name resource attribute does', () => {
    expect(
      tracingSettings({ ...ENDPOINT, OTEL_SERVICE_NAME: 'edge-gw' }, 'relayplane-gateway'),
    ).toMatchObject({
      serviceName: 'edge-gw',
      defaultServiceName: false,
    });
    expect(
      tracingSettings(
        { ...ENDPOINT, OTEL_RESOURCE_ATTRIBUTES: 'team=ops,service.name=gw%20eu' },
        'relayplane-gateway',
      ),
    ).toMatchObject({ serviceName: 'gw eu', defaultServiceName: false });
    expect(
      tracingSettings({ ...ENDPOINT, OTEL_RESOURCE_ATTRIBUTES: 'team=ops' }, 'relayplane-gateway'),
    ).toMatchObject({ serviceName: 'relayplane-gateway', defaultServiceName: true });
  });
});

/** What a fresh Node process loads when tracing.ts starts (or does not start) tracing with `env`. */
function modulesLoaded(env: Record<string, string>): { started: boolean; enabled: boolean; sdk: string[] } {
  const script = `
    import { registerHooks } from 'node:module';
    const loaded = [];
    registerHooks({ load(url, context, next) { loaded.push(url); return next(url, context); } });
    const { startTracing, isTracingEnabled } = await import(${JSON.stringify(pathToFileURL(`${import.meta.dirname}/tracing.ts`).href)});
    const tracing = await startTracing(${JSON.stringify(env)}, 'relayplane-test');
    const enabled = isTracingEnabled();
    await tracing?.shutdown();
    console.log(JSON.stringify({
      started: tracing !== undefined,
      enabled,
      sdk: loaded.filter((u) => /@opentelemetry[+/](?!api[@/])/.test(u)),
    }));`;
  const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    encoding: 'utf8',
    timeout: 30_000,
    env: { PATH: process.env.PATH ?? '' },
  });
  if (child.status !== 0) throw new Error(`child exited ${child.status}: ${child.stderr}`);
  return JSON.parse(child.stdout.trim().split('\n').at(-1) as string);
}

describe('with no endpoint', () => {
  it('no OpenTelemetry SDK module is loaded and tracing stays off (and with one, it is: the check can see it)', () => {
    const off = modulesLoaded({ OTEL_SERVICE_NAME: 'x', OTEL_TRACES_SAMPLER: 'always_on' });
    expect(off).toEqual({ started: false, enabled: false, sdk: [] });
    const disabled = modulesLoaded({ ...ENDPOINT, OTEL_SDK_DISABLED: 'true' });
    expect(disabled).toEqual({ started: false, enabled: false, sdk: [] });
    const on = modulesLoaded(ENDPOINT);
    expect(on.started && on.enabled).toBe(true);
    expect(on.sdk.some((u) => u.includes('sdk-node'))).toBe(true);
  }, 60_000);
});

describe('statementKind', () => {
  it('is the first keyword, never more of the text', () => {
    expect(statementKind("select * from credentials where jti = 'secret'")).toBe('SELECT');
    expect(statementKind('\n  insert into "issuer".credentials select * from unnest($1::text[])')).toBe(
      'INSERT',
    );
    expect(statementKind('/* kysely */ (select 1)')).toBe('SELECT');
    expect(statementKind('-- comment\nBEGIN')).toBe('BEGIN');
    expect(statementKind('')).toBe('OTHER');
    expect(statementKind(undefined)).toBe('OTHER');
  });
});
