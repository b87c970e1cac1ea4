import { defineConfig } from 'vitest/config';

// `pnpm rollout`: the rolling restart under load, apart from `pnpm test` until its one open
// failure is explained (about 1 in 50,000 requests answered by a closed connection, see
// docs/performance.md). Same setup as the e2e suite.
export default defineConfig({
  test: {
    globalSetup: ['../packages/testing/src/global-setup.ts'],
    include: ['rollout/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    fileParallelism: false,
  },
});
