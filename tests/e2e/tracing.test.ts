/**
 * Traces across every hop (issue 21, docs/tracing.md): the four apps as separate processes,
 * exporting OTLP/HTTP to a receiver inside this test. A `POST /api/v1/credentials` sent with a
 * W3C `traceparent` yields spans of that trace (or linked to it) from the gateway and the issuer,
 * through which the Redis and PostgreSQL work done for it is reached; the gateway's log line for
 * the request names the trace; no exported attribute holds a secret. The spans received go to the
 * secrets audit with the processes' output (`processes/tracing-otlp-spans-*.jsonl`).
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { auditSink } from '@relayplane/testing/audit';
import {
  createTestDatabase,
  createTestRedis,
  type TestDatabase,
  type TestRedis,
} from '@relayplane/testing/storage';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api, type ApiResponse } from '../support/api.ts';
import { type Distributed, startDistributed } from '../support/distributed.ts';
import { waitFor } from '../support/ports.ts';

const OWNER = { email: 'ops@example.test', password: 'tracing e2e owner password' };
const TENANT = { email: 'traced@example.test', password: 'traced tenant password 123' };
const KEK = Buffer.alloc(32, 21).toString('base64');

/** An OTLP attribute value as the JSON encoding has it. */
interface AnyValue {
  stringValue?: string;
  intValue?: number | string;
  boolValue?: boolean;
  doubleValue?: number;
  arrayValue?: { values?: AnyValue[] };
}
interface KeyValue {
  key: string;
  value: AnyValue;
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: KeyValue[];
  links?: { traceId: string; spanId: string }[];
  status?: { code?: number };
}
interface ExportRequest {
  resourceSpans?: { resource?: { attributes?: KeyValue[] }; scopeSpans?: { spans?: OtlpSpan[] }[] }[];
}

/** A received span with its service's name and its attributes as a plain object. */
interface Received extends OtlpSpan {
  service: string;
  attrs: Record<string, string | number | boolean>;
}

function plain(value: AnyValue): string | number | boolean {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.doubleValue !== undefined) return value.doubleValue;
  return JSON.stringify(value);
}

/** The OTLP/HTTP receiver: JSON exports are parsed, protobuf ones kept raw (with their content type). */
class Receiver {
  readonly spans: Received[] = [];
  readonly protobufBodies: Buffer[] = [];
  readonly #server: Server;
  readonly #audit = auditSink('processes', 'tracing-otlp-spans', 'jsonl');
  requests = 0;

  private constructor(server: Server) {
    this.#server = server;
  }

  static async start(): Promise<Receiver> {
    let receiver: Receiver | undefined;
    const server = createServer((req, res) => {
      receiver?.handle(req).then(
        () => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end('{}');
        },
        () => {
          res.writeHead(400);
          res.end();
        },
      );
    });
    receiver = new Receiver(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return receiver;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  async handle(req: IncomingMessage): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    if (req.method !== 'POST' || req.url !== '/v1/traces')
      throw new Error(`unexpected ${req.method} ${req.url}`);
    this.requests++;
    this.#audit?.write(body.toString('latin1'));
    this.#audit?.write('\n');
    if (req.headers['content-type']?.startsWith('application/x-protobuf')) {
      this.protobufBodies.push(body);
      return;
    }
    const parsed = JSON.parse(body.toString('utf8')) as ExportRequest;
    for (const rs of parsed.resourceSpans ?? []) {
      const resource = Object.fromEntries(
        (rs.resource?.attributes ?? []).map((a) => [a.key, plain(a.value)]),
      );
      for (const ss of rs.scopeSpans ?? []) {
        for (const span of ss.spans ?? []) {
          this.spans.push({
            ...span,
            service: String(resource['service.name']),
            attrs: Object.fromEntries((span.attributes ?? []).map((a) => [a.key, plain(a.value)])),
          });
        }
      }
    }
  }

  /** The spans of `traceId` and, transitively, every span linked to one of them or a child of one. */
  reachable(traceId: string): Received[] {
    const found = new Map<string, Received>();
    let grew = true;
    while (grew) {
      grew = false;
      for (const span of this.spans) {
        if (found.has(span.spanId)) continue;
        const linked = (span.links ?? []).some((l) => found.has(l.spanId));
        const child = span.parentSpanId !== undefined && found.has(span.parentSpanId);
        if (span.traceId === traceId || linked || child) {
          found.set(span.spanId, span);
          grew = true;
        }
      }
    }
    return [...found.values()];
  }

