import { defineConfig } from 'vitest/config';

// shared's own tests are unit tests (and the errors.md check): no storage, so no global setup from
// @relayplane/testing, which depends on shared. Its integration tests live in packages/testing.
// hookTimeout: a PGlite database's first start (WASM compile, initdb) in a beforeAll has taken over
// 10 s, vitest's default, on a loaded 2-core machine.
export default defineConfig({
  test: { include: ['src/**/*.test.ts', 'tests/**/*.test.ts'], testTimeout: 30_000, hookTimeout: 60_000 },
});
