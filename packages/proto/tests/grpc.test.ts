/**
 * The bridge on its own, with minimal hooks: descriptors in, a working grpc-js server and
 * typed client out — and the in-process transport, which must behave exactly alike: every
 * test of a call runs over both. Policy (AppError, request ids) is tested in @relayplane/shared.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { DescMethod } from '@bufbuild/protobuf';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Health, HealthCheckResponse_ServingStatus as Status } from '../src/gen/grpc/health/v1/health_pb.js';
import { BillingService } from '../src/gen/relayplane/billing/v1/billing_pb.js';
import { IssuerService } from '../src/gen/relayplane/issuer/v1/issuer_pb.js';
import {
  addService,
  type CallInfo,
  type ClientHooks,
  createClient,
  grpc,
  InProcessServer,
  type ServerBidi,
  type ServerHooks,
  type ServiceClient,
  type ServiceImpl,
} from '../src/grpc.ts';

class ClientFailure extends Error {
  readonly grpcCode: number;
  readonly method: string;
  readonly tag: string | undefined;
  constructor(err: grpc.ServiceError, method: DescMethod) {
    super(err.details);
    this.grpcCode = err.code;
    this.method = method.name;
    this.tag = err.metadata?.get('x-tag')[0]?.toString();
  }
}

const seen: { method: string; around: boolean }[] = [];

const serverHooks: ServerHooks = {
  async around(method, _call, run) {
    seen.push({ method: method.name, around: true });
    return run();
  },
  toStatus(err) {
    const metadata = new grpc.Metadata();
    metadata.set('x-tag', 'from-hooks');
    return { code: grpc.status.FAILED_PRECONDITION, details: `mapped: ${(err as Error).message}`, metadata };
  },
};

function clientHooks(defaultTimeoutMs = 5_000): ClientHooks {
  return {
    defaultTimeoutMs,
    outgoingMetadata: () => {
      const md = new grpc.Metadata();
      md.set('x-from-client', 'yes');
      return md;
    },
    fromStatus: (err, method) => new ClientFailure(err, method),
  };
}

function waitForAbort(call: CallInfo, timeoutMs: number): Promise<'aborted' | 'timeout'> {
  return new Promise((resolve) => {
    if (call.signal.aborted) return resolve('aborted');
    const timer = setTimeout(() => resolve('timeout'), timeoutMs);
    call.signal.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve('aborted');
    });
  });
}

/** A store the caller has entered: a handler must not see it, whichever transport carried the call. */
const callerStore = new AsyncLocalStorage<string>();

