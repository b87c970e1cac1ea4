import { createVerifier, VerificationError, type Verifier, type VerifierOptions } from '../../src/index.ts';
import { FakeControlPlane } from './control-plane.ts';
import { generateSigningKey, type SigningKey } from './tokens.ts';

export interface Harness {
  plane: FakeControlPlane;
  key: SigningKey;
  /** The verifier's clock, in ms; tests move it by assignment. */
  clock: { now: number };
  verifier: Verifier;
  errors: Error[];
  dispose(): Promise<void>;
}

/** A control plane publishing one key, and a verifier following it with a test clock. */
export async function startHarness(
  options: Partial<VerifierOptions> = {},
  beforeStart: (plane: FakeControlPlane) => void = () => {},
): Promise<Harness> {
  const plane = await FakeControlPlane.start();
  const key = await generateSigningKey();
  plane.keys = [key];
  beforeStart(plane);
  const clock = { now: Math.floor(Date.now() / 1000) * 1000 };
  const errors: Error[] = [];
  const verifier = createVerifier({
    baseUrl: plane.baseUrl,
    relayToken: plane.relayToken,
    clock: () => clock.now,
    onError: (error) => errors.push(error),
    ...options,
  });
  return {
    plane,
    key,
    clock,
    verifier,
    errors,
    async dispose() {
      await verifier.close();
      await plane.close();
    },
  };
}

/** The code a verification was refused with; fails the test if it was accepted. */
export async function refusal(verification: Promise<unknown>): Promise<string> {
  try {
    await verification;
  } catch (error) {
    if (error instanceof VerificationError) return error.code;
    throw error;
  }
  throw new Error('the credential was accepted');
}

/** Polls `condition` (no fixed sleeps) until it holds or `timeoutMs` passes. */
export async function eventually(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!condition()) {
    if (performance.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}
