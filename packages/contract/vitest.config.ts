import { defineConfig } from 'vitest/config';

// The contract's tests are unit tests: no storage, no global setup.
export default defineConfig({
  test: { include: ['src/**/*.test.ts'], testTimeout: 30_000 },
});