describe.each(['gRPC', 'in-process'] as const)('grpc bridge: generated descriptors over %s', (transport) => {
  const server = new grpc.Server();
  const inProcess = new InProcessServer();
  let address: string;
  let storeInHandler: string | undefined = 'unset';
  const aborts: ('aborted' | 'timeout')[] = [];
  let lastMetadata: grpc.Metadata | undefined;
  let watchScript: 'ok' | 'fail-after-one' | 'fail-at-once' | 'hang' = 'ok';

  const health: ServiceImpl<typeof Health> = {
    async check(req, call) {
      lastMetadata = call.metadata;
      storeInHandler = callerStore.getStore();
      if (req.service === 'boom') throw new Error('handler failed');
      if (req.service === 'slow') {
        aborts.push(await waitForAbort(call, 5_000));
        return { status: Status.UNKNOWN };
      }
      return { status: req.service === '' ? Status.SERVING : Status.SERVICE_UNKNOWN };
    },
    async *watch(_req, call) {
      if (watchScript === 'fail-at-once') throw new Error('watch failed at once');
      yield { status: Status.SERVING };
      if (watchScript === 'fail-after-one') throw new Error('watch failed');
      if (watchScript === 'hang') {
        aborts.push(await waitForAbort(call, 5_000));
        return;
      }
      yield { status: Status.NOT_SERVING };
    },
  };

  let client: ServiceClient<typeof Health>;

  beforeAll(async () => {
    if (transport === 'gRPC') {
      addService(server, Health, health, serverHooks);
      const port = await new Promise<number>((resolve, reject) =>
        server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) =>
          err ? reject(err) : resolve(p),
        ),
      );
      address = `127.0.0.1:${port}`;
    } else {
      inProcess.add(Health, health, serverHooks);
      address = 'in-process:proto-bridge-test';
      inProcess.listen(address);
    }
    client = createClient(Health, address, clientHooks());
  });

  afterAll(async () => {
    client?.close();
    server.forceShutdown();
    await inProcess.close(0);
  });

  it("runs the handler in its own async context: the caller's AsyncLocalStorage does not reach it", async () => {
    storeInHandler = 'unset';
    await callerStore.run('caller', () => client.check({ service: '' }));
    expect(storeInHandler).toBeUndefined();
  });

  it('hands the handler a copy of the metadata the client sent', async () => {
    const metadata = new grpc.Metadata();
    metadata.set('x-extra', 'one');
    await client.check({ service: '' }, { metadata });
    expect(lastMetadata?.get('x-extra')).toEqual(['one']);
    expect(lastMetadata?.get('x-from-client')).toEqual(['yes']);
  });

  it('serves a unary method through the hooks and returns a typed message', async () => {
    const res = await client.check({ service: '' });
    expect(res.$typeName).toBe('grpc.health.v1.HealthCheckResponse');
    expect(res.status).toBe(Status.SERVING);
    expect(seen.at(-1)).toEqual({ method: 'Check', around: true });
    expect(lastMetadata?.get('x-from-client')).toEqual(['yes']);
  });

  it('sends the status from toStatus, with its metadata, to fromStatus on the client', async () => {
    const err = await client.check({ service: 'boom' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ClientFailure);
    expect(err).toMatchObject({
      grpcCode: grpc.status.FAILED_PRECONDITION,
      message: 'mapped: handler failed',
      method: 'Check',
      tag: 'from-hooks',
    });
  });

  it('streams every message of a server-streaming method, then ends', async () => {
    watchScript = 'ok';
    const statuses: Status[] = [];
    for await (const msg of client.watch({ service: '' })) statuses.push(msg.status);
    expect(statuses).toEqual([Status.SERVING, Status.NOT_SERVING]);
  });

  it('a streaming handler that fails after a message delivers the message, then the mapped status', async () => {
    watchScript = 'fail-after-one';
    const statuses: Status[] = [];
    const err = await (async () => {
      for await (const msg of client.watch({ service: '' })) statuses.push(msg.status);
    })().catch((e: unknown) => e);
    expect(statuses).toEqual([Status.SERVING]);
    expect(err).toBeInstanceOf(ClientFailure);
    expect(err).toMatchObject({ grpcCode: grpc.status.FAILED_PRECONDITION, message: 'mapped: watch failed' });
  });

  it('a streaming handler that fails before any message delivers the mapped status', async () => {
    watchScript = 'fail-at-once';
    const err = await (async () => {
      for await (const _ of client.watch({ service: '' })) {
        // nothing arrives
      }
    })().catch((e: unknown) => e);
    expect(err).toMatchObject({
      grpcCode: grpc.status.FAILED_PRECONDITION,
      message: 'mapped: watch failed at once',
    });
  });

  it('the client deadline reaches the server: the handler signal aborts and the client gets DEADLINE_EXCEEDED', async () => {
    const before = aborts.length;
    const fast = createClient(Health, address, clientHooks(150));
    try {
      const err = await fast.check({ service: 'slow' }).catch((e: unknown) => e);
      expect(err).toMatchObject({ grpcCode: grpc.status.DEADLINE_EXCEEDED });
      await expect.poll(() => aborts.slice(before), { timeout: 2_000 }).toEqual(['aborted']);
    } finally {
      fast.close();
    }
  });

  it('aborting the client signal cancels a unary call and the handler sees it', async () => {
    const before = aborts.length;
    const abort = new AbortController();
    const pending = client.check({ service: 'slow' }, { signal: abort.signal }).catch((e: unknown) => e);
    await expect.poll(() => seen.filter((s) => s.method === 'Check').length).toBeGreaterThan(0);
    setImmediate(() => abort.abort());
    expect(await pending).toMatchObject({ grpcCode: grpc.status.CANCELLED });
    await expect.poll(() => aborts.slice(before), { timeout: 2_000 }).toEqual(['aborted']);
  });

  it('aborting the client signal ends a stream and the streaming handler sees it', async () => {
    watchScript = 'hang';
    const before = aborts.length;
    const abort = new AbortController();
    const stream = client.watch({ service: '' }, { signal: abort.signal })[Symbol.asyncIterator]();
    expect((await stream.next()).value?.status).toBe(Status.SERVING);
    abort.abort();
    const end = await stream.next().catch((e: unknown) => e);
    expect(end).toMatchObject({ grpcCode: grpc.status.CANCELLED });
    await expect.poll(() => aborts.slice(before), { timeout: 2_000 }).toEqual(['aborted']);
  });

  it('an already-aborted signal cancels the call instead of sending it', async () => {
    const abort = new AbortController();
    abort.abort();
    const err = await client.check({ service: '' }, { signal: abort.signal }).catch((e: unknown) => e);
    expect(err).toMatchObject({ grpcCode: grpc.status.CANCELLED });
  });

  it('an unimplemented method path answers UNIMPLEMENTED', async () => {
    const billing = createClient(BillingService, address, clientHooks());
    try {
      const err = await billing.listPlans({}).catch((e: unknown) => e);
      expect(err).toMatchObject({ grpcCode: grpc.status.UNIMPLEMENTED });
    } finally {
      billing.close();
    }
  });
});

