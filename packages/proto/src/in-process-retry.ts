import type { DescMethod } from '@bufbuild/protobuf';
import * as grpc from '@grpc/grpc-js';

/** The retry policy grpc-js would apply to a method, read from the channel's service config. */
export interface RetryPolicy {
  maxAttempts: number;
  initialBackoffMs: number;
  maxBackoffMs: number;
  multiplier: number;
  codes: Set<number>;
}

export interface ServiceConfig {
  methodConfig?: {
    name?: { service?: string; method?: string }[];
    retryPolicy?: {
      maxAttempts: number;
      initialBackoff: string;
      maxBackoff: string;
      backoffMultiplier: number;
      retryableStatusCodes: (string | number)[];
    };
  }[];
  retryThrottling?: { maxTokens: number; tokenRatio: number };
}

const seconds = (value: string) => Number.parseFloat(value) * 1000;

/** The most specific methodConfig entry for the method (method > service > default), as gRPC chooses it. */
export function retryPolicyOf(config: ServiceConfig, method: DescMethod): RetryPolicy | undefined {
  const service = method.parent.typeName;
  const entries = config.methodConfig ?? [];
  const match = (test: (n: { service?: string; method?: string }) => boolean) =>
    entries.find((entry) => (entry.name ?? []).some(test));
  const entry =
    match((n) => n.service === service && n.method === method.name) ??
    match((n) => n.service === service && !n.method) ??
    match((n) => !n.service && !n.method);
  const policy = entry?.retryPolicy;
  if (!policy || method.methodKind !== 'unary') return undefined;
  return {
    maxAttempts: Math.min(policy.maxAttempts, 5),
    initialBackoffMs: seconds(policy.initialBackoff),
    maxBackoffMs: seconds(policy.maxBackoff),
    multiplier: policy.backoffMultiplier,
    codes: new Set(
      policy.retryableStatusCodes.map((c) =>
        typeof c === 'number' ? c : (grpc.status[c as keyof typeof grpc.status] as number),
      ),
    ),
  };
}

/** gRPC retry throttling: retries stop while failures outnumber successes (tokens ≤ half). */
export class RetryThrottle {
  readonly #maxTokens: number;
  readonly #ratio: number;
  #tokens: number;
  constructor(maxTokens: number, ratio: number) {
    this.#maxTokens = maxTokens;
    this.#ratio = ratio;
    this.#tokens = maxTokens;
  }
  success(): void {
    this.#tokens = Math.min(this.#maxTokens, this.#tokens + this.#ratio);
  }
  /** Records a retryable failure; answers whether a retry is allowed. */
  failure(): boolean {
    this.#tokens = Math.max(0, this.#tokens - 1);
    return this.#tokens > this.#maxTokens / 2;
  }
}
