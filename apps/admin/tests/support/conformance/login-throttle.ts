/**
 * Conformance suite for the throttles' port (`RateLimiter` of @relayplane/shared/rate-limit):
 * every implementation runs it.
 * Windows end through the factory (a clock for memory, a rewritten TTL for Redis), never by sleeping.
 */

import type { RateLimiter } from '@relayplane/shared/rate-limit';
import { afterEach, describe, expect, it } from 'vitest';

export const WINDOW_MS = 900_000;

export interface ThrottleFactory {
  /** A new throttle with a window of `WINDOW_MS` and its own keys. */
  create(): RateLimiter;
  /** Ends the current window of `key` on `throttle`; resolves once the next hit starts a new window. */
  endWindow(throttle: RateLimiter, key: string): Promise<void>;
  cleanup?(): Promise<void>;
}

export function loginThrottleConformance(name: string, factory: ThrottleFactory): void {
  describe(`throttle conformance: ${name}`, () => {
    afterEach(async () => {
      await factory.cleanup?.();
    });

    it('counts the first attempt as 1 and starts a full window', async () => {
      const throttle = factory.create();
      const hit = await throttle.hit('login:acct:a');
      expect(hit.count).toBe(1);
      expect(hit.resetInMs).toBeGreaterThan(WINDOW_MS - 5_000);
      expect(hit.resetInMs).toBeLessThanOrEqual(WINDOW_MS);
    });

    it('counts attempts per key, and keys do not share counts', async () => {
      const throttle = factory.create();
      for (let i = 1; i <= 5; i++) expect((await throttle.hit('login:ip:10.0.0.1')).count).toBe(i);
      expect((await throttle.hit('login:ip:10.0.0.2')).count).toBe(1);
      expect((await throttle.hit('login:ip:10.0.0.1')).count).toBe(6);
    });

    it('keeps a fixed window: later attempts do not extend it', async () => {
      const throttle = factory.create();
      const first = await throttle.hit('login:acct:fixed');
      const second = await throttle.hit('login:acct:fixed');
      expect(second.count).toBe(2);
      expect(second.resetInMs).toBeGreaterThan(0);
      expect(second.resetInMs).toBeLessThanOrEqual(first.resetInMs);
    });

    it('counts concurrent attempts exactly once each', async () => {
      const throttle = factory.create();
      const hits = await Promise.all(Array.from({ length: 25 }, () => throttle.hit('login:ip:burst')));
      expect(hits.map((h) => h.count).sort((a, b) => a - b)).toEqual(
        Array.from({ length: 25 }, (_, i) => i + 1),
      );
    });

    it('starts again from 1 with a full window once the window ended', async () => {
      const throttle = factory.create();
      for (let i = 0; i < 3; i++) await throttle.hit('login:acct:expiring');
      await throttle.hit('login:acct:other');
      await factory.endWindow(throttle, 'login:acct:expiring');
      const hit = await throttle.hit('login:acct:expiring');
      expect(hit.count).toBe(1);
      expect(hit.resetInMs).toBeGreaterThan(WINDOW_MS - 5_000);
    });

    it('clear forgets one key and leaves the others', async () => {
      const throttle = factory.create();
      for (let i = 0; i < 4; i++) await throttle.hit('login:acct:cleared');
      await throttle.hit('login:acct:kept');
      await throttle.clear('login:acct:cleared');
      await throttle.clear('login:acct:never-seen');
      expect((await throttle.hit('login:acct:cleared')).count).toBe(1);
      expect((await throttle.hit('login:acct:kept')).count).toBe(2);
    });
  });
}
