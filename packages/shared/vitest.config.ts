import { defineConfig } from 'vitest/config';

// shared's own tests are unit tests (and the errors.md check): no storage, so no global setup from
// @relayplane/testing, which depends on shared. Its integration tests live in packages/testing.
export default defineConfig({
  test: { include: ['src/**/*.test.ts', 'tests/**/*.test.ts'], testTimeout: 30_000 },
});
