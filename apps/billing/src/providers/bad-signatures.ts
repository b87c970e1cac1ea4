/**
 * Provider webhooks with a bad signature, counted per client and window (issue 31): such a
 * delivery changed nothing and proves nothing about who sent it, so recording each one would let
 * anyone fill the platform's audit chain and billing's outbox. Like refused logins, they are
 * aggregated per client (the gateway's client IP; an IPv6 address by its
 * `RELAYPLANE_THROTTLE_IPV6_PREFIX` network) and window (BAD_SIGNATURE_WINDOW_MS): the first of a
 * window is to be recorded, with how many the same client sent in the window before. Counted in
 * billing's Redis (every replica agrees), in memory without it.
 */
import { throttleClient } from '@relayplane/shared/client-address';
import type { Clock } from '@relayplane/shared/clock';
import type { RateLimiter } from '@relayplane/shared/rate-limit';
import { badSignatureKey } from '../redis/keys.ts';

/** The window bad signatures are aggregated over, per client: one audit event each at most. */
export const BAD_SIGNATURE_WINDOW_MS = 15 * 60 * 1000;

/** What the first refusal of a window records. */
export interface FirstOfWindow {
  client: string;
  /** How many the same client sent in the window before. */
  refusedPreviousWindow: number;
}

export class BadSignatures {
  readonly #limiter: RateLimiter;
  readonly #clock: Clock;
  readonly #ipv6Prefix: number;
  readonly #counter: { inc(): void } | undefined;

  /**
   * `limiter`'s window must be 2 × BAD_SIGNATURE_WINDOW_MS, so the previous window's count is
   * still there when the next one's first refusal reads it. `counter`:
   * `relayplane_billing_webhook_bad_signatures_total` (every refusal).
   */
  constructor(deps: { limiter: RateLimiter; clock: Clock; ipv6Prefix: number; counter?: { inc(): void } }) {
    this.#limiter = deps.limiter;
    this.#clock = deps.clock;
    this.#ipv6Prefix = deps.ipv6Prefix;
    this.#counter = deps.counter;
  }

  /** Counts one refusal from `clientIp` ('' unknown): the window's first answers what to record. */
  async count(clientIp: string): Promise<{ client: string; inWindow: number; first?: FirstOfWindow }> {
    const client = clientIp === '' ? 'unknown' : throttleClient(clientIp, this.#ipv6Prefix);
    const window = Math.floor(this.#clock.now().getTime() / BAD_SIGNATURE_WINDOW_MS);
    const hit = await this.#limiter.hit(badSignatureKey(client, window));
    this.#counter?.inc();
    if (hit.count !== 1) return { client, inWindow: hit.count };
    const previous = await this.#limiter.peek(badSignatureKey(client, window - 1));
    return { client, inWindow: 1, first: { client, refusedPreviousWindow: previous } };
  }
}
