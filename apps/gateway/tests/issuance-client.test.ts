/**
 * The gateway's issuance client against real gRPC servers: stream lanes spread over the
 * replicas of a target, a request whose stream breaks is sent once more on another replica,
 * and answers the issuer gave (or timeouts) are never retried.
 *
 * The servers here implement only the issuance streams, with a behaviour the test controls;
 * the real issuer behind this stream is covered by the credential route tests and e2e.
 */
import type { MessageInitShape } from '@bufbuild/protobuf';
import { AppError } from '@relayplane/contract/errors';
import type { ServerBidi } from '@relayplane/proto/grpc';
import {
  type IssueCredentialBatchesRequest,
  type IssueCredentialBatchesResponseSchema,
  type IssueCredentialsRequest,
  type IssueCredentialsResponseSchema,
  IssuerService,
} from '@relayplane/proto/issuer';
import { connect, RpcServer, type ServiceClient } from '@relayplane/shared/rpc';
import { testLogger } from '@relayplane/testing/logger';
import { afterEach, describe, expect, it } from 'vitest';
import { IssuanceClient } from '../src/issuance-client.ts';

type Mode = 'answer' | 'hold' | 'refuse';
type Answer = MessageInitShape<typeof IssueCredentialsResponseSchema>;
type Bidi = ServerBidi<IssueCredentialsRequest, Answer>;
type BatchBidi = ServerBidi<
  IssueCredentialBatchesRequest,
  MessageInitShape<typeof IssueCredentialBatchesResponseSchema>
>;

interface FakeIssuer {
  name: string;
  port: number;
  mode: Mode;
  streams: number;
  /** Streams of the batched method. */
  batchStreams: number;
  requests: number;
  held: number;
  kill(): Promise<void>;
}

const logger = testLogger('issuance-client-test');
const servers: FakeIssuer[] = [];
const clients: ServiceClient<typeof IssuerService>[] = [];

afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  await Promise.all(servers.splice(0).map((s) => s.kill()));
});

/**
 * A fake issuer whose answers the test controls. `old`: it predates IssueCredentialBatches
 * (the method is not registered, so grpc-js answers UNIMPLEMENTED).
 */
async function fakeIssuer(name: string, mode: Mode, options: { old?: boolean } = {}): Promise<FakeIssuer> {
  const server = new RpcServer(logger);
  const state: FakeIssuer = {
    name,
    port: 0,
    mode,
    streams: 0,
    batchStreams: 0,
    requests: 0,
    held: 0,
    kill: () => server.close(0),
  };
  const answer = (msg: IssueCredentialsRequest): Answer | undefined => {
    state.requests++;
    if (state.mode === 'hold') {
      state.held++;
      return undefined;
    }
    return state.mode === 'answer'
      ? {
          requestId: msg.requestId,
          result: {
            case: 'credential',
            value: { token: `token-from-${name}`, jti: `${name}-${state.requests}` },
          },
        }
      : {
          requestId: msg.requestId,
          result: {
            case: 'error',
            value: {
              code: 'unavailable',
              message: 'connection slots are unavailable',
              retryAfterSeconds: 1,
            },
          },
        };
  };
  const issueCredentials = async (stream: Bidi) => {
    state.streams++;
    const sends: Promise<void>[] = [];
    for await (const msg of stream.requests) {
      const res = answer(msg);
      if (res) sends.push(stream.send(res));
    }
    await Promise.all(sends);
  };
  const issueCredentialBatches = async (stream: BatchBidi) => {
    state.streams++;
    state.batchStreams++;
    const sends: Promise<void>[] = [];
    for await (const msg of stream.requests) {
      const responses = msg.requests.flatMap((r) => answer(r) ?? []);
      if (responses.length > 0) sends.push(stream.send({ responses }));
    }
    await Promise.all(sends);
  };
  // Every other method of the service is unused here and answers an error.
  const impl = new Proxy(
    { issueCredentials, issueCredentialBatches },
    {
      get: (target, prop) =>
        prop in target
          ? target[prop as keyof typeof target]
          : async () => {
              throw new AppError('internal', `${String(prop)} is not part of this test`);
            },
    },
  );
  const service = options.old
    ? { ...IssuerService, methods: IssuerService.methods.filter((m) => m.name !== 'IssueCredentialBatches') }
    : IssuerService;
  server.add(service as typeof IssuerService, impl as never);
  state.port = await server.listen('127.0.0.1:0');
  servers.push(state);
  return state;
}

function client(...issuers: FakeIssuer[]) {
  const c = connect(IssuerService, `ipv4:${issuers.map((i) => `127.0.0.1:${i.port}`).join(',')}`, {
    timeoutMs: 5_000,
  });
  clients.push(c);
  return c;
}

const request = { tenantId: 't', projectId: 'p', apiKeyId: 'k', mode: 'live' };

