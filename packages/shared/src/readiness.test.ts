import { describe, expect, it } from 'vitest';
import { ConfigError } from './config.ts';
import { healthImpl, ServingStatus } from './health.ts';
import { createLogger } from './logger.ts';
import { retryUntilDone, watchDatabase } from './readiness.ts';

function capture() {
  const lines: { level: number; msg: string; err?: { message: string } }[] = [];
  const stream = { write: (chunk: string) => lines.push(JSON.parse(chunk)) };
  return { lines, logger: createLogger({ level: 'info', service: 'svc' }, stream) };
}

/** An attempt that fails with each of `failures` in turn, then answers 'done'. */
function failingThen(failures: Error[]) {
  const calls = { count: 0 };
  const attempt = async () => {
    const failure = failures[calls.count++];
    if (failure) throw failure;
    return 'done';
  };
  return { calls, attempt };
}

const refused = () =>
  Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
const FAST = { initialDelayMs: 1, maxDelayMs: 4 };

describe('retryUntilDone', () => {
  it('tries again until the attempt succeeds and answers its result', async () => {
    const { logger } = capture();
    const { calls, attempt } = failingThen([refused(), refused(), refused()]);
    expect(await retryUntilDone('migrations', attempt, { logger, ...FAST })).toBe('done');
    expect(calls.count).toBe(4);
  });

  it('logs once per change of state, not once per attempt: the first failure, a different one, the success', async () => {
    const { logger, lines } = capture();
    const timeout = new Error('timeout expired');
    const { attempt } = failingThen([refused(), refused(), refused(), timeout, timeout, refused()]);
    await retryUntilDone('migrations', attempt, { logger, ...FAST });
    expect(lines.map((l) => [l.msg, l.err?.message])).toEqual([
      ['migrations: waiting for a dependency, retrying with backoff', 'connect ECONNREFUSED 127.0.0.1:5432'],
      ['migrations: waiting for a dependency, retrying with backoff', 'timeout expired'],
      ['migrations: waiting for a dependency, retrying with backoff', 'connect ECONNREFUSED 127.0.0.1:5432'],
      ['migrations: done', undefined],
    ]);
  });

  it('logs nothing when the first attempt succeeds', async () => {
    const { logger, lines } = capture();
    await retryUntilDone('migrations', async () => 1, { logger });
    expect(lines).toEqual([]);
  });

  it('names the first error of an AggregateError (pg reports one per address it tried)', async () => {
    const { logger, lines } = capture();
    const { attempt } = failingThen([new AggregateError([refused(), refused()])]);
    await retryUntilDone('migrations', attempt, { logger, ...FAST });
    expect(lines[0]?.err?.message).toBe('connect ECONNREFUSED 127.0.0.1:5432');
  });

  it('does not retry a configuration error: no wait fixes a bad setting', async () => {
    const { logger } = capture();
    const bad = new ConfigError('RELAYPLANE_KEK', 'does not match');
    const { calls, attempt } = failingThen([bad]);
    await expect(retryUntilDone('signing keys', attempt, { logger, ...FAST })).rejects.toBe(bad);
    expect(calls.count).toBe(1);
  });

  it('caps the backoff: many failures in a row never wait longer than the cap each', async () => {
    const { logger } = capture();
    // Uncapped, 14 doublings from 1 ms would wait at least 8 s in all.
    const { attempt } = failingThen(Array.from({ length: 14 }, refused));
    const startedAt = performance.now();
    await retryUntilDone('x', attempt, { logger, initialDelayMs: 1, maxDelayMs: 8 });
    expect(performance.now() - startedAt).toBeLessThan(1_000);
  });

  it('ends at once when its signal aborts during a wait, and tries no more', async () => {
    const { logger } = capture();
    const stopping = new AbortController();
    let calls = 0;
    const waiting = retryUntilDone(
      'migrations',
      async () => {
        calls++;
        if (calls === 1) setTimeout(() => stopping.abort(new Error('stopping')), 20);
        throw refused();
      },
      { logger, signal: stopping.signal, initialDelayMs: 60_000, maxDelayMs: 60_000 },
    );
    const startedAt = performance.now();
    await expect(waiting).rejects.toThrow();
    expect(performance.now() - startedAt).toBeLessThan(1_000);
    expect(calls).toBe(1);
  });

  it('reports the abort, not the failure it caused, when aborted during an attempt', async () => {
    const { logger, lines } = capture();
    const stopping = new AbortController();
    const waiting = retryUntilDone(
      'migrations',
      async () => {
        stopping.abort(new Error('admin is stopping'));
        throw new Error('Connection terminated'); // what closing the pool does to a query
      },
      { logger, signal: stopping.signal },
    );
    await expect(waiting).rejects.toThrow('admin is stopping');
    expect(lines).toEqual([]);
  });
});

describe('watchDatabase', () => {
  it("sets the service's readiness from the database and leaves liveness ('') SERVING", async () => {
    const health = healthImpl();
    let up = false;
    const { logger } = capture();
    const watch = watchDatabase(health, ['relayplane.x.v1.XService'], { ping: async () => up }, logger);
    try {
      await watch.check();
      expect(health.get('relayplane.x.v1.XService')).toBe(ServingStatus.NOT_SERVING);
      expect(health.get('')).toBe(ServingStatus.SERVING);
      up = true;
      await watch.check();
      expect(health.get('relayplane.x.v1.XService')).toBe(ServingStatus.SERVING);
    } finally {
      watch.stop();
    }
  });
});
