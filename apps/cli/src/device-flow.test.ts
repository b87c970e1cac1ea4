import { describe, expect, it } from 'vitest';
import { DEVICE_CODE_GRANT, type DeviceAuthorization, pollForToken } from './device-flow.ts';
import { CliError, EXIT } from './errors.ts';
import { ApiClient } from './http.ts';

type Answer = { status: number; body: unknown } | 'network';

/** A token endpoint that answers a script, and a clock that only moves when the client sleeps. */
function rig(answers: Answer[], grant: Partial<DeviceAuthorization> = {}) {
  let now = 1_000_000;
  const sleeps: number[] = [];
  const requests: { at: number; form: URLSearchParams }[] = [];
  const api = new ApiClient('http://rp.test', async (_url, init) => {
    requests.push({ at: now, form: new URLSearchParams(String(init.body)) });
    const next = answers.shift();
    if (next === undefined) throw new Error('more polls than scripted');
    if (next === 'network') throw new TypeError('fetch failed', { cause: { code: 'ECONNRESET' } });
    return new Response(JSON.stringify(next.body), {
      status: next.status,
      headers: { 'content-type': 'application/json' },
    });
  });
  const clock = {
    now: () => now,
    sleep: async (ms: number) => {
      sleeps.push(ms);
      now += ms;
    },
  };
  const auth: DeviceAuthorization = {
    device_code: 'dev-123',
    user_code: 'ABCD-EFGH',
    verification_uri: 'http://rp.test/device',
    expires_in: 600,
    interval: 5,
    ...grant,
  };
  return { run: () => pollForToken(api, 'http://rp.test/token', auth, clock), sleeps, requests };
}

const pending = { status: 400, body: { error: 'authorization_pending' } };
const slowDown = { status: 400, body: { error: 'slow_down' } };
const granted = { status: 200, body: { access_token: 'rpc_tok', token_type: 'Bearer', expires_in: 3600 } };

async function failure(promise: Promise<unknown>): Promise<CliError> {
  const err = await promise.catch((e: unknown) => e);
  expect(err).toBeInstanceOf(CliError);
  return err as CliError;
}

describe('device flow polling (RFC 8628)', () => {
  it('waits the interval before every poll and sends the device-code grant as a public client', async () => {
    const r = rig([pending, pending, granted]);
    await expect(r.run()).resolves.toMatchObject({ access_token: 'rpc_tok' });
    expect(r.sleeps).toEqual([5000, 5000, 5000]);
    expect(Object.fromEntries(r.requests[0]?.form ?? [])).toEqual({
      grant_type: DEVICE_CODE_GRANT,
      device_code: 'dev-123',
      client_id: 'relayplane-cli',
    });
  });

  it('adds 5 seconds to the interval on every slow_down, for all later polls', async () => {
    const r = rig([slowDown, pending, slowDown, pending, granted]);
    await r.run();
    expect(r.sleeps).toEqual([5000, 10000, 10000, 15000, 15000]);
  });

  it('uses 5 seconds when the server names no interval, and never polls faster than it asks', async () => {
    const unnamed = rig([pending, granted], { interval: undefined });
    await unnamed.run();
    expect(unnamed.sleeps).toEqual([5000, 5000]);
    const slow = rig([pending, granted], { interval: 12 });
    await slow.run();
    const gaps = slow.requests.slice(1).map((q, i) => q.at - (slow.requests[i]?.at ?? 0));
    expect(gaps.every((g) => g >= 12_000)).toBe(true);
  });

  it('stops with exit 7 on access_denied and on expired_token', async () => {
    const denied = await failure(rig([pending, { status: 400, body: { error: 'access_denied' } }]).run());
    expect(denied.exitCode).toBe(EXIT.loginRefused);
    expect(denied.message).toContain('denied');
    const expired = await failure(rig([{ status: 400, body: { error: 'expired_token' } }]).run());
    expect(expired.exitCode).toBe(EXIT.loginRefused);
    expect(expired.message).toContain('expired');
  });

  it('stops at expires_in without polling after it', async () => {
    const r = rig(
      Array.from({ length: 10 }, () => pending),
      { expires_in: 12, interval: 5 },
    );
    const err = await failure(r.run());
    expect(err.exitCode).toBe(EXIT.loginRefused);
    expect(r.requests.map((q) => q.at - 1_000_000)).toEqual([5000, 10000]);
  });

  it('stops with exit 1 and the OAuth error on any other error', async () => {
    const err = await failure(
      rig([{ status: 400, body: { error: 'invalid_client', error_description: 'unknown client' } }]).run(),
    );
    expect(err.exitCode).toBe(EXIT.api);
    expect(err.message).toBe('login failed: invalid_client: unknown client');
  });

  it('polls less often after a network failure and gives up after three in a row (exit 6)', async () => {
    const recovered = rig(['network', granted]);
    await recovered.run();
    expect(recovered.sleeps).toEqual([5000, 10000]);
    const err = await failure(rig(['network', 'network', 'network']).run());
    expect(err.exitCode).toBe(EXIT.network);
  });
});