  async close(): Promise<void> {
    this.#audit?.close();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

describe('OpenTelemetry traces across the distributed topology', () => {
  let database: TestDatabase;
  let redis: TestRedis;
  let receiver: Receiver;
  let system: Distributed;
  let api: Api;
  /** The tenant owner's login and a project API key, made once for every test. */
  let login: ApiResponse;
  let key: ApiResponse;

  beforeAll(async () => {
    database = await createTestDatabase('e2e_tracing');
    redis = createTestRedis('e2e_tracing');
    receiver = await Receiver.start();
    system = await startDistributed({
      label: 'tracing',
      databaseUrl: database.url,
      redisUrl: redis.url,
      redisPrefix: redis.prefix,
      kek: KEK,
      bootstrap: OWNER,
      replicas: { issuer: 2 },
      extraEnv: {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        // Exported within 200 ms instead of 5 s: the test waits for what it expects, no longer.
        OTEL_BSP_SCHEDULE_DELAY: '200',
        OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=e2e',
      },
      // Admin and billing export protobuf: the receiver checks those bodies for the trace's id.
      appEnv: {
        admin: { OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' },
        billing: { OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' },
      },
    });
    api = await Api.connect(system.baseUrl);
    expect(
      (await api.request('POST', '/admin/v1/auth/signup', { body: { ...TENANT, tenant_name: 'Traced' } }))
        .status,
    ).toBe(201);
    login = await api.request('POST', '/admin/v1/auth/login', { body: TENANT });
    const auth = { authorization: `Bearer ${login.body.token}` };
    const project = await api.request('POST', '/admin/v1/projects', { headers: auth, body: { name: 'p' } });
    key = await api.request('POST', `/admin/v1/projects/${project.body.id}/api-keys`, {
      headers: auth,
      body: { scopes: ['relay:session'] },
    });
    expect(key.status).toBe(201);
  }, 180_000);

  /** A credential request carrying a fresh W3C traceparent with `flags` (01 sampled, 00 not): 201. */
  const issueTraced = async (flags: '00' | '01') => {
    const traceId = randomBytes(16).toString('hex');
    const callerSpanId = randomBytes(8).toString('hex');
    const issued = await api.request('POST', '/api/v1/credentials', {
      headers: { 'x-api-key': key.body.key, traceparent: `00-${traceId}-${callerSpanId}-${flags}` },
      body: {},
    });
    expect(issued.status).toBe(201);
    return { traceId, callerSpanId, issued };
  };

  /** The gateway's JSON log lines so far. */
  const gatewayLines = () =>
    (system.procs.find((p) => p.name.startsWith('tracing-gateway'))?.output() ?? '')
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { msg?: string; trace_id?: string; span_id?: string; reqId?: string });

  afterAll(async () => {
    const codes = (await system?.stop()) ?? [];
    await receiver?.close();
    await redis?.clean();
    await database?.drop();
    expect(codes.every((c) => c === 0)).toBe(true);
  });

  it('a credential request sent with a traceparent is traced through the gateway and the issuer to Redis and PostgreSQL, and its log line names the trace', async () => {
    const { traceId, callerSpanId, issued } = await issueTraced('01');

    // The gateway's server span continues the caller's; the issuer's issuance continues the gateway's.
    await waitFor(
      async () => {
        const spans = receiver.reachable(traceId);
        return (
          spans.some(
            (s) => s.service === 'relayplane-gateway' && s.attrs['http.route'] === '/api/v1/credentials',
          ) &&
          spans.some(
            (s) => s.service === 'relayplane-issuer' && s.attrs['db.system.name'] === 'postgresql',
          ) &&
          spans.some((s) => s.service === 'relayplane-issuer' && s.attrs['db.system.name'] === 'redis')
        );
      },
      20_000,
      "the gateway's span and the issuer's Redis and PostgreSQL spans reachable from the request's trace",
    );
    const spans = receiver.reachable(traceId);
    const http = spans.find(
      (s) => s.service === 'relayplane-gateway' && s.attrs['http.route'] === '/api/v1/credentials',
    );
    expect(http, 'the gateway span of POST /api/v1/credentials').toBeDefined();
    expect(http).toMatchObject({ traceId, parentSpanId: callerSpanId, name: 'POST /api/v1/credentials' });
    expect(http?.attrs).toMatchObject({
      'http.request.method': 'POST',
      'http.response.status_code': 201,
      'relayplane.api_key.cache': 'lookup',
    });

    // The API key and the plan were not cached yet: the gateway asked admin and billing, in the trace.
    for (const method of [
      'relayplane.admin.v1.AdminService/VerifyApiKey',
      'relayplane.billing.v1.BillingService/GetEntitlements',
    ]) {
      const call = spans.find((s) => s.service === 'relayplane-gateway' && s.name === method);
      expect(call, method).toMatchObject({ traceId, parentSpanId: http?.spanId, kind: 3 /* CLIENT */ });
      expect(call?.attrs['rpc.grpc.status_code']).toBe(0);
    }
    const traceBytes = Buffer.from(traceId, 'hex');
    await waitFor(
      async () =>
        ['relayplane-admin', 'relayplane-billing'].every((service) =>
          receiver.protobufBodies.some((b) => b.includes(service) && b.includes(traceBytes)),
        ),
      20_000,
      "admin's and billing's protobuf exports with spans of the trace",
    );

    const issue = spans.find((s) => s.service === 'relayplane-issuer' && s.name === 'issue credential');
    expect(issue, "the issuer's span of this request's issuance").toMatchObject({
      traceId,
      parentSpanId: http?.spanId,
    });
    const signing = spans.find((s) => s.name === 'sign credential');
    expect(signing).toMatchObject({ traceId, parentSpanId: issue?.spanId });

    // Batched work: its span links to the issuance, and the storage spans are its children.
    const slots = spans.find((s) => s.name === 'reserve slots');
    expect(slots?.links?.map((l) => l.spanId)).toContain(issue?.spanId);
    const script = spans.find(
      (s) => s.parentSpanId === slots?.spanId && s.attrs['db.system.name'] === 'redis',
    );
    expect(script?.name).toMatch(/^EVAL(SHA)?$/);
    const record = spans.find((s) => s.name === 'record credentials');
    expect(record?.links?.map((l) => l.spanId)).toContain(issue?.spanId);
    const insert = spans.find(
      (s) => s.parentSpanId === record?.spanId && s.attrs['db.system.name'] === 'postgresql',
    );
    expect(insert?.attrs).toMatchObject({ 'db.operation.name': 'INSERT', 'db.system.name': 'postgresql' });

    // The default service names (no OTEL_SERVICE_NAME is set).
    const services = spans.map((s) => s.service);
    expect(services).toContain('relayplane-gateway');
    expect(services).toContain('relayplane-issuer');

    // The gateway's log lines for the request carry the trace and its span.
    const lines = gatewayLines();
    const incoming = lines.find((l) => l.trace_id === traceId && l.msg === 'incoming request');
    expect(incoming, "the gateway's incoming request line with the trace id").toBeDefined();
    expect(incoming?.span_id).toBe(http?.spanId);
    expect(lines.find((l) => l.trace_id === traceId && l.msg === 'request completed')?.span_id).toBe(
      http?.spanId,
    );

    // No secret in any exported attribute: the API key, the credential, passwords, the session token.
    const exported = JSON.stringify(receiver.spans);
    for (const secret of [
      key.body.key,
      issued.body.token,
      String(issued.body.token).split('.')[2],
      login.body.token,
      TENANT.password,
      OWNER.password,
      KEK,
    ]) {
      expect(typeof secret === 'string' && secret.length > 8).toBe(true);
      expect(exported.includes(secret as string)).toBe(false);
    }
    for (const span of receiver.spans) {
      expect(
        Object.keys(span.attrs).filter((k) => /url\.(full|path|query)|db\.query\.text|statement/.test(k)),
      ).toEqual([]);
    }
  }, 60_000);

  it('a request the caller did not sample is recorded nowhere, and its log lines still name its trace', async () => {
    const { traceId, callerSpanId } = await issueTraced('00');
    // A sampled request after it: once its spans arrived, the unsampled one's would have too.
    const { traceId: marker } = await issueTraced('01');
    await waitFor(
      async () => receiver.reachable(marker).some((s) => s.service === 'relayplane-issuer'),
      20_000,
      "the sampled request's issuer spans",
    );
    expect(receiver.spans.filter((s) => s.traceId === traceId)).toEqual([]);
    expect(receiver.reachable(traceId)).toEqual([]);

    // Its lines carry the caller's trace id and the gateway's (unrecorded) span id, both lines the same.
    const lines = gatewayLines().filter((l) => l.trace_id === traceId);
    const incoming = lines.find((l) => l.msg === 'incoming request');
    const completed = lines.find((l) => l.msg === 'request completed');
    expect(incoming?.span_id).toMatch(/^[0-9a-f]{16}$/);
    expect(incoming?.span_id).not.toBe(callerSpanId);
    expect(completed?.span_id).toBe(incoming?.span_id);
    expect(completed?.reqId).toBe(incoming?.reqId);
  }, 60_000);

  it('spans nothing for probes, and each service names itself', async () => {
    const before = receiver.spans.length;
    expect((await fetch(`${system.baseUrl}/readyz`)).status).toBe(200);
    expect((await fetch(`${system.baseUrl}/healthz`)).status).toBe(200);
    const probeTrace = randomBytes(16).toString('hex');
    await fetch(`${system.baseUrl}/healthz`, {
      headers: { traceparent: `00-${probeTrace}-${randomBytes(8).toString('hex')}-01` },
    });
    // A traced request after the probes: once its span arrived, the probes' would have too.
    const marker = randomBytes(16).toString('hex');
    await fetch(`${system.baseUrl}/v1/plans`, {
      headers: { traceparent: `00-${marker}-${randomBytes(8).toString('hex')}-01` },
    });
    await waitFor(async () => receiver.spans.some((s) => s.traceId === marker), 10_000, 'the marker span');
    const after = receiver.spans.slice(before);
    expect(after.some((s) => s.traceId === probeTrace)).toBe(false);
    expect(
      after.some((s) => s.attrs['http.route'] === '/healthz' || s.attrs['http.route'] === '/readyz'),
    ).toBe(false);
  }, 30_000);
});