describe('grpc bridge: registration', () => {
  it('refuses to register a service with a method that has no implementation, on either transport', () => {
    const incomplete = { listPlans: async () => ({}) } as unknown as ServiceImpl<typeof BillingService>;
    expect(() => addService(new grpc.Server(), BillingService, incomplete, serverHooks)).toThrow(
      /relayplane\.billing\.v1\.BillingService\.\w+ has no implementation/,
    );
    expect(() => new InProcessServer().add(BillingService, incomplete, serverHooks)).toThrow(
      /relayplane\.billing\.v1\.BillingService\.\w+ has no implementation/,
    );
  });

  it('an in-process address can be taken once at a time, as a port can', async () => {
    const first = new InProcessServer();
    first.listen('in-process:taken-once');
    expect(() => new InProcessServer().listen('in-process:taken-once')).toThrow(/already in use/);
    await first.close(0);
    const second = new InProcessServer();
    second.listen('in-process:taken-once');
    await second.close(0);
  });
});

describe.each(['gRPC', 'in-process'] as const)('grpc bridge: a bidi stream over %s', (transport) => {
  type Script = 'echo' | 'fail-after-one' | 'hang';
  let script: Script = 'echo';
  const aborts: ('aborted' | 'timeout')[] = [];
  const issueCredentials = async (
    stream: ServerBidi<{ requestId: bigint }, { requestId: bigint }>,
    call: CallInfo,
  ): Promise<void> => {
    if (script === 'hang') {
      aborts.push(await waitForAbort(call, 5_000));
      return;
    }
    for await (const req of stream.requests) {
      await stream.send({ requestId: req.requestId * 10n });
      if (script === 'fail-after-one') throw new Error('stream failed');
    }
  };
  // Every other method of the service: not called here.
  const impl = new Proxy(
    {},
    {
      get: (_target, name) =>
        name === 'issueCredentials'
          ? issueCredentials
          : async () => {
              throw new Error('not called');
            },
    },
  ) as ServiceImpl<typeof IssuerService>;
  const server = new grpc.Server();
  const inProcess = new InProcessServer();
  let client: ServiceClient<typeof IssuerService>;

  beforeAll(async () => {
    let address: string;
    if (transport === 'gRPC') {
      addService(server, IssuerService, impl, serverHooks);
      const port = await new Promise<number>((resolve, reject) =>
        server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) =>
          err ? reject(err) : resolve(p),
        ),
      );
      address = `127.0.0.1:${port}`;
    } else {
      inProcess.add(IssuerService, impl, serverHooks);
      address = 'in-process:proto-bidi-test';
      inProcess.listen(address);
    }
    client = createClient(IssuerService, address, clientHooks());
  });

  afterAll(async () => {
    client?.close();
    server.forceShutdown();
    await inProcess.close(0);
  });

  it('carries requests in and responses out in order, and ends when the client half-closes', async () => {
    script = 'echo';
    const stream = client.issueCredentials();
    for (const id of [1n, 2n, 3n]) stream.send({ requestId: id });
    stream.end();
    const ids: bigint[] = [];
    for await (const res of stream.responses) ids.push(res.requestId);
    expect(ids).toEqual([10n, 20n, 30n]);
  });

  it('a handler that fails after a response delivers it, then the mapped status', async () => {
    script = 'fail-after-one';
    const stream = client.issueCredentials();
    stream.send({ requestId: 4n });
    stream.send({ requestId: 5n });
    const ids: bigint[] = [];
    const err = await (async () => {
      for await (const res of stream.responses) ids.push(res.requestId);
    })().catch((e: unknown) => e);
    expect(ids).toEqual([40n]);
    expect(err).toBeInstanceOf(ClientFailure);
    expect(err).toMatchObject({
      grpcCode: grpc.status.FAILED_PRECONDITION,
      message: 'mapped: stream failed',
    });
  });

  it('cancel() ends the stream with CANCELLED and the handler sees it', async () => {
    script = 'hang';
    const before = aborts.length;
    const stream = client.issueCredentials();
    stream.send({ requestId: 6n });
    await expect.poll(() => seen.filter((s) => s.method === 'IssueCredentials').length).toBeGreaterThan(0);
    stream.cancel();
    const err = await (async () => {
      for await (const _ of stream.responses) {
        // nothing arrives
      }
    })().catch((e: unknown) => e);
    expect(err).toMatchObject({ grpcCode: grpc.status.CANCELLED });
    await expect.poll(() => aborts.slice(before), { timeout: 2_000 }).toEqual(['aborted']);
    seen.length = 0;
  });
});