async function until(check: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const start = Date.now();
  while (!check()) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('IssuanceClient', () => {
  it('opens its lanes on every replica of the target as streams age out, and answers each request once', async () => {
    const a = await fakeIssuer('a', 'answer');
    const b = await fakeIssuer('b', 'answer');
    const issuance = new IssuanceClient(client(a, b), { timeoutMs: 5_000, streams: 4, maxAgeMs: 50 }, logger);
    try {
      const answers: string[] = [];
      const start = Date.now();
      while (Date.now() - start < 1_000) {
        const batch = await Promise.all(Array.from({ length: 8 }, () => issuance.issue(request)));
        answers.push(...batch.map((r) => r.token));
        await new Promise((r) => setTimeout(r, 5));
      }
      expect(a.requests + b.requests).toBe(answers.length);
      expect(a.requests, 'requests answered by a').toBeGreaterThan(0);
      expect(b.requests, 'requests answered by b').toBeGreaterThan(0);
      expect(new Set(answers)).toEqual(new Set(['token-from-a', 'token-from-b']));
      // Lanes were replaced as they aged (50 ms × 0.5–1), not one stream per request.
      expect(issuance.stats.streamsOpened).toBeGreaterThan(4);
      expect(issuance.stats.streamsOpened).toBeLessThan(answers.length);
      expect(issuance.stats.retries).toBe(0);
    } finally {
      issuance.close();
    }
  });

  it('sends a request whose replica died once more, on another replica', async () => {
    const dying = await fakeIssuer('dying', 'hold');
    const healthy = await fakeIssuer('healthy', 'answer');
    const issuance = new IssuanceClient(
      client(dying, healthy),
      { timeoutMs: 5_000, streams: 4, maxAgeMs: 60_000 },
      logger,
    );
    try {
      // Requests go round-robin over the lanes; those on the dying replica are held unanswered.
      const pending: Promise<{ token: string }>[] = [];
      await until(() => {
        if (dying.held < 3) pending.push(issuance.issue(request));
        return dying.held >= 3;
      }, 'requests held by the dying replica');
      const held = dying.held;
      await dying.kill();
      const answers = await Promise.all(pending);
      expect(answers.every((r) => r.token === 'token-from-healthy')).toBe(true);
      expect(issuance.stats.retries).toBe(held);
      expect(healthy.requests).toBe(pending.length);
    } finally {
      issuance.close();
    }
  });

  it('answers 503 when the retry fails too, and never retries an answer the issuer gave', async () => {
    const only = await fakeIssuer('only', 'hold');
    const issuance = new IssuanceClient(client(only), { timeoutMs: 5_000, streams: 2 }, logger);
    try {
      const first = issuance.issue(request);
      await until(() => only.held === 1, 'the request to arrive');
      const started = Date.now();
      await only.kill();
      await expect(first).rejects.toMatchObject({ code: 'unavailable', retryAfterSeconds: 1 });
      expect(Date.now() - started, 'failed fast, not at the deadline').toBeLessThan(4_000);
      expect(issuance.stats.retries).toBe(1);
    } finally {
      issuance.close();
    }

    const refusing = await fakeIssuer('refusing', 'refuse');
    const second = new IssuanceClient(client(refusing), { timeoutMs: 5_000, streams: 2 }, logger);
    try {
      await expect(second.issue(request)).rejects.toMatchObject({
        code: 'unavailable',
        message: 'connection slots are unavailable',
      });
      expect(refusing.requests).toBe(1);
      expect(second.stats.retries).toBe(0);
    } finally {
      second.close();
    }
  });

  it('does not retry a request that timed out: it may still complete on the issuer', async () => {
    const slow = await fakeIssuer('slow', 'hold');
    const issuance = new IssuanceClient(client(slow), { timeoutMs: 200, streams: 1 }, logger);
    try {
      await expect(issuance.issue(request)).rejects.toMatchObject({
        code: 'unavailable',
        message: 'the issuer did not answer in time',
      });
      await new Promise((r) => setTimeout(r, 100));
      expect(slow.requests).toBe(1);
      expect(issuance.stats.retries).toBe(0);
    } finally {
      issuance.close();
    }
  });

  it('sends the requests of one turn as one message, and each gets its own answer', async () => {
    const a = await fakeIssuer('a', 'answer');
    const issuance = new IssuanceClient(client(a), { timeoutMs: 5_000, streams: 4 }, logger);
    try {
      const answers = await Promise.all(Array.from({ length: 40 }, () => issuance.issue(request)));
      expect(issuance.stats.messages).toBe(1);
      expect(a.batchStreams).toBe(1);
      expect(a.requests).toBe(40);
      // Every request got the answer to itself (the fake numbers its answers).
      expect(new Set(answers.map((r) => r.jti)).size).toBe(40);
      // Later turns go on the next lanes.
      await issuance.issue(request);
      await issuance.issue(request);
      expect(issuance.stats.messages).toBe(3);
      expect(a.batchStreams).toBe(3);
    } finally {
      issuance.close();
    }
  });

  it('falls back to one request per message when the issuer predates batches, losing nothing', async () => {
    const old = await fakeIssuer('old', 'answer', { old: true });
    const issuance = new IssuanceClient(client(old), { timeoutMs: 5_000, streams: 2 }, logger);
    try {
      const first = await Promise.all(Array.from({ length: 5 }, () => issuance.issue(request)));
      expect(first.map((r) => r.token)).toEqual(Array(5).fill('token-from-old'));
      expect(issuance.stats.fallbacks).toBe(1);
      // Sent again because the issuer never worked on them: not a retry, and exactly once each.
      expect(issuance.stats.retries).toBe(0);
      expect(old.requests).toBe(5);
      expect(old.batchStreams).toBe(0);
      const more = await Promise.all(Array.from({ length: 5 }, () => issuance.issue(request)));
      expect(more).toHaveLength(5);
      expect(old.requests).toBe(10);
      expect(issuance.stats.fallbacks).toBe(1);
    } finally {
      issuance.close();
    }
  });
});
